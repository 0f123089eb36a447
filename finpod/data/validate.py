"""Check bars against the bar schema; every problem is a one-line :class:`DataError`.

The message names the file, the symbol, the bar's timestamp and the fix, e.g.
``data/x.csv: AAPL 2019-02-11 14:31:00+00:00: high 10.0 < low 11.0; fix or drop that row``.
All checks are vectorised (one pass of numpy per rule), so millions of bars validate in about a second.
Nothing here repairs anything: importers repair what they know how to (and count it) before calling
:func:`validate_bars`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import numpy as np
import pandas as pd

from finpod.data.schema import BAR_COLUMNS, PRICE_COLUMNS
from finpod.errors import DataError

_NUMERIC_COLUMNS = (*PRICE_COLUMNS, "volume")


@dataclass(frozen=True)
class ValidationReport:
    """What :func:`validate_bars` found in bars that passed.

    Attributes:
        rows: number of bars.
        symbols: distinct tickers, sorted.
        zero_volume_bars: bars with volume 0 (kept, counted).
    """

    rows: int
    symbols: tuple[str, ...]
    zero_volume_bars: int


def readable(value: object) -> str:
    """A cell value as a user reads it: ``nan``, ``1.5``, ``'abc'``, ``<empty>`` (not ``np.float64(nan)``)."""
    if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
        return "nan" if value is not None else "<empty>"
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        return repr(value) if value.strip() else "<empty>"
    return str(value)


def _row_label(df: pd.DataFrame, position: int) -> str:
    symbol = df["symbol"].iloc[position]
    symbol_text = "<empty symbol>" if not isinstance(symbol, str) or not symbol.strip() else symbol
    return f"{symbol_text} {df['timestamp'].iloc[position]}"


def _first_bad(bad: np.ndarray) -> tuple[int, int] | None:
    """Position of the first ``True`` in ``bad`` and how many there are, or ``None``."""
    positions = np.flatnonzero(bad)
    if positions.size == 0:
        return None
    return int(positions[0]), int(positions.size)


def _fail(df: pd.DataFrame, source: str, hit: tuple[int, int], problem: str, fix: str) -> NoReturn:
    position, count = hit
    more = f" (and {count - 1} more rows)" if count > 1 else ""
    raise DataError(f"{source}: {_row_label(df, position)}: {problem}{more}; {fix}")


def _check_columns(df: pd.DataFrame, source: str) -> None:
    if len(df) == 0:
        raise DataError(f"{source}: empty file (no bars); export some bars into it or leave it out")
    missing = [name for name in BAR_COLUMNS if name not in df.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {', '.join(missing)} (has {', '.join(map(str, df.columns))}); "
            f"the bar schema needs {', '.join(BAR_COLUMNS)}; rename with --column-map old=new"
        )


def _check_timestamps_dtype(df: pd.DataFrame, source: str) -> None:
    dtype = df["timestamp"].dtype
    if not isinstance(dtype, pd.DatetimeTZDtype):
        if pd.api.types.is_datetime64_dtype(dtype):
            raise DataError(
                f"{source}: {_row_label(df, 0)}: naive timestamps (no time zone); "
                "write bar starts in UTC with an offset, e.g. 2019-02-11T14:30:00+00:00"
            )
        raise DataError(
            f"{source}: timestamp column has dtype {dtype}, not tz-aware datetimes; "
            "write ISO timestamps with a UTC offset, e.g. 2019-02-11T14:30:00+00:00"
        )
    if str(dtype.tz) != "UTC":
        raise DataError(
            f"{source}: {_row_label(df, 0)}: time zone {dtype.tz}, the bar schema needs UTC; "
            "convert the timestamps to UTC"
        )


def _check_symbols(df: pd.DataFrame, source: str) -> None:
    symbols = df["symbol"]
    blank = symbols.isna() | (symbols.astype("str").str.strip().str.len() == 0)
    if hit := _first_bad(blank.to_numpy(dtype=bool)):
        _fail(df, source, hit, "empty symbol", "fill in the ticker or drop that row")


def _check_numeric_dtypes(df: pd.DataFrame, source: str) -> None:
    for name in _NUMERIC_COLUMNS:
        column = df[name]
        if pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
            continue
        parsed = pd.to_numeric(column, errors="coerce")
        if hit := _first_bad((parsed.isna() & column.notna()).to_numpy(dtype=bool)):
            _fail(
                df,
                source,
                hit,
                f"{name} {readable(column.iloc[hit[0]])} is not a number",
                "write plain numbers",
            )
        raise DataError(f"{source}: column {name} has dtype {column.dtype}, not numbers; write plain numbers")


def _check_values(df: pd.DataFrame, source: str) -> None:
    values = {name: df[name].to_numpy(dtype=np.float64) for name in _NUMERIC_COLUMNS}
    for name, column in values.items():
        if hit := _first_bad(~np.isfinite(column)):
            _fail(df, source, hit, f"{name} is {column[hit[0]]}", "fill in the value or drop that row")
    for name in PRICE_COLUMNS:
        column = values[name]
        if hit := _first_bad(column <= 0):
            _fail(
                df,
                source,
                hit,
                f"non-positive {name} {column[hit[0]]}",
                "prices must be > 0; fix or drop that row",
            )
    high, low = values["high"], values["low"]
    if hit := _first_bad(high < low):
        _fail(df, source, hit, f"high {high[hit[0]]} < low {low[hit[0]]}", "fix or drop that row")
    for name in ("open", "close"):
        column = values[name]
        if hit := _first_bad((column > high) | (column < low)):
            pos = hit[0]
            problem = f"{name} {column[pos]} outside [low {low[pos]}, high {high[pos]}]"
            _fail(df, source, hit, problem, "fix or drop that row")
    volume = values["volume"]
    if hit := _first_bad(volume < 0):
        _fail(df, source, hit, f"negative volume {volume[hit[0]]}", "volume must be >= 0; fix that row")


def _check_order(df: pd.DataFrame, source: str) -> None:
    codes, _ = pd.factorize(df["symbol"])
    order = np.argsort(codes, kind="stable")
    stamps = df["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)[order]
    same_symbol = codes[order][1:] == codes[order][:-1]
    step = np.diff(stamps)
    duplicate = np.zeros(len(df), dtype=bool)
    duplicate[order[1:]] = same_symbol & (step == 0)
    if hit := _first_bad(duplicate):
        _fail(df, source, hit, "duplicate timestamp for this symbol", "keep one bar per symbol and timestamp")
    backwards = np.zeros(len(df), dtype=bool)
    backwards[order[1:]] = same_symbol & (step < 0)
    if hit := _first_bad(backwards):
        problem = "timestamp earlier than the row before it for this symbol (unsorted)"
        _fail(df, source, hit, problem, "sort the rows by symbol and timestamp, oldest first")


def invalid_rows(df: pd.DataFrame) -> np.ndarray:
    """Rows :func:`validate_bars` would refuse for their VALUES (for ``--drop-invalid-rows``).

    A row is invalid when a price or the volume is missing, not a number or not finite, a price is
    not positive, ``high < low``, open or close lies outside ``[low, high]``, the volume is negative,
    or the symbol is empty. Order and duplicates are not value problems (see ``--on-duplicate``).

    Args:
        df: bar-schema frame, ``n`` rows.

    Returns:
        ``(n,)`` bool mask, True for rows to drop.
    """
    values = {
        name: pd.to_numeric(df[name], errors="coerce").to_numpy(dtype=np.float64) for name in _NUMERIC_COLUMNS
    }
    bad = np.zeros(len(df), dtype=bool)
    for column in values.values():
        bad |= ~np.isfinite(column)
    with np.errstate(invalid="ignore"):
        for name in PRICE_COLUMNS:
            bad |= values[name] <= 0
        high, low = values["high"], values["low"]
        bad |= high < low
        for name in ("open", "close"):
            bad |= (values[name] > high) | (values[name] < low)
        bad |= values["volume"] < 0
    symbols = df["symbol"]
    bad |= (symbols.isna() | (symbols.astype("str").str.strip().str.len() == 0)).to_numpy(dtype=bool)
    return bad


def validate_bars(df: pd.DataFrame, source: str) -> ValidationReport:
    """Check a bar-schema frame; raise on the first problem, naming file, symbol, timestamp and fix.

    Rules: non-empty; columns of :data:`finpod.data.schema.BAR_COLUMNS`; ``timestamp`` tz-aware UTC;
    ``symbol`` non-empty text; prices finite and > 0 with ``low <= open, close <= high``; volume finite
    and >= 0; within each symbol, timestamps strictly increasing (no duplicates, oldest first).

    Args:
        df: bars, one row per (symbol, bar); ``n`` rows.
        source: the file or dataset the bars came from, used as the message prefix.

    Returns:
        A :class:`ValidationReport` of the bars.

    Raises:
        DataError: the first rule broken, in one line.
    """
    _check_columns(df, source)
    _check_timestamps_dtype(df, source)
    if hit := _first_bad(df["timestamp"].isna().to_numpy(dtype=bool)):
        _fail(df, source, hit, "missing timestamp", "fill in the bar start time or drop that row")
    _check_symbols(df, source)
    _check_numeric_dtypes(df, source)
    _check_values(df, source)
    _check_order(df, source)
    return ValidationReport(
        rows=len(df),
        symbols=tuple(sorted(df["symbol"].unique())),
        zero_volume_bars=int((df["volume"].to_numpy(dtype=np.float64) == 0).sum()),
    )
