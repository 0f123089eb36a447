"""Daily-adjusted files (``DA-<TICKER>-T-<date>.csv``): RAW OHLCV plus split and dividend columns.

Header ``timestamp,open,high,low,close,adjusted_close,volume,dividend_amount,split_coefficient``
(AlphaVantage's TIME_SERIES_DAILY_ADJUSTED, as published by pooksoft). The importer produces split-
AND dividend-adjusted OHLCV, consistently:

* prices: ``open/high/low/close * (adjusted_close / close)`` (one factor per row, so OHLC stay ordered);
* volume: ``volume * S`` where ``S`` is the product of the ``split_coefficient`` of every LATER row
  (a 4:1 split multiplies earlier volume by 4, i.e. divides it by the split-only price factor 1/4).

Each bar starts at its session's market open (XNAS ``session_open``) in UTC.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from finpod.data.importers.common import LoadedFile, oldest_first, parse_timestamps
from finpod.data.validate import readable, validate_bars
from finpod.data.xnas_sessions import session_opens
from finpod.errors import DataError

ADJUSTMENT_COLUMNS: Final[tuple[str, ...]] = ("adjusted_close", "dividend_amount", "split_coefficient")


def symbol_from_name(path: Path) -> str:
    """Ticker from ``DA-AAPL-T-2021-04-21.csv`` -> ``AAPL``.

    Raises:
        DataError: the name does not follow ``DA-<TICKER>-...``.
    """
    parts = path.name.split("-")
    if len(parts) < 2 or parts[0] != "DA" or not parts[1]:
        raise DataError(f"{path}: cannot tell the symbol from the file name; pass --symbol TICKER")
    return parts[1].upper()


def _numeric_column(bars: pd.DataFrame, name: str, source: str) -> np.ndarray:
    values = pd.to_numeric(bars[name], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values <= 0 if name != "dividend_amount" else values < 0))
    if bad.size:
        row = int(bad[0])
        label = f"{bars['symbol'].iloc[row]} {bars['timestamp'].iloc[row]}"
        raise DataError(
            f"{source}: {label}: {name} {readable(bars[name].iloc[row])} is missing or out of range; "
            "fix that row"
        )
    return values


def read_pooksoft(frame: pd.DataFrame, path: Path, symbol: str) -> LoadedFile:
    """Read one daily-adjusted file into split- and dividend-adjusted daily bars.

    Args:
        frame: the file's rows.
        path: the CSV file, for messages.
        symbol: ticker for every row.

    Returns:
        Adjusted daily bars (bar start = session open, UTC), oldest first.

    Raises:
        DataError: bad raw bars (see :func:`finpod.data.validate.validate_bars`), a non-session date,
            or a missing/non-positive ``adjusted_close`` or ``split_coefficient``.
    """
    raw = frame.copy()
    raw.columns = [str(name).strip().lower() for name in raw.columns]
    source = str(path)
    dates = parse_timestamps(raw["timestamp"], path, symbol)
    if isinstance(dates.dtype, pd.DatetimeTZDtype):
        raise DataError(
            f"{path}: daily-adjusted files carry session dates, not zoned times; write YYYY-MM-DD"
        )
    raw_bars = pd.DataFrame(
        {
            "timestamp": session_opens(pd.DatetimeIndex(dates), [symbol] * len(dates), source),
            "symbol": symbol,
            **{name: raw[name] for name in ("open", "high", "low", "close", "volume")},
        }
    )
    for name in ADJUSTMENT_COLUMNS:
        raw_bars[name] = raw[name]
    repairs: dict[str, int] = {}
    raw_bars = oldest_first(raw_bars, repairs)
    validate_bars(raw_bars.loc[:, ["timestamp", "symbol", "open", "high", "low", "close", "volume"]], source)
    adjusted_close = _numeric_column(raw_bars, "adjusted_close", source)
    splits = _numeric_column(raw_bars, "split_coefficient", source)
    _numeric_column(raw_bars, "dividend_amount", source)
    close = raw_bars["close"].to_numpy(dtype=np.float64)
    price_factor = adjusted_close / close
    later_splits = np.cumprod(splits[::-1])[::-1] / splits
    bars = pd.DataFrame(
        {
            "timestamp": raw_bars["timestamp"],
            "symbol": raw_bars["symbol"],
            **{
                name: raw_bars[name].to_numpy(dtype=np.float64) * price_factor
                for name in ("open", "high", "low", "close")
            },
            "volume": raw_bars["volume"].to_numpy(dtype=np.float64) * later_splits,
        }
    )
    return LoadedFile(path, bars, "1d", "split+dividend", "pooksoft", repairs, splits_recorded=True)
