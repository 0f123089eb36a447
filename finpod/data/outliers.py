"""Fat-finger prices: a bar far from the prices around it, or not a usable price after adjustment.

A price can pass every schema rule (finite, positive, ``low <= close <= high``) and still be a typo:
a close of ``1e300`` or a bar 1000x its neighbours that the next bar takes back. The split check
looks only for split ratios that persist, so such a bar would import silently. Here every bar of a
symbol is compared with the median close of the :data:`WINDOW_BARS` bars centred on it (its robust
local level; a lone bad bar, or a run of up to half the window, cannot move that median):

* open and close more than :data:`BODY_FACTOR` times above or below it, or
* high and low more than :data:`WICK_FACTOR` times above or below it,

is an outlier; so is a price that is not finite and positive after the split adjustment. A real
move to a new level is no outlier: the median follows it within half a window.

Measured on every real file in ``../shared/data`` (104 pooksoft daily files 1999..2021 adjusted,
the 72 eqker minute/15-minute/daily files, the 20 skfolio closes): the largest open/close distance
from the local median is 2.0x (a 1990s daily close), the largest high/low 3.97x (UAL's real 2008-09-08
low of $3.00 after a false bankruptcy story); the factors leave a margin of 2.5x over both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from finpod.data.schema import PRICE_COLUMNS

WINDOW_BARS: Final[int] = 21
"""Bars in the centred window whose median close is a bar's local level (10 on each side)."""
BODY_FACTOR: Final[float] = 5.0
"""Open or close this many times above (or below 1/this of) the local median is an outlier."""
WICK_FACTOR: Final[float] = 10.0
"""High or low this many times above (or below 1/this of) the local median is an outlier (real
wicks reach further than closes: UAL 2008-09-08 traded at 3.97x below its level)."""
_FACTORS: Final[dict[str, float]] = {
    "close": BODY_FACTOR,
    "open": BODY_FACTOR,
    "high": WICK_FACTOR,
    "low": WICK_FACTOR,
}


@dataclass(frozen=True)
class Outliers:
    """The outlier bars of a frame and what the first one is.

    Attributes:
        mask: ``(n,)`` bool, True for outlier bars.
        first: one line describing the first outlier (symbol, time, column, value, local level),
            empty when there is none.
    """

    mask: np.ndarray
    first: str

    @property
    def count(self) -> int:
        """The number of outlier bars."""
        return int(self.mask.sum())


def _local_level(bars: pd.DataFrame) -> np.ndarray:
    """``(n,)`` median close of the :data:`WINDOW_BARS` bars centred on each bar, within its symbol."""
    close = pd.Series(bars["close"].to_numpy(dtype=np.float64))
    rolling = close.groupby(bars["symbol"].to_numpy(), sort=False).rolling(
        WINDOW_BARS, center=True, min_periods=1
    )
    return rolling.median().droplevel(0).sort_index().to_numpy()


def find_outliers(bars: pd.DataFrame) -> Outliers:
    """Bars whose prices are unusable or implausibly far from their symbol's local level.

    Args:
        bars: bar-schema frame, ``n`` rows, oldest first within each symbol, prices adjusted.

    Returns:
        The outlier mask and a description of the first outlier.
    """
    prices = {name: bars[name].to_numpy(dtype=np.float64) for name in PRICE_COLUMNS}
    unusable = np.zeros(len(bars), dtype=bool)
    for column in prices.values():
        unusable |= ~np.isfinite(column) | (column <= 0)
    usable_close = np.where(unusable, np.nan, prices["close"])
    level = _local_level(bars.assign(close=usable_close))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        far = {
            name: (prices[name] / level > factor) | (prices[name] / level < 1.0 / factor)
            for name, factor in _FACTORS.items()
        }
    mask = unusable | np.logical_or.reduce(list(far.values()))
    if not mask.any():
        return Outliers(mask, "")
    row = int(np.flatnonzero(mask)[0])
    where = f"{bars['symbol'].iloc[row]} {bars['timestamp'].iloc[row]}"
    if unusable[row]:
        name = next(n for n, column in prices.items() if not (np.isfinite(column[row]) and column[row] > 0))
        return Outliers(mask, f"{where}: {name} {prices[name][row]:g} is not a usable price after adjustment")
    name = next(name for name in _FACTORS if far[name][row])
    ratio = prices[name][row] / level[row]
    times = f"{ratio:.3g}x" if ratio > 1 else f"1/{1 / ratio:.3g}"
    return Outliers(
        mask,
        f"{where}: {name} {prices[name][row]:g} is {times} the median close {level[row]:g} of the "
        f"{WINDOW_BARS} bars around it (a fat-finger price?)",
    )
