"""What a run trains and trades on: the spec's bars, and the two panels built from them.

THE rule (DESIGN.md, Splits): the tournament and the selection see only :func:`selection_panel`,
which is built from bars strictly before the backtest segment's first session; the backtest panel is
built by :func:`backtest_panel` only after selection. Nothing that ranks, stops or tunes can read a
backtest bar, and ``tests/app/test_leak.py`` proves it by making those bars garbage.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import torch

from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.signals import SignalSpec
from finpod.data.store import read_dataset, read_manifest, write_dataset
from finpod.data.synth import synth_market
from finpod.data.universe import ever_members
from finpod.errors import DataError
from finpod.spec import Spec

SELECTION_SEGMENTS = ("train", "validation")


def dataset_for(spec: Spec, data_root: Path) -> Path:
    """The dataset folder of ``spec``: its ``data.path``, or the cached synthetic market.

    A synthetic spec's market is generated once, deterministically from ``data.synthetic`` and the
    frequency, into ``data_root/synthetic-<hash>/`` and read back from there afterwards. The folder
    returned is absolute (a run records it, and ``--resume`` may start from another directory).
    """
    if spec.data.source == "dataset":
        return spec.dataset_path()
    shape = {"frequency": spec.frequency, **spec.data.synthetic.model_dump(mode="json")}
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:12]
    folder = data_root.expanduser().resolve() / f"synthetic-{digest}"
    if not folder.is_dir():
        synth = spec.data.synthetic
        bars = synth_market(
            n_symbols=synth.n_symbols,
            n_days=synth.n_days,
            freq=spec.frequency,
            seed=synth.seed,
            start=synth.start_date.isoformat(),
            signal=SignalSpec(synth.signal, synth.signal_strength),
            alpha_annual=synth.alpha_annual,
        )
        write_dataset(
            bars,
            folder,
            source="synthetic",
            frequency=spec.frequency,
            adjustment="synthetic",
            repairs={},
            notes=[f"finpod synthetic market {json.dumps(shape, sort_keys=True)}"],
        )
    return folder


RAW_PRICES_WARNING = (
    "warning: the dataset's prices are not adjusted for splits (imported with --adjustment none): "
    "a split inside the data looks like a crash to the agents and to every figure"
)


def adjustment_warning(dataset: Path) -> str | None:
    """The warning every run prints (and every report shows) for a dataset of raw prices, else None."""
    return RAW_PRICES_WARNING if read_manifest(dataset).adjustment == "none" else None


def load_bars(dataset: Path) -> pd.DataFrame:
    """The dataset's bars (bar schema)."""
    bars, _ = read_dataset(dataset)
    return bars


def backtest_start_utc(spec: Spec) -> pd.Timestamp:
    """UTC midnight of the backtest's first session: every bar of that session starts at or after it."""
    return pd.Timestamp(spec.segments.backtest[0], tz="UTC")


def bars_before_backtest(spec: Spec, bars: pd.DataFrame) -> pd.DataFrame:
    """Only the bars that start strictly before the backtest segment (a new frame of its own: a
    boolean selection, so changing it never changes ``bars``)."""
    return bars.loc[bars["timestamp"] < backtest_start_utc(spec)]


def symbols_before_backtest(spec: Spec, bars: pd.DataFrame) -> set[str]:
    """The symbols with a bar that starts before the backtest segment (only the symbol column is
    filtered: the universe is chosen without copying millions of rows of prices)."""
    return set(bars["symbol"][bars["timestamp"] < backtest_start_utc(spec)].unique())


def universe_symbols(spec: Spec, bars: pd.DataFrame) -> list[str]:
    """The assets the agents trade: the spec's universe intersected with the dataset, sorted.

    The benchmark ETF is never one of them. For ``nasdaq100`` it is every ticker that was a member
    on some day of the three segments (the panel's tradable mask then follows membership day by
    day). Only symbols with a bar before the backtest segment can be columns: the selection panel
    is built from those bars alone (see :func:`late_symbols` for the ones left out). The list
    depends on which symbols are present and on index membership, never on prices, so the
    selection and backtest panels have the same columns.

    Raises:
        DataError: an explicitly listed ticker is missing, or has no bar before the backtest.
    """
    present = set(bars["symbol"].unique()) - {spec.benchmark_symbol}
    listed = symbols_before_backtest(spec, bars) & present
    if spec.universe == "all":
        return sorted(listed)
    if spec.universe == "nasdaq100":
        members = ever_members(spec.segments.train[0], spec.segments.backtest[1])
        return sorted(listed & members)
    missing = sorted(set(spec.universe) - present)
    if missing:
        raise DataError(
            f"universe: {', '.join(missing)} not in the dataset; fix: remove them from the spec's "
            "universe or use a dataset that has them"
        )
    late = sorted(set(spec.universe) - listed)
    if late:
        raise DataError(
            f"universe: {', '.join(late)} has no bar before the backtest segment "
            f"({spec.segments.backtest[0]}); fix: remove it from the spec's universe or start the "
            "backtest after it lists"
        )
    return sorted(spec.universe)


def late_symbols(spec: Spec, bars: pd.DataFrame) -> list[str]:
    """Symbols of the dataset (benchmark aside) whose first bar is in or after the backtest segment.

    They cannot be traded: an agent is selected without ever seeing them. A run prints them.
    """
    present = set(bars["symbol"].unique()) - {spec.benchmark_symbol}
    return sorted(present - symbols_before_backtest(spec, bars))


def selection_panel(spec: Spec, bars: pd.DataFrame, symbols: list[str], device: str) -> Panel:
    """The panel the tournament trains and ranks on: train + validation, no backtest bar at all."""
    return _panel(spec, bars_before_backtest(spec, bars), symbols, device, SELECTION_SEGMENTS)


def backtest_panel(spec: Spec, bars: pd.DataFrame, symbols: list[str], device: str) -> Panel:
    """The full panel (train + validation + backtest), built only for the final backtest."""
    return _panel(spec, bars, symbols, device, ("train", "validation", "backtest"))


def _panel(spec: Spec, bars: pd.DataFrame, symbols: list[str], device: str, names: tuple[str, ...]) -> Panel:
    segments = {name: spec.segments.as_dict()[name] for name in names}
    universe = "nasdaq100" if spec.universe == "nasdaq100" else None
    return build_panel(
        bars,
        symbols=symbols,
        universe=universe,
        freq=spec.frequency,
        start=segments["train"][0],
        end=segments[names[-1]][1],
        segments=segments,
        device=torch.device(device),
        benchmark_symbol=spec.benchmark(),
    )
