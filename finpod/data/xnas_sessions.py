"""XNAS session lookups for the data sources, on top of :mod:`finpod.data.calendar`.

Session opens for daily bars (with errors that name the file and symbol), a regular-hours test for
minute bars, and the first ``n`` sessions from a date (the synthetic market).
Times are int64 UTC nanoseconds or tz-aware UTC; everything is vectorised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pandas as pd

from finpod.data.calendar import EXCHANGE_TIMEZONE, CalendarGrid, calendar_grid
from finpod.errors import DataError

_CALENDAR_DAYS_PER_SESSION: Final[float] = 1.5
"""Upper bound of calendar days per XNAS session (365.25 / ~250), to size a date window."""
_WINDOW_SLACK_DAYS: Final[int] = 10
_ANCHOR_YEARS: Final[int] = 10
"""Daily look-ups start at a decade boundary so files with different first dates share one calendar."""


def sessions_from(start: pd.Timestamp, count: int) -> CalendarGrid:
    """The daily grid of the first ``count`` XNAS sessions on or after ``start``.

    Args:
        start: first calendar date to consider.
        count: number of sessions wanted (> 0).

    Returns:
        A ``"1d"`` :class:`~finpod.data.calendar.CalendarGrid` with ``count`` sessions.

    Raises:
        DataError: the calendar does not reach that far.
    """
    span = pd.Timedelta(days=int(count * _CALENDAR_DAYS_PER_SESSION) + _WINDOW_SLACK_DAYS)
    grid = calendar_grid("1d", start, start + span)
    if grid.num_bars < count:
        raise DataError(
            f"{count} sessions from {start.date()} run past the XNAS calendar; "
            "use fewer days or an earlier start"
        )
    keep = slice(0, count)
    return CalendarGrid(
        "1d",
        grid.timestamps_ns[keep],
        grid.session_ids[keep],
        grid.session_dates[keep],
        grid.session_open_ns[keep],
        grid.session_close_ns[keep],
    )


def _daily_grid(first: pd.Timestamp, last: pd.Timestamp, source: str) -> CalendarGrid:
    """Daily grid covering ``first..last``, starting at the decade of ``first`` (one cached calendar)."""
    anchor = pd.Timestamp(year=first.year - first.year % _ANCHOR_YEARS, month=1, day=1)
    try:
        return calendar_grid("1d", anchor, last)
    except DataError as err:
        raise DataError(f"{source}: {err}") from None


def session_opens(dates: pd.DatetimeIndex, symbols: Sequence[str], source: str) -> pd.DatetimeIndex:
    """Map session dates to their market open (the bar START of a daily bar), in UTC.

    Args:
        dates: tz-naive dates, one per daily bar.
        symbols: the ticker of each bar, for the error message.
        source: file name for the error message.

    Returns:
        UTC open times, same length as ``dates``.

    Raises:
        DataError: a date is not an XNAS session (weekend or holiday).
    """
    days = dates.normalize().as_unit("ns")
    grid = _daily_grid(days.min(), days.max(), source)
    session_days = grid.session_dates.asi8
    wanted = days.asi8
    index = np.clip(np.searchsorted(session_days, wanted), 0, len(session_days) - 1)
    missing = np.flatnonzero(session_days[index] != wanted)
    if missing.size:
        row = int(missing[0])
        more = f" (and {missing.size - 1} more)" if missing.size > 1 else ""
        raise DataError(
            f"{source}: {symbols[row]} {days[row].date()}: not an XNAS trading session{more}; "
            "daily bars must fall on NASDAQ trading days; drop that row"
        )
    return pd.DatetimeIndex(grid.session_open_ns[index].astype("datetime64[ns]")).tz_localize("UTC")


def regular_hours_mask(stamps_ns: np.ndarray, source: str) -> np.ndarray:
    """Which minute-bar starts lie inside an XNAS regular session (open <= t < close).

    Args:
        stamps_ns: int64 ``(n,)`` UTC bar starts in nanoseconds.
        source: file name for error messages.

    Returns:
        bool ``(n,)``.
    """
    if stamps_ns.size == 0:
        return np.zeros(0, dtype=bool)
    first_day, last_day = _local_date_bounds(stamps_ns)
    grid = _daily_grid(first_day - pd.Timedelta(days=1), last_day + pd.Timedelta(days=1), source)
    index = np.searchsorted(grid.session_open_ns, stamps_ns, side="right") - 1
    clipped = np.clip(index, 0, len(grid.session_open_ns) - 1)
    return (index >= 0) & (stamps_ns < grid.session_close_ns[clipped])


def session_edges(stamps_ns: np.ndarray, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Which minute-bar stamps sit exactly at an XNAS regular session's open, and which at its close.

    Args:
        stamps_ns: int64 ``(n,)`` UTC instants in nanoseconds.
        source: file name for error messages.

    Returns:
        bool ``(n,)`` twice: at a session's open (09:30 New York), at a session's close (16:00, or
        13:00 on a half day).
    """
    if stamps_ns.size == 0:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
    first_day, last_day = _local_date_bounds(stamps_ns)
    grid = _daily_grid(first_day - pd.Timedelta(days=1), last_day + pd.Timedelta(days=1), source)
    return np.isin(stamps_ns, grid.session_open_ns), np.isin(stamps_ns, grid.session_close_ns)


def _local_date_bounds(stamps_ns: np.ndarray) -> tuple[pd.Timestamp, pd.Timestamp]:
    """First and last New York calendar date of UTC instants, as naive midnight timestamps."""
    bounds = (
        pd.DatetimeIndex([stamps_ns.min(), stamps_ns.max()]).tz_localize("UTC").tz_convert(EXCHANGE_TIMEZONE)
    )
    first, last = bounds.tz_localize(None).normalize()
    return first, last
