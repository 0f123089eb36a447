"""Pieces every importer shares: the loaded-file record, reading, timestamp parsing, reordering."""

from __future__ import annotations

import zlib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from finpod.data.store import Adjustment
from finpod.data.textfile import sniff_csv, source_line
from finpod.data.validate import readable
from finpod.errors import DataError

_NS_PER_MINUTE: Final[int] = 60_000_000_000
_MINUTES_PER_DAY: Final[int] = 1440
_DAYS_PER_WEEK: Final[int] = 7
UNKNOWN_FREQUENCY: Final[str] = "unknown"
REORDERED_ROWS: Final[str] = "reordered_rows"
ZERO_VOLUME_BARS: Final[str] = "zero_volume_bars"
OUTSIDE_REGULAR_HOURS: Final[str] = "outside_regular_hours_bars_dropped"


@dataclass
class LoadedFile:
    """Bars of one file in the bar schema, with what the importer did to them.

    Attributes:
        path: the file read.
        bars: bar-schema frame (UTC bar starts), oldest first within each symbol.
        frequency: ``"1min"`` or ``"1d"``.
        adjustment: price adjustment of ``bars``.
        source: format name recorded in the manifest (``alphavantage``, ``pooksoft``, ``bars``, ``csv``).
        repairs: what was repaired, counted.
        splits_recorded: the file carries its own split record (a split column), already applied;
            the import does not second-guess it with :func:`finpod.data.splits.detect_splits`.
    """

    path: Path
    bars: pd.DataFrame
    frequency: str
    adjustment: Adjustment
    source: str
    repairs: dict[str, int] = field(default_factory=dict)
    splits_recorded: bool = False


SYMBOL_NAMES: Final[frozenset[str]] = frozenset({"symbol", "ticker"})
"""Column names (case-insensitive) that hold tickers: read as text, never as numbers."""


def read_table(path: Path, symbol_columns: Collection[str] = ()) -> pd.DataFrame:
    """Read a CSV (optionally gzipped) or parquet file as it is, column names unchanged.

    Ticker columns (named ``symbol``/``ticker`` in any case, or in ``symbol_columns``) are read as
    text, so numeric tickers (``7203``, ``0700``) keep their digits and leading zeros.

    Args:
        path: a ``.csv``, ``.csv.gz`` or ``.parquet`` file.
        symbol_columns: further column names that hold tickers (``--column-map X=symbol``).

    Returns:
        The file's rows.

    Raises:
        DataError: the file is empty or cannot be parsed, or a parquet ticker column holds
            something other than text or integers.
    """
    try:
        if path.suffix == ".parquet":
            return _tickers_as_text(pd.read_parquet(path), path, symbol_columns)
        encoding, delimiter = sniff_csv(path)
        header = pd.read_csv(path, encoding=encoding, sep=delimiter, nrows=0).columns
        text = {name: "str" for name in header if _is_symbol_column(name, symbol_columns)}
        return pd.read_csv(path, encoding=encoding, sep=delimiter, dtype=text)
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path}: not UTF-8 or UTF-16 text (byte {err.start}: {err.reason}); save it as UTF-8 CSV"
        ) from None
    except pd.errors.EmptyDataError:
        raise DataError(
            f"{path}: empty file (no header, no bars); export some bars into it or leave it out"
        ) from None
    except (ValueError, OSError, EOFError, zlib.error, pd.errors.ParserError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise DataError(f"{path}: cannot be read as CSV/parquet ({reason}); check the file") from None


def _is_symbol_column(name: object, symbol_columns: Collection[str]) -> bool:
    return str(name).strip().lower() in SYMBOL_NAMES or name in symbol_columns


def _tickers_as_text(frame: pd.DataFrame, path: Path, symbol_columns: Collection[str]) -> pd.DataFrame:
    """A parquet file's integer ticker columns as text; other non-text tickers refused."""
    for name in frame.columns:
        if not _is_symbol_column(name, symbol_columns):
            continue
        dtype = frame[name].dtype
        if pd.api.types.is_integer_dtype(dtype):
            frame[name] = frame[name].astype("str")
        elif not (pd.api.types.is_string_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype)):
            raise DataError(
                f"{path}: column {name} holds tickers but has dtype {dtype}; write the tickers as text"
            )
    return frame


