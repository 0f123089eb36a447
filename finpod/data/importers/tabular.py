"""Bar-schema files and common vendor CSVs (Date/Datetime/time, Open..Volume, Adj Close).

Bar-schema files (``timestamp,symbol,open,high,low,close,volume``, tz-aware UTC bar starts) import as
they are: their prices are taken as already adjusted (the schema's contract) and unsorted rows are an
error, not a repair. Vendor CSVs are recognised by common column names (case-insensitive):

=============== ==========================================
column          accepted names
=============== ==========================================
timestamp       timestamp, date, datetime, time
symbol          symbol, ticker (else the file name)
open..volume    open, high, low, close, volume
adjusted close  adj close, adj_close, adjusted_close
split ratio     stock splits, splits, split, split_ratio, split factor
=============== ==========================================

Vendor timestamps with a UTC offset are bar starts; date-only values are daily bars placed at the
session open; naive times of day are read as ``--timestamps start|end`` and ``--tz ZONE`` say, and
refused without them (see :mod:`finpod.data.importers.naive_times`). With an adjusted close, prices
are scaled by ``adjusted close / close`` (volume as given).
A split column (new shares per old, 0 or 1 for none) is applied where the prices still jump by the
ratio, counted where they do not (already adjusted), and refused otherwise: never ignored.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from finpod.data.importers.common import LoadedFile, infer_frequency, oldest_first, parse_timestamps
from finpod.data.importers.naive_times import UNSAID, NaiveReading, naive_bar_starts
from finpod.data.schema import BAR_COLUMNS
from finpod.data.splits import PRICE_TOLERANCE, parse_ratio, ratio_text
from finpod.data.store import Adjustment
from finpod.data.validate import readable
from finpod.data.xnas_sessions import session_opens
from finpod.errors import DataError

ALIASES: Final[dict[str, str]] = {
    "timestamp": "timestamp",
    "date": "timestamp",
    "datetime": "timestamp",
    "time": "timestamp",
    "symbol": "symbol",
    "ticker": "symbol",
    "open": "open",
    "high": "high",
    "low": "low",
    "close": "close",
    "volume": "volume",
    "adj close": "adjusted_close",
    "adj_close": "adjusted_close",
    "adjusted_close": "adjusted_close",
    "stock splits": "split_ratio",
    "stock_splits": "split_ratio",
    "splits": "split_ratio",
    "split": "split_ratio",
    "split_ratio": "split_ratio",
    "split ratio": "split_ratio",
    "split_factor": "split_ratio",
    "split factor": "split_ratio",
}
VENDOR_REQUIRED: Final[frozenset[str]] = frozenset({"timestamp", "open", "high", "low", "close", "volume"})


def canonical_columns(columns: list[str]) -> dict[str, str]:
    """Map each recognised vendor column name to its bar-schema name.

    Args:
        columns: the file's column names.

    Returns:
        ``{file name: canonical name}`` for the names in :data:`ALIASES` (case-insensitive).

    Raises:
        DataError: two columns map to the same canonical name.
    """
    mapping: dict[str, str] = {}
    for name in columns:
        canonical = ALIASES.get(str(name).strip().lower())
        if canonical is None:
            continue
        if canonical in mapping.values():
            other = next(key for key, value in mapping.items() if value == canonical)
            raise DataError(
                f"columns {other!r} and {name!r} both mean {canonical}; "
                "drop one or rename it with --column-map"
            )
        mapping[name] = canonical
    return mapping


def is_bar_schema(columns: list[str]) -> bool:
    """Whether the columns are exactly the bar schema's (any order)."""
    return set(columns) == set(BAR_COLUMNS)


def _daily_or_zoned(
    stamps: pd.Series, symbols: pd.Series, source: str, frequency: str, reading: NaiveReading
) -> pd.DatetimeIndex:
    """UTC bar starts: zoned stamps as given, dates at the session open, naive times as ``reading`` says."""
    index = pd.DatetimeIndex(stamps)
    if index.tz is not None:
        return index.tz_convert("UTC")
    if (index == index.normalize()).all():
        return session_opens(index, symbols.astype("str").tolist(), source)
    minutes = int(frequency.removesuffix("min")) if frequency.endswith("min") else 0
    return naive_bar_starts(index, minutes, reading, source, str(symbols.iloc[0]))


def read_bar_schema(frame: pd.DataFrame, path: Path) -> LoadedFile:
    """Bars from a file already in the bar schema (tz-aware UTC bar starts, adjusted prices).

    Args:
        frame: the file's rows, columns exactly :data:`finpod.data.schema.BAR_COLUMNS`.
        path: where they came from.

    Returns:
        The bars, frequency inferred from their spacing.
    """
    bars = frame.loc[:, list(BAR_COLUMNS)].copy()
    bars["timestamp"] = parse_timestamps(bars["timestamp"], path, bars["symbol"])
    return LoadedFile(path, bars, infer_frequency(bars), "split+dividend", "bars")


