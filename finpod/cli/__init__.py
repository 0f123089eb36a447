"""The ``finpod`` command line: ``init``, ``data``, ``bench``, ``run``, ``backtest``, ``report``, ``runs``,
``paper``.

Global options (before the command): ``--version``, ``-q/--quiet``, ``-v/--verbose`` (they set
:data:`finpod.cli.output.level`). Every error reaches the user through :mod:`finpod.cli.errors`: one
line on stderr; exit code 2 for a mistake the user can fix (finpod and podracer errors, OS errors on
a user's path, usage errors), 1 for a bug (with a hint to rerun with ``-v`` for the traceback).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import Annotated, NoReturn

import typer
from typer import _click as click

from finpod.cli import bench, data, errors, init, output, paper, run, runs
from finpod.version import __version__

app = typer.Typer(
    name="finpod",
    help="Deep-RL trading agents trained in a podracer tournament.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"finpod {__version__}\n")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print finpod's version and exit."),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("-q", "--quiet", help="Print only errors and --json output (no progress, no tables)."),
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
paper.register(app)
app.add_typer(runs.app, name="runs", help="List the runs under a reports folder, compare several.")


def main() -> None:
    """Entry point of the ``finpod`` script: every failure is one line on stderr (see ``errors``).

    Usage errors (an unknown flag, ``--seed -1``) exit 2 too, as one line naming the command's
    ``--help``; ``finpod`` alone, or a group alone, prints its help.
    """
    output.set_level(output.NORMAL)
    try:
        code = app(standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as err:  # the help is already printed
        sys.exit(err.exit_code)
    except click.exceptions.UsageError as err:
        where = err.ctx.command_path if err.ctx else "finpod"
        message = " ".join(err.format_message().split())
        sys.stderr.write(f"error: {message}; fix: see `{where} --help`\n")
        sys.exit(errors.USER_ERROR)
    except typer.Abort as abort:
        if isinstance(abort.__cause__, EOFError):  # click turns every EOFError into Abort
            sys.exit(errors.report(abort.__cause__, sys.stderr))
        sys.stderr.write("error: interrupted\n")
        sys.exit(errors.INTERRUPTED)
    except click.exceptions.ClickException as err:
        sys.stderr.write(f"error: {' '.join(err.format_message().split())}\n")
        sys.exit(err.exit_code)
    except SystemExit:
        raise
    except BaseException as err:
        sys.exit(errors.report(err, sys.stderr))
    sys.exit(code if isinstance(code, int) else 0)


def script() -> NoReturn:
    """The ``finpod`` program (``finpod`` script, ``python -m finpod``): :func:`main`, then
    :func:`exit_now`.

    Call :func:`main` to run the command line in a process that goes on afterwards (a test).
    """
    try:
        main()
    except SystemExit as done:
        code = done.code
    else:  # main always exits; this only keeps the type checker honest
        code = 0
    if code is not None and not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    exit_now(code or 0)


def exit_now(code: int) -> NoReturn:
    """End the program with ``code`` without the interpreter's module teardown.

    With torch, pandas and pyfolio loaded, tearing down the modules takes about a second after the
    last line is printed (0.4 s for torch alone on a 2-core box), and nothing in it is finpod's:
    every file finpod writes is closed and atomic. The exit handlers still run (``atexit``: logging,
    temporary folders, Ray), then stdout and stderr are flushed. Where a thread that is not a daemon
    still runs, the interpreter's own exit waits for it instead.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(thread.is_alive() for thread in others):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe (`finpod runs | head`): nothing to add
            stream.flush()
    os._exit(code)
