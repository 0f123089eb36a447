"""Where the CLI writes, and how much: one module-level verbosity setting read by every command.

``finpod -q ...`` sets :data:`level` to :data:`QUIET`, ``finpod -v ...`` to :data:`VERBOSE` (the error
path shows tracebacks then). Human text goes through :func:`err_console` (stderr) or
:func:`out_console` (stdout); machine-readable output (``--json``) is printed to stdout as plain JSON.
When stdout or stderr is not a terminal, text is plain (no colour, no animation) and never cut to
a terminal width.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from finpod.consoles import text_console

QUIET = -1
NORMAL = 0
VERBOSE = 1
level: int = NORMAL
"""The CLI's verbosity: QUIET (-q), NORMAL or VERBOSE (-v). Set once by the top-level callback."""


def set_level(value: int) -> None:
    """Set the verbosity (the ``-q`` / ``-v`` callback; tests reset it)."""
    global level
    level = value


def is_verbose() -> bool:
    """True under ``-v``: show tracebacks and debug detail."""
    return level >= VERBOSE


def is_quiet() -> bool:
    """True under ``-q``: progress and notes are not printed (errors and ``--json`` still are)."""
    return level <= QUIET


def out_console(*, quiet: bool | None = None) -> Console:
    """A console on stdout (the summary table); plain and unlimited in width when piped."""
    return _console(stderr=False, quiet=is_quiet() if quiet is None else quiet)


def err_console(*, quiet: bool | None = None) -> Console:
    """A console on stderr for human text next to ``--json`` output (progress, notes, paths)."""
    return _console(stderr=True, quiet=is_quiet() if quiet is None else quiet)


def print_json(payload: Any) -> None:
    """Write ``payload`` as one JSON document on stdout (for ``--json``), then a newline."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def _console(*, stderr: bool, quiet: bool) -> Console:
    return text_console(sys.stderr if stderr else sys.stdout, quiet=quiet)
