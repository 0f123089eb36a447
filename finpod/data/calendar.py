"""XNAS (NASDAQ) trading calendar: the bar grid of a panel, and aligning bars onto it.

The grid comes from exchange-calendars' ``XNAS`` calendar: for ``1min`` every regular-hours minute
start (390 a full day, 210 on a half day, 09:30..15:59 America/New_York whatever the DST offset); for
``1d`` one bar per session, stamped at the session's open in UTC. :func:`align` reindexes a long
bar-schema frame onto that grid, vectorised (numpy scatter, no per-row Python):

* a missing bar is filled from the symbol's last close (open = high = low = close = last close,
  volume 0) and marked ``filled`` (not tradable);
* before a symbol's first bar in the window its prices are its first traded price (the first bar's
  open) and volume 0, also ``filled``: the env may value a zero position there safely, and features
  ignore those rows (see :mod:`finpod.data.features`);
* bars that are not on the grid (pre/post-market, weekends, holidays, odd seconds) are dropped and
  counted in :attr:`AlignmentCounts.off_calendar_bars`; ``regular_hours_only=False`` widens the
  minute grid to the extended session 04:00..20:00 America/New_York (17:00 on half days).
"""

from __future__ import annotations

import datetime as dt
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import exchange_calendars as xcals
import numpy as np
import pandas as pd

from finpod.data.schema import FREQUENCIES, PRICE_COLUMNS
from finpod.errors import DataError

CALENDAR_NAME: Final[str] = "XNAS"
EXCHANGE_TIMEZONE: Final[str] = "America/New_York"
NS_PER_MINUTE: Final[int] = 60 * 1_000_000_000
NS_PER_DAY: Final[int] = 24 * 60 * NS_PER_MINUTE
FULL_SESSION_MINUTES: Final[int] = 390
PRE_MARKET_MINUTES: Final[int] = 330
"""Extended session: 04:00 America/New_York is 330 minutes before the 09:30 open."""
POST_MARKET_MINUTES: Final[int] = 240
"""Extended session: 20:00 America/New_York is 240 minutes after the 16:00 close."""
ABSENT_PRICE_USD: Final[float] = 1.0
"""Placeholder price of a symbol with no bar at all in the window (never tradable there)."""

DateLike = str | dt.date | pd.Timestamp


@dataclass(frozen=True)
class CalendarGrid:
    """The bars of the exchange calendar between two session dates.

    Attributes:
        frequency: ``"1min"`` or ``"1d"``.
        timestamps_ns: int64 ``(T,)`` bar starts, UTC nanoseconds since the epoch, increasing.
        session_ids: int64 ``(T,)`` index into the sessions below of each bar's session (0 first).
        session_dates: ``(S,)`` naive session labels (the New York trading date), increasing.
        session_open_ns: int64 ``(S,)`` regular-hours open of each session, UTC nanoseconds.
        session_close_ns: int64 ``(S,)`` regular-hours close (exclusive end) of each session.
    """

    frequency: str
    timestamps_ns: np.ndarray
    session_ids: np.ndarray
    session_dates: pd.DatetimeIndex
    session_open_ns: np.ndarray
    session_close_ns: np.ndarray

    @property
    def num_bars(self) -> int:
        """``T``, the number of bars of the grid."""
        return int(self.timestamps_ns.shape[0])


@dataclass(frozen=True)
class AlignmentCounts:
    """What :func:`align` did to the input bars, for reports.

    Attributes:
        real_bars: input bars placed on the grid (one per real ``(bar, symbol)`` cell).
        filled_bars: grid cells filled from the last close, after the symbol's first bar.
        before_first_bar: grid cells before a symbol's first bar (filled with its first price).
        off_calendar_bars: input bars inside the date window but not on the grid, dropped
            (pre/post-market when ``regular_hours_only``, non-session days, unaligned stamps).
    """

    real_bars: int
    filled_bars: int
    before_first_bar: int
    off_calendar_bars: int


