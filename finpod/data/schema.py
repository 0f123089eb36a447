"""The one bar schema used at every edge of finpod.

A long pandas DataFrame, one row per (symbol, bar):

=========== ===================== ==========================================
column      dtype                 meaning
=========== ===================== ==========================================
timestamp   datetime64[ns, UTC]   bar START, tz-aware UTC
symbol      str                   ticker as traded at the time
open        float64               price, split- and dividend-adjusted
high        float64
low         float64
close       float64
volume      float64               shares, adjusted like the prices
=========== ===================== ==========================================
"""

from __future__ import annotations

from typing import Final, Literal

BAR_COLUMNS: Final[tuple[str, ...]] = ("timestamp", "symbol", "open", "high", "low", "close", "volume")
PRICE_COLUMNS: Final[tuple[str, ...]] = ("open", "high", "low", "close")
Frequency = Literal["1min", "1d"]
FREQUENCIES: Final[tuple[str, ...]] = ("1min", "1d")
