"""The ``finpod`` command line: ``init``, ``data``, ``bench``, ``run``, ``backtest``, ``report``, ``runs``.

Global options (before the command): ``--version``, ``-q/--quiet``, ``-v/--verbose`` (they set
:data:`finpod.cli.output.level`). Every user error (:class:`finpod.errors.FinpodError`) becomes one
line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

import finpod
from finpod.cli import bench, data, init, output, run
from finpod.errors import FinpodError

app = typer.Typer(
    name="finpod",
    help="Deep-RL trading agents trained in a podracer tournament.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"finpod {finpod.__version__}\n")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print finpod's version and exit."),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="Print only results and errors (no progress, no notes).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Print more detail, and a traceback on errors.")
    ] = False,
) -> None:
    """Deep-RL trading agents trained in a podracer tournament."""
    if quiet and verbose:
        raise typer.BadParameter("-q and -v contradict each other; pass one of them")
    output.set_level(output.QUIET if quiet else output.VERBOSE if verbose else output.NORMAL)


init.register(app)
app.add_typer(data.app, name="data", help="Import, synthesise, fetch and inspect market datasets.")
app.add_typer(bench.app, name="bench", help="Benchmarks that print throughput and peak memory.")
run.register(app)

_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point of the ``finpod`` script: usage errors exit 2 (typer), user errors too (here)."""
    output.set_level(output.NORMAL)
    try:
        app()
    except FinpodError as err:
        _stderr.print(f"[bold red]error:[/] {escape(str(err))}", markup=True)
        sys.exit(2)
