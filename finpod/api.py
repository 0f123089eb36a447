"""The Python API for research scripts (re-exported as ``finpod.Spec``, ``finpod.run``, ...).

Example (the README's)::

    import finpod

    spec = finpod.Spec.from_toml("strategies/demo.toml").with_(tournament={"budget_env_steps": 50_000})
    result = finpod.run(spec)                      # train, select on validation, backtest, report
    result.metrics                                 # DataFrame: Sharpe, drawdown, Calmar... per trader
    trader = result.policy("best")                 # callable: observations (N, D) -> actions (N, A)
    later = finpod.backtest_run(result, start="2018-07-02", end="2018-12-31", costs={"fee_rate": 0.001})
    trader.export("best.pt2")                      # loads with torch alone: torch.export.load(...)
    envs = finpod.make_env(spec, segment="train", num_envs=8)  # gymnasium VectorEnv
    finpod.runs("reports")                         # every run under reports/, one row each
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from finpod.catalog import compare as compare_runs
from finpod.catalog import runs
from finpod.consoles import text_console
from finpod.data.store import Manifest, read_dataset
from finpod.errors import SpecError
from finpod.interop import make_env
from finpod.paths import from_cwd
from finpod.pipeline.main import RunResult, leaderboard_records
from finpod.pipeline.main import run as _run_pipeline
from finpod.replay import backtest_run
from finpod.report.artifacts import read_segment
from finpod.report.writer import HTML_FILE, METRICS_FILE, VALIDATION_DIR
from finpod.rundir import RunDir, load_spec_file
from finpod.spec import Spec
from finpod.trader import TraderPolicy
from podracer.api import leaderboard_of

__all__ = [
    "RunResult",
    "Spec",
    "TraderPolicy",
    "backtest_run",
    "compare_runs",
    "load_dataset",
    "load_run",
    "make_env",
    "run",
    "runs",
]


def load_dataset(path: str | Path) -> tuple[pd.DataFrame, Manifest]:
    """Bars (bar schema: timestamp UTC, symbol, OHLCV) and manifest of a dataset folder.

    A relative ``path`` is taken from the current folder.
    """
    return read_dataset(from_cwd(path))


def run(
    spec: Spec | str | Path,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    data_root: str | Path | None = None,
    quiet: bool = False,
    report: bool = True,
) -> RunResult:
    """Run the main job (train, select on validation, backtest, report) and return its results.

    Args:
        spec: a :class:`Spec` or the path of a spec file.
        out: folder that receives ``<run_id>/`` (default: ``./reports``, or ``$FINPOD_HOME/reports``).
        resume: continue the newest unfinished run of this exact spec under ``out``.
        data_root: where a synthetic spec's generated dataset is cached (default: ``./data``, or
            ``$FINPOD_HOME/data``).
        quiet: print nothing (no progress bar, no summary table). Printed text goes to stdout,
            plain and never cut to a width when stdout is not a terminal (a log, a notebook).
        report: False skips the plots and ``report.html`` (``metrics.json`` and the CSVs are still
            written); ``finpod report RUN_DIR`` renders them later.
    """
    resolved = spec if isinstance(spec, Spec) else load_spec_file(spec)
    console = text_console(quiet=quiet)
    return _run_pipeline(
        resolved,
        out=None if out is None else Path(out),
        resume=resume,
        data_root=None if data_root is None else Path(data_root),
        console=console,
        report=report,
    )


def load_run(run_dir: str | Path) -> RunResult:
    """A finished run read back from its folder (``metrics.json`` and the pyfolio CSVs it saved).

    Raises:
        SpecError: not a finished finpod run folder.
    """
    folder = RunDir(Path(run_dir).expanduser().resolve())
    spec = folder.load_spec()
    if folder.read_info().get("status") != "done":
        raise SpecError(
            f"{folder.root}: the run has not finished; fix: `finpod run {folder.spec_toml} --resume`"
        )
    segments = json.loads((folder.root / METRICS_FILE).read_text(encoding="utf-8"))["segments"]
    backtest = read_segment(folder.root, segments["backtest"])
    validation = read_segment(folder.root / VALIDATION_DIR, segments["validation"])
    entries = leaderboard_records(leaderboard_of(folder.tournament))
    return RunResult(folder.root, spec, validation, backtest, entries, folder.root / HTML_FILE)