@dataclass(frozen=True)
class AlignedBars:
    """Bars of ``M`` symbols reindexed onto a :class:`CalendarGrid` (``T`` rows).

    Attributes:
        grid: the calendar grid (row ``t`` is ``grid.timestamps_ns[t]``).
        symbols: the ``M`` symbols, in column order.
        open, high, low, close: float32 ``(T, M)`` prices, USD per share, filled as the module says.
        volume: float32 ``(T, M)`` shares, 0 where filled.
        real: bool ``(T, M)``, True where the input had a bar (not filled).
        first_bar: int64 ``(M,)`` row of each symbol's first real bar (``T`` if it has none).
        counts: what was filled and dropped.
    """

    grid: CalendarGrid
    symbols: tuple[str, ...]
    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    real: np.ndarray
    first_bar: np.ndarray
    counts: AlignmentCounts


def to_session_date(value: DateLike, what: str) -> pd.Timestamp:
    """Parse a user date (``"2020-01-31"``, a date or a timestamp) into a naive midnight timestamp.

    Args:
        value: the date; a tz-aware timestamp is read in America/New_York.
        what: what the date is, for the error message (e.g. ``"start"``).

    Raises:
        DataError: the value is not a date.
    """
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError) as err:
        raise DataError(f"{what} {value!r} is not a date; write it as YYYY-MM-DD") from err
    if stamp is pd.NaT:
        raise DataError(f"{what} {value!r} is not a date; write it as YYYY-MM-DD")
    if stamp.tzinfo is not None:
        stamp = stamp.tz_convert(EXCHANGE_TIMEZONE).tz_localize(None)
    return stamp.normalize()


@lru_cache(maxsize=8)
def _xnas(first_date: pd.Timestamp) -> xcals.ExchangeCalendar:
    """The XNAS calendar covering ``first_date`` onwards (exchange-calendars' own cache is per args)."""
    default = xcals.get_calendar(CALENDAR_NAME)
    if first_date >= default.first_session:
        return default
    return xcals.get_calendar(CALENDAR_NAME, start=first_date)


def calendar_grid(
    freq: str, start: DateLike, end: DateLike, *, regular_hours_only: bool = True
) -> CalendarGrid:
    """The XNAS bar grid of the sessions from ``start`` to ``end`` (both dates inclusive).

    Args:
        freq: ``"1min"`` (minute bars) or ``"1d"`` (one bar per session at its open).
        start: first session date to include.
        end: last session date to include.
        regular_hours_only: for ``1min``, True keeps 09:30..15:59 New York; False uses the extended
            session 04:00..19:59 (16:59 on half days). Ignored for ``1d``.

    Raises:
        DataError: unknown frequency, bad dates, ``end`` before ``start``, no session in the range, or
            a range outside what the calendar knows.
    """
    if freq not in FREQUENCIES:
        raise DataError(f"unknown frequency {freq!r}; use one of {', '.join(FREQUENCIES)}")
    first, last = to_session_date(start, "start"), to_session_date(end, "end")
    if last < first:
        raise DataError(f"end {last.date()} is before start {first.date()}; swap them")
    cal = _xnas(first)
    if last > cal.last_session:
        raise DataError(
            f"end {last.date()} is after the last session the XNAS calendar knows "
            f"({cal.last_session.date()}); pick an earlier end date"
        )
    schedule = cal.schedule.loc[first:last]
    if schedule.empty:
        raise DataError(f"no XNAS session between {first.date()} and {last.date()}; widen the dates")
    opens = pd.DatetimeIndex(schedule["open"]).as_unit("ns").asi8
    closes = pd.DatetimeIndex(schedule["close"]).as_unit("ns").asi8
    dates = pd.DatetimeIndex(schedule.index).as_unit("ns")
    if freq == "1d":
        ids = np.arange(len(opens), dtype=np.int64)
        return CalendarGrid(freq, opens.copy(), ids, dates, opens, closes)
    grid_open, grid_close = opens, closes
    if not regular_hours_only:
        grid_open = opens - PRE_MARKET_MINUTES * NS_PER_MINUTE
        grid_close = closes + POST_MARKET_MINUTES * NS_PER_MINUTE
    minutes_per_session = (grid_close - grid_open) // NS_PER_MINUTE
    ids = np.repeat(np.arange(len(opens), dtype=np.int64), minutes_per_session)
    session_first_row = np.cumsum(minutes_per_session) - minutes_per_session
    minute_in_session = np.arange(ids.shape[0], dtype=np.int64) - session_first_row[ids]
    stamps = grid_open[ids] + minute_in_session * NS_PER_MINUTE
    return CalendarGrid(freq, stamps, ids, dates, opens, closes)


