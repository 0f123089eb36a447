"""Build the :class:`~finpod.data.panel.Panel` from bars or a dataset folder: the data layer's output.

Steps: pick the symbols (explicit list, point-in-time NASDAQ-100, or every symbol), split off the
benchmark (QQQ by default) when the dataset has it, clip the date range to the data, align every
symbol onto the XNAS grid (:func:`finpod.data.calendar.align`), mask what is not tradable (not a
member that day, filled bar), turn the arrays into float32 tensors on the device, and compute the
causal features normalised on the train segment only (:mod:`finpod.data.features`).

Segments are ``name -> (first date, last date)``, dates inclusive, for ``train`` and optionally
``validation`` and ``backtest``, in that order without overlap. They become bar-index ranges.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.data.calendar import (
    NS_PER_DAY,
    AlignedBars,
    DateLike,
    align,
    session_day_numbers,
    to_session_date,
)
from finpod.data.features import CLIP_SIGMAS, FeatureStats, bar_phase, build_features, feature_specs
from finpod.data.panel import SEGMENT_NAMES, Panel
from finpod.data.store import read_dataset, read_manifest
from finpod.data.universe import (
    ALL_SYMBOLS,
    NASDAQ100,
    check_universe,
    ever_members,
    membership_mask,
)
from finpod.errors import DataError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Window:
    """A date window, both ends inclusive (naive midnight timestamps)."""

    first: pd.Timestamp
    last: pd.Timestamp

    def text(self) -> str:
        """``YYYY-MM-DD..YYYY-MM-DD``."""
        return f"{self.first.date()}..{self.last.date()}"


def _check_segments(
    segments: Mapping[str, tuple[DateLike, DateLike]], start: pd.Timestamp, end: pd.Timestamp
) -> dict[str, _Window]:
    """Parse and check the segment windows: known names, train present, ordered, disjoint, inside."""
    unknown = sorted(set(segments) - set(SEGMENT_NAMES))
    if unknown:
        raise DataError(f"unknown segment(s) {', '.join(unknown)}; use {', '.join(SEGMENT_NAMES)}")
    if "train" not in segments:
        raise DataError("segments have no 'train' window; add one (features are normalised on it)")
    windows: dict[str, _Window] = {}
    for name in (n for n in SEGMENT_NAMES if n in segments):
        first_date, last_date = segments[name]
        window = _Window(
            to_session_date(first_date, f"{name} start"), to_session_date(last_date, f"{name} end")
        )
        if window.last < window.first:
            raise DataError(f"segment {name} {window.text()} ends before it starts; swap its dates")
        if window.first < start or window.last > end:
            raise DataError(
                f"segment {name} {window.text()} is outside the panel range {start.date()}..{end.date()}; "
                "move it inside or widen start/end"
            )
        for before, earlier in windows.items():
            if window.first <= earlier.last:
                raise DataError(
                    f"segment {name} {window.text()} starts before segment {before} {earlier.text()} ends; "
                    f"segments must be in the order {', '.join(SEGMENT_NAMES)} without overlap"
                )
        windows[name] = window
    return windows


def _dataset_symbols(bars: pd.DataFrame) -> tuple[str, ...]:
    """The distinct tickers of ``bars``, sorted."""
    return tuple(sorted(str(s) for s in pd.unique(bars["symbol"])))


def _select_symbols(
    present: tuple[str, ...],
    symbols: Sequence[str] | None,
    universe: str,
    benchmark_symbol: str | None,
    window: _Window,
) -> tuple[str, ...]:
    """The tradable columns: the request (checked against the data) minus the benchmark."""
    if symbols is not None:
        missing = sorted(set(symbols) - set(present))
        if missing:
            raise DataError(
                f"symbol(s) {', '.join(missing)} not in the dataset (it has {len(present)} symbols, "
                f"e.g. {', '.join(present[:5])}); remove them or use a dataset that has them"
            )
        repeated = sorted({s for s in symbols if list(symbols).count(s) > 1})
        if repeated:
            raise DataError(f"symbols list names {', '.join(repeated)} more than once; list each symbol once")
        if benchmark_symbol in symbols:
            raise DataError(
                f"{benchmark_symbol} is the benchmark, not a tradable symbol; remove it from the symbols "
                "or pass benchmark_symbol=None to trade it"
            )
        chosen = list(symbols)
    elif universe == NASDAQ100:
        members = ever_members(window.first.date(), window.last.date())
        chosen = [s for s in present if s in members]
        left_out = [s for s in present if s not in members and s != benchmark_symbol]
        if left_out:
            logger.info(
                "universe %s: %d dataset symbol(s) never members in %s are not columns: %s",
                universe,
                len(left_out),
                window.text(),
                ", ".join(left_out[:20]) + (" ..." if len(left_out) > 20 else ""),
            )
    else:
        chosen = list(present)
    tradable = tuple(s for s in chosen if s != benchmark_symbol)
    if not tradable:
        raise DataError(
            f"no tradable symbol selected (universe {universe}, {len(present)} symbols in the dataset, "
            f"benchmark {benchmark_symbol}); pick symbols present in the data or universe 'all'"
        )
    return tradable


def _data_window(bars: pd.DataFrame, requested: _Window, freq: str) -> _Window:
    """``requested`` clipped to the New York dates of the first and last bar in the data."""
    stamps = pd.DatetimeIndex(bars["timestamp"])
    if stamps.tz is None:
        raise DataError("bars column 'timestamp' is not tz-aware; localise it and convert to UTC")
    lo_ns, hi_ns = stamps.min().as_unit("ns").value, stamps.max().as_unit("ns").value
    lo_day, hi_day = session_day_numbers(np.asarray([lo_ns, hi_ns], dtype=np.int64))
    data = _Window(pd.Timestamp(int(lo_day) * NS_PER_DAY), pd.Timestamp(int(hi_day) * NS_PER_DAY))
    clipped = _Window(max(requested.first, data.first), min(requested.last, data.last))
    if clipped.last < clipped.first:
        raise DataError(
            f"the {freq} data covers {data.text()}, nothing in the requested {requested.text()}; "
            "pick dates inside the data"
        )
    if clipped != requested:
        logger.warning("panel range %s clipped to the data: %s", requested.text(), clipped.text())
    return clipped


def _segment_rows(
    aligned: AlignedBars, windows: dict[str, _Window], data: _Window
) -> dict[str, tuple[int, int]]:
    """Bar-index range of each segment; a segment without any real bar is an error."""
    dates = aligned.grid.session_dates[aligned.grid.session_ids].asi8
    rows: dict[str, tuple[int, int]] = {}
    for name, window in windows.items():
        lo = int(np.searchsorted(dates, window.first.value, side="left"))
        hi = int(np.searchsorted(dates, window.last.value, side="right"))
        if hi <= lo or not aligned.real[lo:hi].any():
            raise DataError(
                f"segment {name} {window.text()} has no data (the bars cover {data.text()}); "
                "move the segment to dates with data"
            )
        rows[name] = (lo, hi)
    return rows


def build_panel(
    bars_or_dataset: pd.DataFrame | str | Path,
    *,
    freq: str,
    start: DateLike,
    end: DateLike,
    segments: Mapping[str, tuple[DateLike, DateLike]],
    device: torch.device | str,
    symbols: Sequence[str] | None = None,
    universe: str | None = None,
    benchmark_symbol: str | None = "QQQ",
    regular_hours_only: bool = True,
    feature_stats: FeatureStats | None = None,
    clip_sigmas: float = CLIP_SIGMAS,
) -> Panel:
    """Build the calendar-aligned panel of float32 tensors on ``device``.

    Args:
        bars_or_dataset: a bar-schema frame, or a dataset folder (read with its manifest checks).
        freq: ``"1min"`` or ``"1d"``, the bars' frequency.
        start: first session date of the panel (inclusive); clipped to the data's first bar.
        end: last session date (inclusive); clipped to the data's last bar.
        segments: ``name -> (first date, last date)`` for ``train`` (required), ``validation`` and
            ``backtest``, inclusive, ordered, disjoint, inside ``start..end``.
        device: where the tensors live (``"cpu"``, ``"cuda"``...).
        symbols: the tradable columns, in order; None picks them from ``universe``.
        universe: ``"nasdaq100"`` (point-in-time members: columns are the dataset's symbols that
            were members on some day of the range clipped to the data, tradable only on member days)
            or ``"all"`` / None (every symbol, always in the universe). With ``symbols`` it only sets
            membership.
        benchmark_symbol: the market ETF; when the dataset has it, its close becomes
            ``panel.benchmark_close`` and it is never a tradable column. None for no benchmark.
        regular_hours_only: True drops pre/post-market minute bars (counted in the log).
        feature_stats: normalisation statistics to reuse; None fits them on ``train``.
        clip_sigmas: normalised features are clipped to ``+-clip_sigmas``.

    Returns:
        The :class:`Panel` (see :mod:`finpod.data.panel` for shapes and units).

    Raises:
        DataError: unknown universe or symbols, empty selection, bad/overlapping/out-of-order
            segments, a segment with no data, or bad bars (see :func:`finpod.data.calendar.align`).
    """
    kind = check_universe(ALL_SYMBOLS if universe is None else universe)
    first, last = to_session_date(start, "start"), to_session_date(end, "end")
    if last < first:
        raise DataError(f"end {last.date()} is before start {first.date()}; swap them")
    windows = _check_segments(segments, first, last)
    bars = bars_or_dataset if isinstance(bars_or_dataset, pd.DataFrame) else _read(bars_or_dataset, freq)
    if bars.empty:
        raise DataError("the bars are empty; import or synthesise a dataset first")
    check_frequency(bars, freq)
    present = _dataset_symbols(bars)
    data = _data_window(bars, _Window(first, last), freq)
    tradable = _select_symbols(present, symbols, kind, benchmark_symbol, data)
    aligned = align(
        bars, freq, data.first, data.last, symbols=tradable, regular_hours_only=regular_hours_only
    )
    logger.info("aligned %d symbols on %d bars: %s", len(tradable), aligned.grid.num_bars, aligned.counts)
    if aligned.counts.off_calendar_bars:
        logger.warning(
            "dropped %d bars off the XNAS %s grid (pre/post-market%s, non-session days or odd stamps)",
            aligned.counts.off_calendar_bars,
            freq,
            "; pass regular_hours_only=False to keep extended hours" if regular_hours_only else "",
        )
    rows = _segment_rows(aligned, windows, data)
    benchmark = None
    if benchmark_symbol is not None and benchmark_symbol in present:
        benchmark_bars = bars.loc[bars["symbol"].to_numpy() == benchmark_symbol]
        benchmark = align(benchmark_bars, freq, data.first, data.last, regular_hours_only=regular_hours_only)
    return _to_panel(
        aligned,
        kind,
        rows,
        device,
        benchmark_symbol if benchmark is not None else None,
        benchmark,
        feature_stats,
        clip_sigmas,
    )


INTRADAY_STEP_NS = 3_600_000_000_000
"""Bars of one symbol closer together than an hour are intraday; daily bars are >= ~23 h apart."""


FREQUENCY_CHECK_ROWS = 1 << 20
"""Rows :func:`check_frequency` compares at a time: a minute dataset shows an intraday step in its
first rows, so the check stops there instead of converting millions of symbol strings (1.5-2 s per
panel build at 340 minute sessions of 100 symbols)."""


def check_frequency(bars: pd.DataFrame, freq: str) -> None:
    """Refuse daily bars asked for as minute bars (the reverse: see :func:`finpod.data.calendar.align`).

    The manifest's frequency is checked when a dataset folder is read; this checks a frame passed
    in directly (the pipeline's path), from the smallest step between a symbol's consecutive bars,
    whatever the row order. Only ``freq = "1min"`` can be refused, so only it is checked; the rows
    are taken :data:`FREQUENCY_CHECK_ROWS` at a time (each block sorted by symbol and time; a
    symbol's pair split between two blocks is not compared, which can only miss a step, so daily
    bars are still refused), and the first intraday step ends the check.

    Args:
        bars: bar-schema frame, ``n`` rows.
        freq: ``"1min"`` or ``"1d"``.

    Raises:
        DataError: minute bars requested from daily bars.
    """
    if freq != "1min":
        return
    smallest: int | None = None
    for lo in range(0, len(bars), FREQUENCY_CHECK_ROWS):
        chunk = bars.iloc[lo : lo + FREQUENCY_CHECK_ROWS]
        codes, _ = pd.factorize(chunk["symbol"], sort=False)
        stamps = chunk["timestamp"].to_numpy(dtype="datetime64[ns]").view(np.int64)
        order = np.lexsort((stamps, codes))  # by symbol, then time: any row order works
        codes, stamps = codes[order], stamps[order]
        steps = np.diff(stamps)
        steps = steps[(codes[1:] == codes[:-1]) & (steps > 0)]
        if steps.size:
            smallest = int(steps.min()) if smallest is None else min(smallest, int(steps.min()))
            if smallest < INTRADAY_STEP_NS:
                return
    if smallest is not None:
        raise DataError(
            f"the bars are daily (a symbol's bars are at least {pd.Timedelta(smallest)} apart), but the "
            'frequency asked for is 1min; fix: set frequency = "1d" in the spec, or use a minute dataset'
        )


def _read(path: str | Path, freq: str) -> pd.DataFrame:
    """A dataset folder's bars, after checking its frequency is ``freq``."""
    bars, manifest = read_dataset(Path(path))
    if manifest.frequency != freq:
        raise DataError(
            f"{path}: dataset frequency is {manifest.frequency}, not {freq}; "
            f"ask for freq={manifest.frequency}"
        )
    if manifest.adjustment == "none":
        logger.warning(
            "%s: prices are not split/dividend adjusted (manifest adjustment 'none'); a split inside "
            "the range will look like a crash to the agent: import adjusted bars to avoid it",
            path,
        )
    return bars


def _to_panel(
    aligned: AlignedBars,
    universe: str,
    rows: dict[str, tuple[int, int]],
    device: torch.device | str,
    benchmark_symbol: str | None,
    benchmark: AlignedBars | None,
    feature_stats: FeatureStats | None,
    clip_sigmas: float,
) -> Panel:
    """Tensors on ``device`` (zero-copy on the CPU), tradable mask and features."""
    grid = aligned.grid
    tradable = aligned.real & (aligned.close > 0)
    if universe == NASDAQ100:
        tradable &= membership_mask(aligned.symbols, grid.timestamps_ns)
    close = torch.from_numpy(aligned.close).to(device)
    volume = torch.from_numpy(aligned.volume).to(device)
    phase = torch.from_numpy(
        bar_phase(grid.timestamps_ns, grid.session_ids, grid.session_open_ns, grid.frequency)
    )
    first_bar = torch.from_numpy(aligned.first_bar).to(device)
    real = torch.from_numpy(aligned.real).to(device)
    features, stats = build_features(
        close,
        volume,
        first_bar,
        phase,
        grid.frequency,
        rows["train"],
        stats=feature_stats,
        clip_sigmas=clip_sigmas,
        real=real,
    )
    return Panel(
        timestamps_ns=grid.timestamps_ns,
        session_ids=grid.session_ids,
        symbols=aligned.symbols,
        open=torch.from_numpy(aligned.open).to(device),
        high=torch.from_numpy(aligned.high).to(device),
        low=torch.from_numpy(aligned.low).to(device),
        close=close,
        volume=volume,
        features=features,
        feature_names=tuple(spec.name for spec in feature_specs(grid.frequency)),
        tradable=torch.from_numpy(tradable).to(device),
        segments=rows,
        frequency=grid.frequency,
        benchmark_symbol=benchmark_symbol,
        benchmark_close=None if benchmark is None else torch.from_numpy(benchmark.close[:, 0]).to(device),
        benchmark_open=None if benchmark is None else torch.from_numpy(benchmark.open[:, 0]).to(device),
        benchmark_volume=None if benchmark is None else torch.from_numpy(benchmark.volume[:, 0]).to(device),
        feature_stats=stats,
        real=real,
    )


def load_panel(dataset_path: str | Path, *, freq: str | None = None, **options: Any) -> Panel:
    """:func:`build_panel` on a dataset folder; ``freq`` defaults to the dataset's own frequency.

    Args:
        dataset_path: a folder written by :func:`finpod.data.store.write_dataset`.
        freq: the expected frequency, or None for the manifest's.
        **options: every other keyword of :func:`build_panel` (``start``, ``end``, ``segments``,
            ``device``...).
    """
    frequency = read_manifest(Path(dataset_path)).frequency if freq is None else freq
    return build_panel(dataset_path, freq=frequency, **options)
