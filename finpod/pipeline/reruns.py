"""Reruns on a finished run folder: ``finpod backtest RUN_DIR`` and ``finpod report RUN_DIR``.

A rerun rebuilds the traders from the run's leaderboard and the market from the run's resolved spec
and dataset; the backtest is deterministic, so it reproduces the run's figures.
"""

from __future__ import annotations

from pathlib import Path

import torch
from rich.console import Console

from finpod.backtest.result import BacktestResult
from finpod.backtest.runner import run_backtest
from finpod.errors import SpecError
from finpod.linear_baseline import saved_baseline
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import backtest_panel, load_bars, selection_panel, universe_symbols
from finpod.pipeline.main import select
from finpod.pipeline.summary import print_summary
from finpod.report import rebuild_report
from finpod.report.artifacts import write_segment
from finpod.rundir import RunDir
from podracer.api import archive_of, has_leaderboard, leaderboard_of

RERUN_DIR = "rerun"
"""Sub-folder of a run where reruns write their pyfolio CSVs, one folder per segment."""


def rerun_segment(run_dir: Path, segment: str) -> BacktestResult:
    """Recompute segment ``segment`` (``validation`` or ``backtest``) of a finished run.

    The backtest segment is only read once selection is over (status ``backtesting`` or ``done``):
    a look at it while the tournament can still be resumed would be selection on test data.

    Raises:
        SpecError: not a run folder, its tournament left no leaderboard, (``backtest``) it is
            still training, a part it recorded (leaderboard index, returns, ...) is not the one
            it wrote, or its dataset's bars changed since it started.
    """
    run = RunDir(Path(run_dir).expanduser().resolve())
    info = run.read_info()
    if segment == "backtest" and info.get("status") == "training":
        raise SpecError(
            f"{run.root}: still training, so its backtest segment stays unread; fix: finish it with "
            f"`finpod run {run.spec_toml} --resume`, or pass --segment validation"
        )
    run.verify_integrity()
    spec = run.load_spec()
    if not has_leaderboard(run.tournament):
        raise SpecError(
            f"{run.root}: the tournament has no leaderboard yet; fix: finish it with "
            f"`finpod run {run.spec_toml} --resume`"
        )
    device = torch.device(spec.resolve_device())
    run.check_dataset(Path(info["dataset"]), "rerun")  # other bars would not reproduce its figures
    bars = load_bars(Path(info["dataset"]))
    symbols = universe_symbols(spec, bars)
    build = selection_panel if segment == "validation" else backtest_panel
    panel = build(spec, bars, symbols, str(device))
    context = RunContext.of(spec, panel, device)
    policies = select(spec, leaderboard_of(run.tournament), context.agent_factory, archive_of(run.tournament))
    linear = saved_baseline(run.root, panel)
    return run_backtest(panel, segment, context.eval_config, policies, device, baselines=linear)


def rerun_backtest(
    run_dir: Path, segment: str, *, console: Console, out: Path | None = None
) -> tuple[BacktestResult, Path]:
    """Recompute a segment, print its table and write pyfolio CSVs (``out``, else ``<run>/rerun/<segment>/``).

    Returns:
        The result and the folder the CSVs went to.
    """
    result = rerun_segment(run_dir, segment)
    default = Path(run_dir).expanduser().resolve() / RERUN_DIR / segment
    folder = default if out is None else Path(out).expanduser().resolve()
    write_segment(result, folder)
    print_summary(console, result, None, None, Path(run_dir).expanduser().resolve())
    console.print(f"pyfolio CSVs: {folder}", soft_wrap=True)
    return result, folder


def rebuild(run_dir: Path, *, console: Console) -> Path:
    """Rebuild the report of a run folder; returns the path of ``report.html``.

    Raises:
        SpecError: not a run folder, another process works in it, or a recorded part (returns,
            positions, ...) is truncated, edited or foreign.
    """
    run = RunDir(Path(run_dir).expanduser().resolve())
    run.read_info()
    with run.lock():
        run.verify_integrity()
        paths = rebuild_report(run.root)
    console.print(f"report: {paths.html}", soft_wrap=True)
    html: Path = paths.html
    return html
