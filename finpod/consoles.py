"""Consoles for human text: rich on a terminal, plain and never cut to a width when piped or logged.

rich draws a table at 80 columns when its stream is not a terminal, so a summary printed by a
script (``python sweep.py > log``), a notebook or CI would lose its right-hand columns. Every
console finpod prints through comes from :func:`text_console`.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console

UNLIMITED_COLUMNS = 10_000
"""Console width when the stream is not a terminal: wide enough that no table is cut or wrapped."""


def text_console(stream: TextIO | None = None, *, quiet: bool = False) -> Console:
    """A console on ``stream`` (default: ``sys.stdout`` now); plain and unlimited in width unless a terminal.

    Args:
        stream: where the text goes.
        quiet: print nothing.
    """
    target = sys.stdout if stream is None else stream
    terminal = target.isatty()
    return Console(
        file=target,
        width=None if terminal else UNLIMITED_COLUMNS,
        quiet=quiet,
        highlight=False,
        soft_wrap=not terminal,
    )