def parse_timestamps(values: pd.Series, path: Path, symbol: str | pd.Series) -> pd.Series:
    """Parse ISO 8601 timestamps; naive values stay naive, values with offsets become UTC.

    Args:
        values: text (or datetime) column, one value per row, indexed by the file's data record
            (as :func:`read_table` numbers them).
        path: the file, for messages (which name its real line, see :func:`source_line`).
        symbol: ticker for messages, or each row's ticker.

    Returns:
        datetime64 series (tz-naive, or tz-aware UTC when the text carries offsets).

    Raises:
        DataError: a value is not a timestamp (or names an unknown time zone), or values mix naive and
            zoned stamps; the message names the file's line.
    """
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return values.dt.tz_convert("UTC")
    if pd.api.types.is_datetime64_dtype(values.dtype):
        return values
    coerced = pd.to_datetime(values, format="ISO8601", errors="coerce", utc=True)
    bad = np.flatnonzero((coerced.isna() & values.notna()).to_numpy() | values.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        good = values.astype("str")[coerced.notna().to_numpy()]
        dates_only = bool(len(good)) and not good.str.contains(":", regex=False).any()
        example = "2019-02-11 (a date: daily bars)" if dates_only else "2019-02-11T14:30:00+00:00"
        raise DataError(
            f"{path}: {_symbol_at(symbol, row)} {_where(path, values, row)}: timestamp "
            f"{readable(values.iloc[row])} is not an ISO 8601 "
            f"{'date' if dates_only else 'time with a known UTC offset'}; write e.g. {example}"
        )
    text = values.astype("str")
    zoned = text.str.contains(r"(?:[+-]\d\d:?\d\d|Z)$", regex=True).to_numpy()
    if zoned.all():
        return coerced
    if not zoned.any():
        return pd.to_datetime(values, format="ISO8601")
    row = int(np.flatnonzero(zoned != zoned[0])[0])
    raise DataError(
        f"{path}: {_symbol_at(symbol, row)} {_where(path, values, row)}: timestamps mix values with and "
        "without a UTC offset; write every timestamp with its offset"
    )


def _where(path: Path, values: pd.Series, row: int) -> str:
    """The file line (or parquet row) of ``values``' row ``row``, from its record index."""
    label = values.index[row]
    return source_line(path, int(label) if isinstance(label, (int, np.integer)) else row)


def _symbol_at(symbol: str | pd.Series, row: int) -> str:
    if isinstance(symbol, str):
        return symbol
    value = symbol.iloc[row]
    return str(value) if isinstance(value, str) and value.strip() else "(no symbol)"


def oldest_first(bars: pd.DataFrame, repairs: dict[str, int]) -> pd.DataFrame:
    """Reorder a vendor file's bars oldest first within each symbol; count the rows if it had to.

    Args:
        bars: bar-schema frame from one vendor file.
        repairs: counter dict updated with ``reordered_rows`` (rows of a reordered file).

    Returns:
        Bars sorted by ``(symbol, timestamp)``, stable, so duplicates stay for validation to report.
    """
    ordered = bars.sort_values(["symbol", "timestamp"], kind="stable", ignore_index=True)
    if not ordered["timestamp"].equals(bars["timestamp"].reset_index(drop=True)):
        repairs[REORDERED_ROWS] = repairs.get(REORDERED_ROWS, 0) + len(bars)
    return ordered


def infer_frequency(bars: pd.DataFrame) -> str:
    """Frequency label from the smallest step between a symbol's consecutive bars.

    Args:
        bars: frame with ``timestamp`` (datetime64, naive or zoned) and ``symbol`` columns.

    Returns:
        ``"1min"``, ``"<k>min"``, ``"1d"`` (steps of 1 to 6 days) or ``"<k>d"``; ``"unknown"`` when no
        symbol has two distinct bars.
    """
    if not pd.api.types.is_datetime64_any_dtype(bars["timestamp"].dtype):
        return UNKNOWN_FREQUENCY
    ordered = bars.sort_values(["symbol", "timestamp"], kind="stable")
    stamps = ordered["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
    codes, _ = pd.factorize(ordered["symbol"])
    steps = np.diff(stamps)[(codes[1:] == codes[:-1]) & (np.diff(stamps) > 0)]
    if steps.size == 0:
        return UNKNOWN_FREQUENCY
    minutes = int(steps.min() // _NS_PER_MINUTE)
    if minutes < _MINUTES_PER_DAY:
        return f"{minutes}min"
    days = minutes // _MINUTES_PER_DAY
    return "1d" if days < _DAYS_PER_WEEK else f"{days}d"
