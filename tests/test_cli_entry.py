"""The CLI entry point: unknown commands and user errors exit 2 with one line, no traceback."""

from __future__ import annotations

from unittest import mock

from clirun import run_cli
from finpod.errors import DataError


def test_unknown_command_exits_2() -> None:
    result = run_cli("no-such-command")
    assert result.exit_code == 2
    assert "No such command" in result.stderr + result.stdout


def test_finpod_error_is_one_line_exit_2() -> None:
    with mock.patch("finpod.cli.app", side_effect=DataError("bad.csv: AAPL: broken\n  row; fix it")):
        result = run_cli("data")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: bad.csv: AAPL: broken row; fix it"
    assert "Traceback" not in result.stderr
