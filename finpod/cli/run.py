"""``finpod run``, ``finpod backtest``, ``finpod report``: the main job and its reruns."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from finpod.cli.output import out_console
from finpod.errors import SpecError


def _console() -> Console:
    return out_console()


def run_command(
    spec: Annotated[Path, typer.Argument(help="strategy spec, e.g. strategies/demo.toml")],
    out: Annotated[
        Path | None,
        typer.Option(help="folder that receives <run_id>/ (default: ./reports, or $FINPOD_HOME/reports)"),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="continue the newest unfinished run of this exact spec")
    ] = False,
) -> None:
    """Train a tournament on SPEC, select on validation, backtest once, write the report."""
    from finpod.pipeline.main import run
    from finpod.spec import Spec

    run(Spec.from_toml(spec), out=out, resume=resume, console=_console())


def backtest_command(
    run_dir: Annotated[Path, typer.Argument(help="a run folder, reports/<run_id>")],
    segment: Annotated[str, typer.Option(help="validation or backtest")] = "backtest",
) -> None:
    """Rerun the deterministic backtest of a finished run's traders and baselines on one segment."""
    from finpod.pipeline.reruns import rerun_backtest

    if segment not in ("validation", "backtest"):
        raise SpecError(f"--segment: unknown segment {segment!r}; fix: use validation or backtest")
    rerun_backtest(run_dir, segment, console=_console())


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="a run folder, reports/<run_id>")],
) -> None:
    """Rebuild a run's report (metrics.json, plots, report.html) from its saved results."""
    from finpod.pipeline.reruns import rebuild

    rebuild(run_dir, console=_console())


def register(app: typer.Typer) -> None:
    """Add the main-job commands to the top-level ``finpod`` app."""
    app.command("run")(run_command)
    app.command("backtest")(backtest_command)
    app.command("report")(report_command)
