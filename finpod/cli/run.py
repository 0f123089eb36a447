"""``finpod run``, ``finpod backtest``, ``finpod report``: the main job and its reruns.

With ``--json`` a command prints one JSON document on stdout (the machine-readable summary) and
its human text (progress, tables, notes) on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console

from finpod.cli.output import err_console, out_console, print_json

JSON_HELP = "Print a machine-readable JSON summary on stdout (human text goes to stderr)."


def _console(as_json: bool) -> Console:
    return err_console() if as_json else out_console()


def run_command(
    spec: Annotated[Path, typer.Argument(help="strategy spec, e.g. strategies/demo.toml")],
    out: Annotated[
        Path | None,
        typer.Option(help="folder that receives <run_id>/ (default: ./reports, or $FINPOD_HOME/reports)"),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="continue the newest unfinished run of this exact spec")
    ] = False,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="SECTION.KEY=VALUE",
            help="override a spec setting, validated like the file (repeatable), e.g. "
            "--set tournament.budget_env_steps=20000",
        ),
    ] = None,
    no_report: Annotated[
        bool,
        typer.Option("--no-report", help="skip plots and report.html (metrics.json and CSVs are written)"),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    backend: Annotated[
        str | None,
        typer.Option(
            help="where pods train: local, processes, population or ray "
            "(default: the spec's tournament.backend)"
        ),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster to join with --backend ray: auto or HOST:PORT (default: a private Ray)"
        ),
    ] = None,
) -> None:
    """Train a tournament on SPEC, select on validation, backtest once, write the report."""
    from finpod.pipeline.main import run
    from finpod.rundir import load_spec_file
    from finpod.spec.overrides import apply_overrides

    flags = {
        f"--{key}": ("tournament", key, value)
        for key, value in (("backend", backend), ("address", address))
        if value is not None
    }
    resolved = apply_overrides(load_spec_file(spec), overrides or [], flags)
    result = run(resolved, out=out, resume=resume, console=_console(as_json), report=not no_report)
    if as_json:
        from finpod.pipeline.summary import summary_dict

        html = result.report_html if result.report_html.is_file() else None
        print_json(
            {
                "run_id": result.run_dir.name,
                "run_dir": str(result.run_dir),
                "report_html": None if html is None else str(html),
                "metrics_json": str(result.run_dir / "metrics.json"),
                "status": "done",
                **summary_dict(result.backtest, result.validation, result.run_dir),
            }
        )


def backtest_command(
    run_dir: Annotated[Path, typer.Argument(help="a run folder, reports/<run_id>")],
    segment: Annotated[
        Literal["validation", "backtest"], typer.Option(help="the segment to rerun")
    ] = "backtest",
    out: Annotated[
        Path | None, typer.Option(help="folder for the pyfolio CSVs (default: RUN_DIR/rerun/SEGMENT)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Rerun the deterministic backtest of a finished run's traders and baselines on one segment."""
    from finpod.pipeline.reruns import rerun_backtest
    from finpod.pipeline.summary import summary_dict

    result, folder = rerun_backtest(run_dir, segment, console=_console(as_json), out=out)
    if as_json:
        print_json(
            {
                "run_dir": str(Path(run_dir).resolve()),
                "csv_dir": str(folder),
                **summary_dict(result, None, Path(run_dir).resolve()),
            }
        )


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="a run folder, reports/<run_id>")],
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Rebuild a run's report (metrics.json, plots, report.html) from its saved results."""
    from finpod.pipeline.reruns import rebuild

    html = rebuild(run_dir, console=_console(as_json))
    if as_json:
        payload: dict[str, Any] = {
            "report_html": str(html),
            "metrics_json": str(html.parent / "metrics.json"),
        }
        print_json(payload)


def register(app: typer.Typer) -> None:
    """Add the main-job commands to the top-level ``finpod`` app."""
    app.command("run")(run_command)
    app.command("backtest")(backtest_command)
    app.command("report")(report_command)
