"""The CLI entry point: unknown commands and user errors exit 2 with one line, no traceback."""

from __future__ import annotations

import subprocess
import sys
from unittest import mock

from clirun import run_cli
from finpod.errors import DataError
from finpod.version import __version__


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


def _program(body: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``body`` and then ``finpod ARGS`` through the program's entry point, in a fresh interpreter."""
    argv = ["finpod", *args]
    code = f"import sys\n{body}\nfrom finpod.cli import script\nsys.argv = {argv!r}\nscript()\n"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_program_runs_exit_handlers_and_flushes_before_it_exits() -> None:
    """``script`` skips the module teardown, not the exit handlers or buffered output."""
    body = "import atexit\natexit.register(lambda: print('handler ran'))\nsys.stdout.write('buffered ')"
    done = _program(body, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"buffered finpod {__version__}\nhandler ran\n"


def test_the_program_keeps_the_exit_code_of_a_user_error() -> None:
    done = _program("", "run", "no-such-spec.toml")
    assert done.returncode == 2
    assert done.stderr.startswith("error: no-such-spec.toml: spec file not found")


def test_the_program_waits_for_a_thread_that_still_runs() -> None:
    """A non-daemon thread still running at the end is joined, as the interpreter's own exit does."""
    body = (
        "import threading, time\n"
        "def late():\n    time.sleep(0.5)\n    print('thread finished', flush=True)\n"
        "threading.Thread(target=late).start()"
    )
    done = _program(body, "--version")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.splitlines()) == [f"finpod {__version__}", "thread finished"]