def bar_starts(
    freq: str, start: DateLike, end: DateLike, *, regular_hours_only: bool = True
) -> pd.DatetimeIndex:
    """UTC bar starts of the XNAS grid (see :func:`calendar_grid` for the arguments)."""
    grid = calendar_grid(freq, start, end, regular_hours_only=regular_hours_only)
    return pd.DatetimeIndex(grid.timestamps_ns.astype("datetime64[ns]")).tz_localize("UTC")


def session_day_numbers(timestamps_ns: np.ndarray) -> np.ndarray:
    """New York calendar date of UTC instants, as int64 days since 1970-01-01, shape like the input."""
    local = pd.DatetimeIndex(timestamps_ns.astype("datetime64[ns]")).tz_localize("UTC")
    naive = local.tz_convert(EXCHANGE_TIMEZONE).tz_localize(None).as_unit("ns").asi8
    return naive // NS_PER_DAY


def _timestamps_ns(bars: pd.DataFrame) -> np.ndarray:
    """int64 UTC nanoseconds of the ``timestamp`` column; naive stamps are an error."""
    column = bars["timestamp"]
    if not isinstance(column.dtype, pd.DatetimeTZDtype):
        raise DataError(
            f"bars column 'timestamp' has dtype {column.dtype}, not tz-aware datetimes; "
            "localise it (e.g. tz_localize('America/New_York')) and convert to UTC"
        )
    return pd.DatetimeIndex(column).tz_convert("UTC").as_unit("ns").asi8


@dataclass(frozen=True)
class _GridLookup:
    """Grid row by day (``1d``) or by minute of the window (``1min``): ``table[unit - first_unit]``
    is the row of that day or minute, -1 off the grid. Built once per :func:`align`, read by its threads."""

    frequency: str
    table: np.ndarray
    window_start_ns: int
    """``1min``: the window's first instant (New York midnight of the first session, in UTC)."""
    window_span_ns: int
    first_day: int
    last_day: int


