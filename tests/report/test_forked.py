"""A report step in a forked child: its result, its output and its failures, as if run here."""

from __future__ import annotations

import fcntl
import os
import signal
import time
import warnings
from pathlib import Path

import pytest

from finpod.report import forked
from finpod.report.forked import forking_supported, start_forked
from finpod.report.tearsheet import SECTIONS, TearSheet, write_tearsheet
from finpod.report.writer import TEARSHEET_SPLIT
from report.synthetic import make_backtest

pytestmark = pytest.mark.skipif(not forking_supported(), reason="forked report steps run on Linux only")


def _pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value * 2


def test_the_call_runs_in_a_child_and_returns_its_result() -> None:
    call = start_forked(_pid_and, 21)
    assert call.forked
    pid, value = call.result()
    assert value == 42
    assert pid != os.getpid()


def _raise(message: str) -> None:
    raise ValueError(message)


def test_an_exception_of_the_call_is_raised_here_with_the_childs_traceback() -> None:
    with pytest.raises(ValueError, match="bad input") as raised:
        start_forked(_raise, "bad input").result()
    notes = "".join(getattr(raised.value, "__notes__", []))
    assert "in the forked report step" in notes
    assert "_raise" in notes


class _TwoArgumentError(Exception):
    def __init__(self, what: str, where: str) -> None:
        super().__init__(f"{what} at {where}")


def _raise_unrebuildable(marker: Path) -> None:
    with marker.open("a") as runs:
        runs.write(f"{os.getpid()}\n")
    raise _TwoArgumentError("broken", "panel 3")


def test_an_exception_that_does_not_unpickle_is_reported_not_run_again(tmp_path: Path) -> None:
    marker = tmp_path / "runs.txt"
    with pytest.raises(RuntimeError, match="_TwoArgumentError: broken at panel 3"):
        start_forked(_raise_unrebuildable, marker).result()
    assert len(marker.read_text().splitlines()) == 1  # the child's run only


def _count_runs(marker: Path) -> int:
    with marker.open("a") as runs:
        runs.write("run\n")
    return 7


def test_a_second_result_gives_the_same_value_without_running_again(tmp_path: Path) -> None:
    marker = tmp_path / "runs.txt"
    call = start_forked(_count_runs, marker)
    assert call.result() == 7
    assert call.result() == 7
    assert marker.read_text() == "run\n"


def _die_unless_in(pid: int) -> str:
    if os.getpid() != pid:
        os._exit(3)  # a child killed mid-call (out of memory, a signal)
    return "ran here"


def test_a_child_that_dies_makes_the_call_run_here() -> None:
    assert start_forked(_die_unless_in, os.getpid()).result() == "ran here"


def _unpicklable() -> object:
    return lambda: None


def test_a_result_that_does_not_pickle_is_an_error_that_says_so() -> None:
    with pytest.raises(RuntimeError, match="does not pickle"):
        start_forked(_unpicklable).result()


def _noisy() -> int:
    print("drawn")
    warnings.warn("a deprecation inside the step", DeprecationWarning, stacklevel=1)
    return 1


def test_what_the_child_prints_and_warns_reaches_this_process(capsys: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert start_forked(_noisy).result() == 1
    assert capsys.readouterr().out == "drawn\n"
    assert [(str(w.message), w.category) for w in caught] == [
        ("a deprecation inside the step", DeprecationWarning)
    ]


def _open_descriptors() -> list[int]:
    return sorted(int(name) for name in os.listdir("/proc/self/fd"))


def test_the_child_holds_no_descriptor_of_this_process_but_its_pipe_and_stdio(tmp_path: Path) -> None:
    """A run folder's lock held here must not outlive this process in a drawing child."""
    lock = os.open(tmp_path / "run.lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        descriptors = start_forked(_open_descriptors).result()
    finally:
        os.close(lock)
    assert lock not in descriptors
    assert len([fd for fd in descriptors if fd > 2]) <= 2  # the pipe, and listdir's own descriptor


def _sleep() -> None:
    time.sleep(60)


def _hang_unless_in(pid: int) -> str:
    if os.getpid() != pid:
        time.sleep(3600)  # a child stuck on a lock another thread held at the fork
    return "ran here"


def test_a_child_that_does_not_answer_is_stopped_and_the_call_runs_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(forked, "CHILD_DEADLINE_S", 1.0)
    started = time.monotonic()
    assert start_forked(_hang_unless_in, os.getpid()).result() == "ran here"
    assert time.monotonic() - started < 30


def _sleep_after_writing_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))
    time.sleep(60)


class _Interrupted(Exception):
    pass


def test_an_interrupt_while_waiting_stops_and_reaps_the_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    call = start_forked(_sleep_after_writing_pid, pid_file)
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(_Interrupted):
            call.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process, not even a zombie
        os.kill(int(pid_file.read_text()), 0)


def test_cancel_stops_a_child_still_running() -> None:
    call = start_forked(_sleep)
    started = time.monotonic()
    call.cancel()
    assert time.monotonic() - started < 5
    assert call.forked


def test_the_split_tear_sheet_equals_the_whole_one(tmp_path: Path) -> None:
    """Two halves drawn in two children give the panels, tables and notes of one drawing, byte for byte."""
    assert [section for half in TEARSHEET_SPLIT for section in half] == list(SECTIONS)
    result = make_backtest(num_sessions=80).traders["best"]
    whole = write_tearsheet(
        result, None, benchmark_name="QQQ", rolling_window=21, plots_dir=tmp_path / "whole"
    )
    calls = [
        start_forked(
            write_tearsheet,
            result,
            None,
            benchmark_name="QQQ",
            rolling_window=21,
            plots_dir=tmp_path / "split",
            sections=half,
        )
        for half in TEARSHEET_SPLIT
    ]
    joined = TearSheet.joined([call.result() for call in calls])
    assert [(p.section, p.name, p.title, p.png) for p in joined.panels] == [
        (p.section, p.name, p.title, p.png) for p in whole.panels
    ]
    assert {p.section for p in whole.panels} == set(SECTIONS)
    assert joined.tables_html == whole.tables_html
    assert joined.notes == whole.notes
    for panel in joined.panels:
        assert panel.path.read_bytes() == panel.png


def test_a_tear_sheet_section_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    result = make_backtest(num_sessions=30).traders["best"]
    with pytest.raises(ValueError, match="unknown tear sheet sections"):
        write_tearsheet(
            result, None, benchmark_name="QQQ", rolling_window=None, plots_dir=tmp_path, sections=["risk"]
        )
