"""AlphaVantage-style ``SYMBOL_1min.csv`` / ``SYMBOL_daily.csv``: naive US/Eastern, bar END, newest first.

Header ``datetime,open,high,low,close,volume`` and a name ``SYMBOL_<freq>.csv`` (the name is what says
"AlphaVantage": the same header under another name is a plain vendor CSV, whose naive intraday stamps
are refused until ``--timestamps``/``--tz`` say how to read them). Intraday stamps mark the bar's END in
New York time (09:31..16:00 for 1-minute bars), so a bar starts one period earlier; daily stamps are
session dates.
Rows come newest first and are reordered (counted as ``reordered_rows``). Prices are as the vendor
wrote them, then checked for splits (the dataset's adjustment is ``split``, or ``none`` with
``--adjustment none``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pandas as pd

from finpod.data.calendar import EXCHANGE_TIMEZONE
from finpod.data.importers.common import LoadedFile, oldest_first, parse_timestamps
from finpod.data.importers.naive_times import UNSAID, NaiveReading, naive_bar_starts
from finpod.data.xnas_sessions import session_opens
from finpod.errors import DataError

HEADER: Final[tuple[str, ...]] = ("datetime", "open", "high", "low", "close", "volume")
_NAME_PATTERN: Final[re.Pattern[str]] = re.compile(
    r"^(?P<symbol>[^_]+)_(?P<freq>\d+min|daily|weekly|monthly)$"
)
_FREQ_BY_SUFFIX: Final[dict[str, str]] = {"daily": "1d", "weekly": "1w", "monthly": "1mo"}
NAME_READING: Final[NaiveReading] = NaiveReading("end", EXCHANGE_TIMEZONE)
"""What an AlphaVantage-style file name says of its intraday stamps: bar ends, New York time."""


def frequency_from_name(path: Path) -> str | None:
    """Frequency label from a file name like ``AAPL_1min.csv`` (``1min``) or ``AAPL_daily.csv`` (``1d``).

    Args:
        path: the file.

    Returns:
        The label (``"1min"``, ``"15min"``, ``"1d"``, ``"1w"``...), or ``None`` when the name has none.
    """
    match = _NAME_PATTERN.match(path.name.split(".")[0])
    if match is None:
        return None
    suffix = match.group("freq")
    return _FREQ_BY_SUFFIX.get(suffix, suffix)


def symbol_from_name(path: Path) -> str:
    """Ticker from ``AAPL_1min.csv`` -> ``AAPL``.

    Raises:
        DataError: the name does not follow ``SYMBOL_<freq>.csv``.
    """
    match = _NAME_PATTERN.match(path.name.split(".")[0])
    if match is None:
        raise DataError(f"{path}: cannot tell the symbol from the file name; pass --symbol TICKER")
    return match.group("symbol").upper()


def read_alphavantage(
    frame: pd.DataFrame, path: Path, frequency: str, symbol: str, reading: NaiveReading = UNSAID
) -> LoadedFile:
    """Read one AlphaVantage-style file into the bar schema (UTC bar starts, oldest first).

    Args:
        frame: the file's rows (columns of :data:`HEADER`, any case).
        path: the CSV file, for messages.
        frequency: ``"1min"`` or ``"1d"``.
        symbol: ticker for every row.
        reading: the user's ``--timestamps``/``--tz``, overriding the name's "bar end, New York".

    Returns:
        The loaded bars with ``reordered_rows`` counted when the file was newest first.

    Raises:
        DataError: a timestamp is not a valid time in its zone (unparseable, DST gap or ambiguity).
    """
    raw = frame.copy()
    raw.columns = [str(name).strip().lower() for name in raw.columns]
    stamps = parse_timestamps(raw["datetime"], path, symbol)
    if isinstance(stamps.dtype, pd.DatetimeTZDtype):
        raise DataError(
            f"{path}: AlphaVantage-style files carry naive New York times, but these have UTC offsets; "
            "rename the datetime column to timestamp to import them as bar starts"
        )
    if frequency == "1d":
        starts = session_opens(pd.DatetimeIndex(stamps), [symbol] * len(stamps), str(path))
    else:
        minutes = int(frequency.removesuffix("min"))
        how = reading.over(NAME_READING)
        starts = naive_bar_starts(pd.DatetimeIndex(stamps), minutes, how, str(path), symbol)
    bars = pd.DataFrame(
        {
            "timestamp": starts,
            "symbol": symbol,
            "open": raw["open"],
            "high": raw["high"],
            "low": raw["low"],
            "close": raw["close"],
            "volume": raw["volume"],
        }
    )
    repairs: dict[str, int] = {}
    bars = oldest_first(bars, repairs)
    return LoadedFile(path, bars, frequency, "none", "alphavantage", repairs)
