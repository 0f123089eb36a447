"""Replay a finished run's traders on any dataset and date range, with the run's OWN normalisation.

The features an agent sees are normalised with statistics fitted on its run's train segment. A
replay on other dates or another dataset must reuse exactly those statistics (and the run's
columns, in the run's order): refitting them on the new data would hand the agent observations it
was never trained on, and moving the dates must not move the train segment they come from. A run
saves both (:mod:`finpod.pipeline.trader_inputs`); for a run folder without them they are
recomputed from the run's own spec and dataset.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from finpod.backtest.result import BacktestResult
from finpod.backtest.runner import run_backtest
from finpod.data.calendar import NS_PER_DAY, session_day_numbers
from finpod.data.panel_builder import build_panel
from finpod.data.store import read_dataset
from finpod.env.config import EnvConfig
from finpod.errors import DataError, SpecError
from finpod.linear_baseline import saved_baseline
from finpod.pipeline.trader_inputs import trader_inputs
from finpod.rundir import RunDir
from finpod.spec import Spec
from finpod.trader import load_policy, trader_device
from podracer.api import archive_of, leaderboard_of

WARMUP_CALENDAR_DAYS = 120
"""Bars loaded before ``start`` (when it is before the run's train start) to warm the features up."""
REPLAY_SEGMENT = "backtest"


def backtest_run(
    run: Any,
    *,
    dataset: str | Path | None = None,
    start: str | dt.date | None = None,
    end: str | dt.date | None = None,
    costs: Mapping[str, float] | None = None,
    device: str | None = None,
) -> BacktestResult:
    """Trade a finished run's traders (best, and the ensemble and trajectory traders when it has them) and the
    baselines.

    Args:
        run: a :class:`finpod.RunResult` or a run folder.
        dataset: a dataset folder (relative to the current folder); default: the run's own.
        start: first session to trade (ISO date); default: the run's backtest start.
        end: last session to trade (inclusive); default: the run's backtest end.
        costs: overrides of the cost settings, ``fee_rate``, ``half_spread_bps``,
            ``max_participation`` (:attr:`finpod.env.config.EnvConfig.COST_FIELDS`).
        device: ``"cpu"`` or ``"cuda"``; default: the run spec's device.

    Returns:
        The same :class:`~finpod.backtest.result.BacktestResult` a run's ``.backtest`` is
        (``segment = "backtest"``): traders first, then ``equal_weight``, ``linear`` (the run's
        linear baseline with its saved coefficients and trading parameters, when it has one),
        ``market``, ``cash``.

    Raises:
        SpecError: the run is still training, a bad cost key or value, bad dates, or a device
            torch does not have.
        DataError: the dataset lacks the run's symbols, has another frequency, or no bar before
            ``start`` to warm the features up on.
    """
    chosen = None if device is None else trader_device(device)
    folder = RunDir(Path(getattr(run, "run_dir", run)).expanduser().resolve())
    info = folder.read_info()
    if info.get("status") == "training":
        raise SpecError(
            f"{folder.root}: still training, so its traders are not selected yet; fix: finish it with "
            f"`finpod run {folder.spec_toml} --resume`"
        )
    folder.verify_integrity()
    spec = folder.load_spec()
    spec = _with_costs(spec, costs or {})
    where = chosen or torch.device(spec.resolve_device())
    symbols, stats = trader_inputs(folder, spec)
    source = Path(dataset).expanduser().resolve() if dataset is not None else Path(info["dataset"])
    bars, manifest = read_dataset(source)
    if manifest.frequency != spec.frequency:
        raise DataError(
            f"{source}: {manifest.frequency} bars, the run traded {spec.frequency} bars; "
            f"fix: pass a {spec.frequency} dataset"
        )
    missing = sorted(set(symbols) - set(bars["symbol"].unique()))
    if missing:
        raise DataError(
            f"{source}: lacks {len(missing)} of the run's {len(symbols)} symbols ({', '.join(missing[:5])}); "
            "fix: pass a dataset with every symbol the trader was trained on"
        )
    first, last = _window(spec, start, end)
    warm_from = _first_session(bars)
    if first <= warm_from:
        raise DataError(
            f"start {first}: {source} has no bar before it to warm the features up on; fix: start after "
            f"{warm_from}"
        )
    # Features are computed from the panel's first bar on (moving averages remember it), so the
    # panel starts where the run's did when that is before ``start``: a replay of the run's own
    # dates then sees bit-identical observations.
    train_start = spec.segments.train[0]
    wanted = train_start if train_start < first else first - dt.timedelta(days=WARMUP_CALENDAR_DAYS)
    lookback = max(warm_from, wanted)
    panel = build_panel(
        bars,
        freq=spec.frequency,
        start=lookback,
        end=last,
        segments={"train": (lookback, first - dt.timedelta(days=1)), REPLAY_SEGMENT: (first, last)},
        device=where,
        symbols=symbols,
        universe="nasdaq100" if spec.universe == "nasdaq100" else None,
        benchmark_symbol=spec.benchmark(),
        feature_stats=stats.to(where),
    )
    traders = [load_policy(folder.root, "best", **_policy_options(spec), device=str(where))]
    if len(_board_lineages(folder, spec.tournament.ensemble_k)) >= 2:
        traders.append(load_policy(folder.root, "ensemble", **_policy_options(spec), device=str(where)))
    archive = archive_of(folder.tournament)
    if archive is not None and len(archive.entries) >= 2:
        traders.append(load_policy(folder.root, "trajectory", **_policy_options(spec), device=str(where)))
    policies = {trader.name: trader.act for trader in traders}
    linear = saved_baseline(folder.root, panel)
    settings = spec.env_config(random_start=False)
    return run_backtest(panel, REPLAY_SEGMENT, settings, policies, where, baselines=linear)


def _with_costs(spec: Spec, costs: Mapping[str, float]) -> Spec:
    unknown = sorted(set(costs) - set(EnvConfig.COST_FIELDS))
    if unknown:
        raise SpecError(f"costs: unknown key {unknown[0]!r}; fix: use {', '.join(EnvConfig.COST_FIELDS)}")
    return spec.with_(env=dict(costs)) if costs else spec


def _window(spec: Spec, start: str | dt.date | None, end: str | dt.date | None) -> tuple[dt.date, dt.date]:
    default_first, default_last = spec.segments.backtest
    first = _date(start, "start") if start is not None else default_first
    last = _date(end, "end") if end is not None else default_last
    if last < first:
        raise SpecError(f"end {last} is before start {first}; fix: pass start <= end")
    return first, last


def _date(value: str | dt.date, what: str) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise SpecError(f"{what} {value!r} is not a date; fix: write YYYY-MM-DD") from None


def _first_session(bars: pd.DataFrame) -> dt.date:
    first_ns = pd.DatetimeIndex(bars["timestamp"]).min().as_unit("ns").value
    day = int(session_day_numbers(np.asarray([first_ns], dtype=np.int64))[0])
    stamp: dt.date = pd.Timestamp(day * NS_PER_DAY).date()
    return stamp


def _policy_options(spec: Spec) -> dict[str, Any]:
    return {
        "ensemble_k": spec.tournament.ensemble_k,
        "action_mode": spec.env.action_mode,
        "fully_invested": spec.env.fully_invested,
    }


def _board_lineages(run: RunDir, k: int) -> list[int]:
    """Ranks of the run's ensemble members: the best entries of its (up to) ``k`` best lineages."""
    return leaderboard_of(run.tournament).top_lineage_ranks(k)