def _grid_lookup(grid: CalendarGrid) -> _GridLookup:
    """The :class:`_GridLookup` of ``grid``."""
    first_day = int(grid.session_dates[0].value // NS_PER_DAY)
    last_day = int(grid.session_dates[-1].value // NS_PER_DAY)
    if grid.frequency == "1d":
        table = np.full(last_day - first_day + 1, -1, dtype=np.int64)
        table[grid.session_dates.asi8 // NS_PER_DAY - first_day] = np.arange(grid.num_bars)
        return _GridLookup(grid.frequency, table, 0, 0, first_day, last_day)
    window = pd.DatetimeIndex(
        [grid.session_dates[0], grid.session_dates[-1] + pd.Timedelta(days=1)]
    ).tz_localize(EXCHANGE_TIMEZONE)
    window_start_ns, window_end_ns = (int(v) for v in window.tz_convert("UTC").as_unit("ns").asi8)
    table = np.full((window_end_ns - window_start_ns) // NS_PER_MINUTE, -1, dtype=np.int64)
    table[(grid.timestamps_ns - window_start_ns) // NS_PER_MINUTE] = np.arange(grid.num_bars)
    return _GridLookup(
        grid.frequency, table, window_start_ns, window_end_ns - window_start_ns, first_day, last_day
    )


def _grid_rows(lookup: _GridLookup, stamps_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid row of every stamp (-1 when off the grid) and whether it lies inside the date window."""
    table = lookup.table
    if lookup.frequency == "1d":
        days = session_day_numbers(stamps_ns)
        inside = (days >= lookup.first_day) & (days <= lookup.last_day)
        rows = np.where(inside, table[np.clip(days - lookup.first_day, 0, table.shape[0] - 1)], -1)
        return rows, inside
    offset = stamps_ns - lookup.window_start_ns
    inside = offset.view(np.uint64) < np.uint64(lookup.window_span_ns)  # 0 <= offset < span
    minute = offset // NS_PER_MINUTE
    rows = np.take(table, minute, mode="clip")
    rows[~(inside & (minute * NS_PER_MINUTE == offset))] = -1
    return rows, inside


def _raise_duplicate(
    flat: np.ndarray, stamps_ns: np.ndarray, codes: np.ndarray, names: np.ndarray, freq: str
) -> None:
    """Name the first (symbol, bar) that appears twice."""
    order = np.argsort(flat, kind="stable")
    repeated = np.flatnonzero(flat[order][1:] == flat[order][:-1])
    row = order[repeated[0] + 1]
    when = pd.Timestamp(int(stamps_ns[row]), tz="UTC")
    if freq == "1d":
        raise DataError(
            f"symbol {names[codes[row]]} has two daily bars in the session of {when.isoformat()}; "
            "intraday bars need freq '1min', else drop the duplicate"
        )
    raise DataError(
        f"symbol {names[codes[row]]} has two bars at {when.isoformat()}; "
        "drop the duplicate (re-import the dataset to repair it)"
    )


def _check_prices(
    aligned: dict[str, np.ndarray], real: np.ndarray, grid: CalendarGrid, symbols: tuple
) -> None:
    """Every real bar has finite, positive prices, ``low <= open, close <= high``, and volume >= 0."""
    for name, values in aligned.items():
        bad = real & ~(np.isfinite(values) & ((values > 0) if name != "volume" else (values >= 0)))
        if bad.any():
            row, col = np.argwhere(bad)[0]
            when = pd.Timestamp(int(grid.timestamps_ns[row]), tz="UTC")
            raise DataError(
                f"symbol {symbols[col]} has {name} {values[row, col]} at {when.isoformat()}; "
                "prices must be positive and finite, volume non-negative: fix or re-import the data"
            )
    high, low = aligned["high"], aligned["low"]
    for name in ("open", "close"):
        values = aligned[name]
        bad = real & ((high < low) | (values > high) | (values < low))
        if bad.any():
            row, col = np.argwhere(bad)[0]
            when = pd.Timestamp(int(grid.timestamps_ns[row]), tz="UTC")
            raise DataError(
                f"symbol {symbols[col]} has {name} {values[row, col]} outside [low {low[row, col]}, "
                f"high {high[row, col]}] at {when.isoformat()}; fix or re-import the data"
            )


ALIGN_CHUNK_ROWS: Final[int] = 1 << 20
"""Input rows one task of :func:`align` places at a time (its temporaries stay a few MB)."""
ALIGN_MAX_WORKERS: Final[int] = 8
"""Most threads :func:`align` uses: its numpy and Arrow kernels release the GIL, and past about
eight threads the scatter is bound by memory, not by cores."""


def align_workers() -> int:
    """Threads :func:`align` uses by default: the cores this process may run on, at most
    :data:`ALIGN_MAX_WORKERS` (the arrays are the same whatever the count)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(ALIGN_MAX_WORKERS, cores))


def _chunk_codes(bars: pd.DataFrame, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Symbol codes of rows ``first:stop`` and the names they index (this chunk's own numbering).

    Raises:
        DataError: a row has no symbol (a null).
    """
    codes, uniques = pd.factorize(bars["symbol"].iloc[first:stop], sort=False)
    missing = np.flatnonzero(codes < 0)
    if missing.size:
        raise DataError(
            f"bar row {first + int(missing[0])} has no symbol; "
            "fix: fill in the symbol or drop the rows without one"
        )
    return codes, np.asarray(uniques, dtype=object)


def _place(
    bars: pd.DataFrame,
    rows: slice,
    codes: np.ndarray,
    names: np.ndarray,
    lookup: _GridLookup,
    num_rows: int,
    column_of_name: dict[str, int],
) -> tuple[np.ndarray, int, int]:
    """Where input rows ``rows`` land on the ``(M, T)`` symbol-major grid of ``num_rows`` rows (see
    :func:`align`): each row's flat cell (the spare cell ``M T`` when it is not placed), and how
    many of them fell inside the window on a wanted symbol and how many on the grid."""
    trash = num_rows * len(column_of_name)
    column_of_code = np.array([column_of_name.get(str(n), -1) for n in names], dtype=np.int64)
    cols = column_of_code[codes] if codes.size else np.zeros(0, dtype=np.int64)
    grid_row, inside = _grid_rows(lookup, _timestamps_ns(bars.iloc[rows]))
    selected = inside & (cols >= 0)
    placed = selected & (grid_row >= 0)
    cell = np.where(placed, cols * num_rows + grid_row, trash)
    return cell, int(np.count_nonzero(selected)), int(np.count_nonzero(placed))


def _fill_block(cells: dict[str, np.ndarray], real: np.ndarray) -> tuple[np.ndarray, int]:
    """Fill one block of symbols in place, ``(m, T)`` symbol-major: a missing bar takes the last
    close (volume 0), the rows before a symbol's first bar its first open (or
    :data:`ABSENT_PRICE_USD` without any bar). Returns each symbol's first real row (``T`` if none)
    and the count of cells before a first bar."""
    num_cols, num_rows = real.shape
    has_bar = real.any(axis=1)
    first_bar = np.where(has_bar, np.argmax(real, axis=1), num_rows).astype(np.int64)
    source_row = np.where(real, np.arange(num_rows, dtype=np.int64)[None, :], -1)
    np.maximum.accumulate(source_row, axis=1, out=source_row)
    before_first = source_row < 0
    last_close = np.take_along_axis(cells["close"], np.maximum(source_row, 0), axis=1)
    del source_row
    first_open = np.where(
        has_bar, cells["open"][np.arange(num_cols), np.minimum(first_bar, num_rows - 1)], ABSENT_PRICE_USD
    ).astype(np.float32)
    np.copyto(last_close, np.broadcast_to(first_open[:, None], last_close.shape), where=before_first)
    unreal = ~real
    for name in PRICE_COLUMNS:
        np.copyto(cells[name], last_close, where=unreal)
    np.copyto(cells["volume"], np.float32(0.0), where=unreal)
    return first_bar, int(np.count_nonzero(before_first))


def _prices_ok(cells: dict[str, np.ndarray], real: np.ndarray) -> bool:
    """Whether every real bar of a block passes :func:`_check_prices` (which names the first that
    does not, in ``(T, M)`` order)."""
    for name, values in cells.items():
        if (real & ~(np.isfinite(values) & ((values > 0) if name != "volume" else (values >= 0)))).any():
            return False
    high, low = cells["high"], cells["low"]
    return not any(
        (real & ((high < low) | (cells[name] > high) | (cells[name] < low))).any()
        for name in ("open", "close")
    )


def align(
    bars: pd.DataFrame,
    freq: str,
    start: DateLike,
    end: DateLike,
    *,
    symbols: tuple[str, ...] | None = None,
    regular_hours_only: bool = True,
    workers: int | None = None,
) -> AlignedBars:
    """Reindex long bar-schema ``bars`` onto the XNAS grid of ``start..end`` (dates inclusive).

    The work runs on ``workers`` threads: input rows are placed a chunk at a time, symbols are
    checked and filled a block at a time, then each array is transposed. Cells are placed
    symbol-major, ``(M, T)``, and transposed once: a dataset's rows are sorted by symbol then time
    (:mod:`finpod.data.store`), so each symbol's bars land on contiguous cells (a ``(T, M)``
    scatter strides by ``M``). Every cell has one writer, so the arrays are the same whatever
    ``workers`` is (tested).

    Args:
        bars: long frame in the bar schema (:mod:`finpod.data.schema`), any row order.
        freq: ``"1min"`` or ``"1d"``; the bars' frequency.
        start: first session date.
        end: last session date.
        symbols: the columns to build, in order; None takes every symbol of ``bars`` (sorted).
        regular_hours_only: see :func:`calendar_grid`.
        workers: threads to use (>= 1); None: :func:`align_workers`.

    Returns:
        The aligned ``(T, M)`` float32 arrays, the real-bar mask, first-bar rows and counts.

    Raises:
        DataError: naive timestamps, a row without a symbol, a duplicate ``(symbol, bar)``, a
            non-positive / non-finite price, high below low or open/close outside [low, high], or a
            negative volume.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be >= 1 (or None for align_workers()), got {workers}")
    threads = workers or align_workers()
    grid = calendar_grid(freq, start, end, regular_hours_only=regular_hours_only)
    lookup = _grid_lookup(grid)
    _timestamps_ns(bars.iloc[:0])  # naive stamps: the error before any work
    num_inputs = len(bars)
    bounds = [(a, min(a + ALIGN_CHUNK_ROWS, num_inputs)) for a in range(0, num_inputs, ALIGN_CHUNK_ROWS)]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        chunk_codes = list(pool.map(lambda bound: _chunk_codes(bars, *bound), bounds))
        if symbols is None:
            seen = set().union(*(set(names.tolist()) for _, names in chunk_codes)) if chunk_codes else set()
            columns = tuple(sorted(str(n) for n in seen))
        else:
            columns = tuple(symbols)
        column_of_name = {s: i for i, s in enumerate(columns)}
        num_rows, num_cols = grid.num_bars, len(columns)
        trash = num_rows * num_cols  # one spare cell receives every bar that is not placed
        staged = {name: np.empty(trash + 1, dtype=np.float32) for name in (*PRICE_COLUMNS, "volume")}
        staged["real"] = np.zeros(trash + 1, dtype=bool)  # cells without a bar are filled below
        cells = {name: staged[name] for name in (*PRICE_COLUMNS, "volume")}

        def place(chunk: int) -> tuple[int, int]:
            first, stop = bounds[chunk]
            codes, names = chunk_codes[chunk]
            cell, selected, placed = _place(
                bars, slice(first, stop), codes, names, lookup, num_rows, column_of_name
            )
            for name, values in cells.items():
                values[cell] = bars[name].iloc[first:stop].to_numpy(dtype=np.float64)
            staged["real"][cell] = True
            return selected, placed

        counted = list(pool.map(place, range(len(bounds))))
        chunk_codes.clear()
        placed_count = sum(placed for _, placed in counted)
        off_calendar = sum(selected for selected, _ in counted) - placed_count

        def symbol_major(cell: np.ndarray) -> np.ndarray:
            return cell[:trash].reshape(num_cols, num_rows)

        real_by_symbol = symbol_major(staged["real"])
        real_count = int(np.count_nonzero(real_by_symbol))
        if real_count != placed_count:
            _raise_duplicates(bars, lookup, num_rows, column_of_name, freq)
        block_cols = max(1, -(-num_cols // (4 * threads)))
        blocks = [slice(c, min(c + block_cols, num_cols)) for c in range(0, num_cols, block_cols)]

        def block_ok(block: slice) -> bool:
            own = {name: symbol_major(cell)[block] for name, cell in cells.items()}
            return _prices_ok(own, real_by_symbol[block])

        if not all(pool.map(block_ok, blocks)):  # name the first bad bar in (T, M) order, as ever
            transposed = {name: np.ascontiguousarray(symbol_major(cell).T) for name, cell in cells.items()}
            _check_prices(transposed, np.ascontiguousarray(real_by_symbol.T), grid, columns)

        def fill(block: slice) -> tuple[np.ndarray, int]:  # in place: each block's rows are its own
            own = {name: symbol_major(cell)[block] for name, cell in cells.items()}
            return _fill_block(own, real_by_symbol[block])

        filled = list(pool.map(fill, blocks))
        cells.clear()

        def to_time_major(name: str) -> np.ndarray:
            """``(T, M)`` C-ordered copy of one staged array, which is then dropped (one extra array
            alive per thread, not all of them)."""
            array = np.ascontiguousarray(symbol_major(staged[name]).T)
            del staged[name]
            return array

        names = list(staged)
        arrays = dict(zip(names, pool.map(to_time_major, names), strict=True))
    first_bar = np.concatenate([f for f, _ in filled]) if filled else np.zeros(0, dtype=np.int64)
    before_count = sum(b for _, b in filled)
    counts = AlignmentCounts(
        real_bars=real_count,
        filled_bars=num_rows * num_cols - real_count - before_count,
        before_first_bar=before_count,
        off_calendar_bars=off_calendar,
    )
    return AlignedBars(
        grid=grid,
        symbols=columns,
        open=arrays["open"],
        high=arrays["high"],
        low=arrays["low"],
        close=arrays["close"],
        volume=arrays["volume"],
        real=arrays["real"],
        first_bar=first_bar,
        counts=counts,
    )


def _raise_duplicates(
    bars: pd.DataFrame, lookup: _GridLookup, num_rows: int, column_of_name: dict[str, int], freq: str
) -> None:
    """Name the first duplicate ``(symbol, bar)`` of ``bars`` (the error path: one pass over all rows)."""
    codes, names = _chunk_codes(bars, 0, len(bars))
    cell, _, _ = _place(bars, slice(0, len(bars)), codes, names, lookup, num_rows, column_of_name)
    placed = cell < num_rows * len(column_of_name)
    _raise_duplicate(cell[placed], _timestamps_ns(bars)[placed], codes[placed], names, freq)