def read_vendor(
    frame: pd.DataFrame, path: Path, symbol: str, frequency: str, reading: NaiveReading = UNSAID
) -> LoadedFile:
    """Bars from a vendor CSV with recognised column names (see the module docstring).

    Args:
        frame: the file's rows, columns already mapped to canonical names.
        path: where they came from.
        symbol: ticker for rows without a ``symbol`` column.
        frequency: the bar size (``"1min"``...), the length a bar END is moved back by.
        reading: how to read naive intraday timestamps (``--timestamps``/``--tz``); refused unset.

    Returns:
        Bars oldest first (reordering counted), adjusted when the file has an adjusted close.
    """
    source = str(path)
    symbols = frame["symbol"] if "symbol" in frame.columns else pd.Series(symbol, index=frame.index)
    stamps = parse_timestamps(frame["timestamp"], path, symbols)
    starts = _daily_or_zoned(stamps, symbols, source, frequency, reading)
    bars = pd.DataFrame(
        {
            "timestamp": starts,
            "symbol": symbols.to_numpy(),
            **{name: frame[name].to_numpy() for name in ("open", "high", "low", "close", "volume")},
        }
    )
    if "split_ratio" in frame.columns:
        bars[SPLIT_COLUMN] = frame["split_ratio"].to_numpy()
    adjustment: Adjustment = "none"
    if "adjusted_close" in frame.columns:
        adjusted = pd.to_numeric(frame["adjusted_close"], errors="coerce").to_numpy(dtype=np.float64)
        close = pd.to_numeric(frame["close"], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(adjusted) | (adjusted <= 0))
        if bad.size:
            row = int(bad[0])
            raise DataError(
                f"{source}: {bars['symbol'].iloc[row]} {bars['timestamp'].iloc[row]}: adjusted close "
                f"{readable(frame['adjusted_close'].iloc[row])} is missing or non-positive; fix that row"
            )
        factor = adjusted / close
        for name in ("open", "high", "low", "close"):
            bars[name] = pd.to_numeric(bars[name], errors="coerce").to_numpy(dtype=np.float64) * factor
        adjustment = "split+dividend"
    repairs: dict[str, int] = {}
    bars = oldest_first(bars, repairs)
    recorded = SPLIT_COLUMN in bars.columns
    if recorded:
        bars = _apply_split_column(bars, source, repairs)
    return LoadedFile(path, bars, infer_frequency(bars), adjustment, "csv", repairs, splits_recorded=recorded)


SPLIT_COLUMN: Final[str] = "split_ratio"
SPLITS_APPLIED: Final[str] = "vendor_splits_applied"
SPLITS_ALREADY_ADJUSTED: Final[str] = "vendor_splits_already_in_prices"
_ALREADY_ADJUSTED_JUMP: Final[float] = 0.25
"""A listed split whose bar moves less than 25 % is already in the prices (the vendor adjusted them)."""


def _apply_split_column(bars: pd.DataFrame, source: str, repairs: dict[str, int]) -> pd.DataFrame:
    """Apply a vendor's split column (``Stock Splits``: new shares per old, 0 or 1 = none), never ignore it.

    At each listed split the prices either jump by the ratio (raw prices: earlier bars are divided by
    it, their volume multiplied; counted as ``vendor_splits_applied``) or do not move much (the vendor
    already adjusted them: counted as ``vendor_splits_already_in_prices``). Anything else is refused.

    Raises:
        DataError: a bad ratio, or a listed split whose price jump matches neither case.
    """
    values = pd.to_numeric(bars[SPLIT_COLUMN], errors="coerce").fillna(0.0).to_numpy(dtype=np.float64)
    bars = bars.drop(columns=[SPLIT_COLUMN])
    for name in ("open", "high", "low", "close", "volume"):
        bars[name] = pd.to_numeric(bars[name], errors="coerce").to_numpy(dtype=np.float64)
    symbols = bars["symbol"].to_numpy()
    for row in np.flatnonzero((values > 0) & (values != 1.0)):
        ratio = parse_ratio(values[row], f"{source}: {symbols[row]} {bars['timestamp'].iloc[row]}")
        if row == 0 or symbols[row - 1] != symbols[row]:
            continue  # a split on a symbol's first bar: nothing earlier to adjust
        jump = float(bars["close"].iloc[row - 1] / bars["open"].iloc[row])
        earlier = (symbols == symbols[row]) & (np.arange(len(bars)) < row)
        if abs(math.log(jump / float(ratio))) < math.log1p(PRICE_TOLERANCE):
            for name in ("open", "high", "low", "close"):
                bars.loc[earlier, name] = bars.loc[earlier, name] / float(ratio)
            bars.loc[earlier, "volume"] = bars.loc[earlier, "volume"] * float(ratio)
            repairs[SPLITS_APPLIED] = repairs.get(SPLITS_APPLIED, 0) + 1
        elif abs(math.log(jump)) < math.log1p(_ALREADY_ADJUSTED_JUMP):
            repairs[SPLITS_ALREADY_ADJUSTED] = repairs.get(SPLITS_ALREADY_ADJUSTED, 0) + 1
        else:
            raise DataError(
                f"{source}: {symbols[row]} {bars['timestamp'].iloc[row]}: the split column lists a "
                f"{ratio_text(ratio)} split but the price moved x{1 / jump:.3f}, neither raw nor adjusted; "
                "fix the split column or the prices of that row"
            )
    return bars
