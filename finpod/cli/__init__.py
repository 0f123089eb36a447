"""The ``finpod`` command line: ``data``, ``bench``, ``run``, ``backtest``, ``report``.

Every user error (:class:`finpod.errors.FinpodError`) becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from finpod.cli import bench, data, run
from finpod.errors import FinpodError

app = typer.Typer(
    name="finpod",
    help="Deep-RL trading agents trained in a podracer tournament.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(data.app, name="data", help="Import, synthesise, fetch and inspect market datasets.")
app.add_typer(bench.app, name="bench", help="Benchmarks that print throughput and peak memory.")
run.register(app)

_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point of the ``finpod`` script: usage errors exit 2 (typer), user errors too (here)."""
    try:
        app()
    except FinpodError as err:
        _stderr.print(f"[bold red]error:[/] {escape(str(err))}", markup=True)
        sys.exit(2)
