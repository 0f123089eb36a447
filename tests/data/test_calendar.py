"""XNAS grid and alignment: 390 minutes a full day, half days, DST, fills, drops and bad input."""

from __future__ import annotations

import re

import exchange_calendars as xcals
import numpy as np
import pandas as pd
import pytest

from finpod.data import calendar
from finpod.data.calendar import ABSENT_PRICE_USD, align, bar_starts, calendar_grid
from finpod.errors import DataError


def _bars(stamps: pd.DatetimeIndex, symbol: str, seed: int) -> pd.DataFrame:
    """Bar-schema rows for ``symbol`` at ``stamps`` with random valid OHLCV."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 1e-3, len(stamps))))
    open_ = close * np.exp(rng.normal(0.0, 1e-4, len(stamps)))
    return pd.DataFrame(
        {
            "timestamp": stamps,
            "symbol": symbol,
            "open": open_,
            "high": np.maximum(open_, close) * 1.001,
            "low": np.minimum(open_, close) * 0.999,
            "close": close,
            "volume": rng.integers(1, 1000, len(stamps)).astype(float),
        }
    )


def test_full_winter_day_has_390_minutes_from_1430_utc() -> None:
    stamps = bar_starts("1min", "2020-01-02", "2020-01-02")
    assert len(stamps) == 390
    assert stamps[0] == pd.Timestamp("2020-01-02 14:30", tz="UTC")
    assert stamps[-1] == pd.Timestamp("2020-01-02 20:59", tz="UTC")
    assert (np.diff(stamps.asi8) == 60_000_000_000).all()


def test_summer_day_opens_at_1330_utc() -> None:
    stamps = bar_starts("1min", "2020-07-01", "2020-07-01")
    assert len(stamps) == 390
    assert stamps[0] == pd.Timestamp("2020-07-01 13:30", tz="UTC")


def test_half_day_after_thanksgiving_has_210_minutes() -> None:
    grid = calendar_grid("1min", "2019-11-27", "2019-11-29")
    per_session = np.bincount(grid.session_ids)
    assert per_session.tolist() == [390, 210]  # Thanksgiving (11-28) is no session
    last = pd.Timestamp(int(grid.timestamps_ns[-1]), tz="UTC")
    assert last == pd.Timestamp("2019-11-29 17:59", tz="UTC")


def test_minute_grid_matches_exchange_calendars_over_a_year_with_dst() -> None:
    stamps = bar_starts("1min", "2019-01-01", "2019-12-31")
    reference = xcals.get_calendar("XNAS").minutes_in_range(
        pd.Timestamp("2019-01-01", tz="UTC"), pd.Timestamp("2020-01-01", tz="UTC")
    )
    assert np.array_equal(stamps.asi8, pd.DatetimeIndex(reference).as_unit("ns").asi8)


def test_daily_grid_is_one_bar_per_session_at_the_open() -> None:
    stamps = bar_starts("1d", "2019-12-23", "2019-12-27")
    expected = ["2019-12-23 14:30", "2019-12-24 14:30", "2019-12-26 14:30", "2019-12-27 14:30"]
    assert stamps.tolist() == [pd.Timestamp(s, tz="UTC") for s in expected]


def test_session_ids_are_contiguous_and_start_at_zero() -> None:
    grid = calendar_grid("1min", "2020-03-06", "2020-03-10")
    assert grid.session_ids[0] == 0
    assert set(np.diff(grid.session_ids).tolist()) <= {0, 1}
    assert grid.session_ids[-1] == len(grid.session_dates) - 1


def test_extended_hours_grid_spans_0400_to_2000_new_york() -> None:
    stamps = bar_starts("1min", "2020-01-02", "2020-01-02", regular_hours_only=False)
    assert stamps[0] == pd.Timestamp("2020-01-02 09:00", tz="UTC")
    assert stamps[-1] == pd.Timestamp("2020-01-03 00:59", tz="UTC")
    assert len(stamps) == 16 * 60


def test_align_fills_missing_minutes_from_last_close_and_marks_them() -> None:
    grid = bar_starts("1min", "2020-01-02", "2020-01-03")
    keep = np.ones(len(grid), dtype=bool)
    keep[[10, 11, 400]] = False
    bars = _bars(grid[keep], "AAA", seed=1)
    aligned = align(bars, "1min", "2020-01-02", "2020-01-03")
    assert aligned.close.dtype == np.float32
    assert aligned.close.shape == (780, 1)
    for row in (10, 11, 400):
        assert not aligned.real[row, 0]
        assert aligned.volume[row, 0] == 0.0
        for price in (aligned.open, aligned.high, aligned.low, aligned.close):
            assert price[row, 0] == aligned.close[row - 1 if row != 11 else 9, 0]
    assert aligned.real.sum() == len(bars)
    assert aligned.counts.filled_bars == 3
    real_close = bars["close"].to_numpy(dtype=np.float32)
    assert np.array_equal(aligned.close[aligned.real[:, 0], 0], real_close)


def test_align_before_first_bar_uses_first_open_and_is_not_real() -> None:
    grid = bar_starts("1min", "2020-01-02", "2020-01-02")
    early = _bars(grid, "EARLY", seed=2)
    late = _bars(grid[100:], "LATE", seed=3)
    aligned = align(pd.concat([late, early]), "1min", "2020-01-02", "2020-01-02")
    assert aligned.symbols == ("EARLY", "LATE")
    assert aligned.first_bar.tolist() == [0, 100]
    first_open = np.float32(late["open"].iloc[0])
    assert (aligned.close[:100, 1] == first_open).all()
    assert (aligned.volume[:100, 1] == 0).all()
    assert not aligned.real[:100, 1].any()
    assert aligned.counts.before_first_bar == 100


def test_align_drops_and_counts_off_hours_bars_unless_asked() -> None:
    regular = bar_starts("1min", "2020-01-02", "2020-01-02")
    extended = bar_starts("1min", "2020-01-02", "2020-01-02", regular_hours_only=False)
    bars = _bars(extended, "AAA", seed=4)
    aligned = align(bars, "1min", "2020-01-02", "2020-01-02")
    assert aligned.close.shape[0] == len(regular)
    assert aligned.counts.off_calendar_bars == len(extended) - len(regular)
    kept = align(bars, "1min", "2020-01-02", "2020-01-02", regular_hours_only=False)
    assert kept.counts.off_calendar_bars == 0
    assert kept.real.all()


def test_align_ignores_bars_outside_the_dates_without_counting_them() -> None:
    bars = _bars(bar_starts("1min", "2020-01-02", "2020-01-06"), "AAA", seed=5)
    aligned = align(bars, "1min", "2020-01-03", "2020-01-03")
    assert aligned.real.all()
    assert aligned.counts.off_calendar_bars == 0


def test_align_daily_bars_map_by_new_york_date() -> None:
    days = pd.DatetimeIndex(["2019-12-23 14:30", "2019-12-24 14:30", "2019-12-27 14:30"], tz="UTC")
    aligned = align(_bars(days, "AAA", seed=6), "1d", "2019-12-23", "2019-12-27")
    assert aligned.real[:, 0].tolist() == [True, True, False, True]


def test_align_is_row_order_independent() -> None:
    bars = pd.concat(
        [_bars(bar_starts("1min", "2020-01-02", "2020-01-02"), s, seed=i) for i, s in enumerate("XYZ")]
    )
    shuffled = bars.sample(frac=1.0, random_state=0)
    a = align(bars, "1min", "2020-01-02", "2020-01-02")
    b = align(shuffled, "1min", "2020-01-02", "2020-01-02")
    assert np.array_equal(a.close, b.close)
    assert np.array_equal(a.volume, b.volume)


def test_align_rejects_duplicate_bars() -> None:
    bars = _bars(bar_starts("1min", "2020-01-02", "2020-01-02"), "DUP", seed=7)
    with pytest.raises(DataError, match=r"symbol DUP has two bars at 2020-01-02T14:35"):
        align(pd.concat([bars, bars.iloc[[5]]]), "1min", "2020-01-02", "2020-01-02")


def test_align_rejects_naive_timestamps() -> None:
    bars = _bars(bar_starts("1min", "2020-01-02", "2020-01-02"), "AAA", seed=8)
    bars["timestamp"] = bars["timestamp"].dt.tz_localize(None)
    with pytest.raises(DataError, match="not tz-aware"):
        align(bars, "1min", "2020-01-02", "2020-01-02")


@pytest.mark.parametrize(("column", "value"), [("close", 0.0), ("low", -1.0), ("open", np.nan)])
def test_align_rejects_bad_prices(column: str, value: float) -> None:
    bars = _bars(bar_starts("1min", "2020-01-02", "2020-01-02"), "BAD", seed=9)
    bars.loc[3, column] = value
    with pytest.raises(DataError, match=rf"symbol BAD has {column} .* at 2020-01-02T14:33"):
        align(bars, "1min", "2020-01-02", "2020-01-02")


@pytest.mark.parametrize(("column", "reference"), [("high", "low"), ("low", "high"), ("close", "high")])
def test_align_rejects_bars_outside_their_high_low_range(column: str, reference: str) -> None:
    """high < low, or open/close outside [low, high], in an in-memory frame (no validate_bars before)."""
    bars = _bars(bar_starts("1min", "2020-01-02", "2020-01-02"), "BAD", seed=9)
    bars.loc[5, column] = bars.loc[5, reference] * (0.99 if column == "high" else 1.01)
    message = r"symbol BAD has (open|close) .* outside \[low .* at 2020-01-02T14:35"
    with pytest.raises(DataError, match=message):
        align(bars, "1min", "2020-01-02", "2020-01-02")


def test_align_keeps_a_requested_symbol_without_bars_as_placeholder() -> None:
    bars = _bars(bar_starts("1min", "2020-01-02", "2020-01-02"), "AAA", seed=10)
    aligned = align(bars, "1min", "2020-01-02", "2020-01-02", symbols=("AAA", "ZZZ"))
    assert aligned.first_bar.tolist() == [0, 390]
    assert not aligned.real[:, 1].any()
    assert (aligned.close[:, 1] == ABSENT_PRICE_USD).all()
    assert (aligned.volume[:, 1] == 0).all()


@pytest.mark.parametrize(
    ("freq", "start", "end", "message"),
    [
        ("5min", "2020-01-02", "2020-01-03", "unknown frequency"),
        ("1min", "2020-01-03", "2020-01-02", "before start"),
        ("1min", "yesterday-ish", "2020-01-02", "not a date"),
        ("1min", "2020-01-04", "2020-01-05", "no XNAS session"),
        ("1d", "2020-01-02", "2999-01-01", "last session the XNAS calendar knows"),
    ],
)
def test_grid_rejects_bad_requests(freq: str, start: str, end: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        calendar_grid(freq, start, end)


def _messy_minutes() -> pd.DataFrame:
    """Three days of five symbols, shuffled: gaps, a late listing, an early delisting, off-hours
    bars and a symbol outside the requested columns."""
    regular = bar_starts("1min", "2020-01-02", "2020-01-06")
    extended = bar_starts("1min", "2020-01-02", "2020-01-06", regular_hours_only=False)
    rng = np.random.default_rng(11)
    frames = [
        _bars(regular[rng.random(len(regular)) > 0.3], "GAPS", seed=12),
        _bars(regular[500:], "LATE", seed=13),
        _bars(regular[:200], "GONE", seed=14),
        _bars(extended, "EXTH", seed=15),
        _bars(regular, "SKIP", seed=16),
    ]
    return pd.concat(frames).sample(frac=1.0, random_state=1).reset_index(drop=True)


def _same_alignment(a: calendar.AlignedBars, b: calendar.AlignedBars) -> bool:
    arrays = ("open", "high", "low", "close", "volume", "real", "first_bar")
    return (
        all(np.array_equal(getattr(a, name), getattr(b, name)) for name in arrays)
        and a.counts == b.counts
        and a.symbols == b.symbols
    )


@pytest.mark.parametrize("symbols", [None, ("EXTH", "GAPS", "GONE", "LATE", "NONE")])
def test_align_gives_the_same_arrays_whatever_the_threads_and_chunks(
    monkeypatch: pytest.MonkeyPatch, symbols: tuple[str, ...] | None
) -> None:
    """Input rows are placed a chunk at a time and symbols filled a block at a time, on threads:
    one chunk on one thread, and 97-row chunks (which split every symbol) on 1, 2 and 3 threads,
    give the same arrays and counts."""
    bars = _messy_minutes()
    whole = align(bars, "1min", "2020-01-02", "2020-01-06", symbols=symbols, workers=1)
    assert whole.counts.off_calendar_bars > 0
    assert whole.counts.before_first_bar > 0
    assert whole.counts.filled_bars > 0
    monkeypatch.setattr(calendar, "ALIGN_CHUNK_ROWS", 97)
    for workers in (1, 2, 3):
        chunked = align(bars, "1min", "2020-01-02", "2020-01-06", symbols=symbols, workers=workers)
        assert _same_alignment(whole, chunked), workers


def test_align_names_the_same_bad_bar_whatever_the_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A duplicate split across two chunks, and bad prices in two symbols' blocks, are named as one
    pass over the whole frame names them (the earliest bar, then the first column)."""
    bars = _messy_minutes()
    monkeypatch.setattr(calendar, "ALIGN_CHUNK_ROWS", 97)
    doubled = pd.concat([bars, bars.loc[bars["symbol"] == "LATE"].iloc[[7]]], ignore_index=True)
    late = bars.loc[bars["symbol"] == "LATE"].iloc[7]
    with pytest.raises(
        DataError, match=re.escape(f"symbol LATE has two bars at {late['timestamp'].isoformat()}")
    ):
        align(doubled, "1min", "2020-01-02", "2020-01-06", workers=3)
    broken = bars.copy()
    gaps = broken.index[(broken["symbol"] == "GAPS")]
    gone = broken.index[(broken["symbol"] == "GONE")]
    first_gone = broken.loc[gone, "timestamp"].idxmin()
    later_gaps = broken.loc[gaps].sort_values("timestamp").index[100]
    broken.loc[[first_gone, later_gaps], "close"] = -1.0
    stamp = broken.loc[first_gone, "timestamp"].isoformat()
    with pytest.raises(DataError, match=re.escape(f"symbol GONE has close -1.0 at {stamp}")):
        align(broken, "1min", "2020-01-02", "2020-01-06", workers=3)


def test_align_refuses_a_bar_without_a_symbol(monkeypatch: pytest.MonkeyPatch) -> None:
    """A null symbol (a frame handed straight to align, not through the importers) is named by its
    row, in any chunk (it once landed on another symbol's column)."""
    bars = _messy_minutes()
    bars["symbol"] = bars["symbol"].astype(object)
    bars.loc[150, "symbol"] = None
    monkeypatch.setattr(calendar, "ALIGN_CHUNK_ROWS", 97)
    with pytest.raises(DataError, match="bar row 150 has no symbol; fix: fill in the symbol"):
        align(bars, "1min", "2020-01-02", "2020-01-06", workers=2)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        align(bars, "1min", "2020-01-02", "2020-01-06", workers=0)
