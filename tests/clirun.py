"""Run the real ``finpod`` CLI entry point in-process and capture what a user would see."""

from __future__ import annotations

import contextlib
import io
import sys
from dataclasses import dataclass
from unittest import mock

from finpod.cli import main


@dataclass(frozen=True)
class CliResult:
    """Exit code and captured output of one CLI invocation."""

    exit_code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """Invoke ``finpod ARGS...`` through :func:`finpod.cli.main` (errors -> exit 2, one line)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with (
        mock.patch.object(sys, "argv", ["finpod", *args]),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            main()
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())
