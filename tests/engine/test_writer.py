"""Run-directory writes on a background thread: in order, a failure stops the writes behind it and
surfaces in the tournament, and what is on disk is always a state the run passed through."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import podracer.leaderboard as leaderboard_module
import podracer.rundir as rundir_module
from engine._tournament_kit import ROUND_ENV_STEPS, new_tournament, resume_tournament, tournament_config
from podracer import Leaderboard, TournamentEvent
from podracer.writer import OrderedWriter


def test_writes_run_in_submission_order_off_the_calling_thread() -> None:
    writer = OrderedWriter()
    done: list[tuple[int, str]] = []
    release = threading.Event()

    def slow(index: int) -> None:
        release.wait(5.0)
        done.append((index, threading.current_thread().name))

    writer.submit(slow, 0)
    for index in range(1, 6):
        writer.submit(lambda i=index: done.append((i, threading.current_thread().name)))
    assert done == []  # the caller went on while the first write waits
    assert writer.pending == 6
    release.set()
    writer.close()
    assert [index for index, _ in done] == list(range(6))
    assert all(name.startswith("podracer-writer") for _, name in done)


def test_a_failed_write_skips_the_writes_behind_it_and_is_raised() -> None:
    writer = OrderedWriter()
    done: list[int] = []

    def fail() -> None:
        raise OSError("No space left on device")

    writer.submit(done.append, 1)
    writer.submit(fail)
    writer.submit(done.append, 3)  # e.g. a state.json naming the snapshot that failed
    with pytest.raises(OSError, match="No space left"):
        writer.flush()
    assert done == [1]
    with pytest.raises(OSError, match="No space left"):
        writer.submit(done.append, 4)
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert done == [1]


def test_snapshots_are_written_on_the_writer_thread_and_are_all_on_disk_after_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshot writes slowed to 50 ms each run on the writer thread, not the orchestrator's; after
    run() returns every file state.json and the leaderboard's index name is on disk."""
    real = rundir_module.write_snapshot_file
    writer_threads: set[str] = set()

    def slow_write(path: Path, data: bytes) -> None:
        writer_threads.add(threading.current_thread().name)
        time.sleep(0.05)
        real(path, data)

    monkeypatch.setattr(rundir_module, "write_snapshot_file", slow_write)
    monkeypatch.setattr(leaderboard_module, "write_snapshot_file", slow_write)
    config = tournament_config(pool_size=2, budget_env_steps=12 * ROUND_ENV_STEPS)
    with new_tournament(tmp_path, config) as tournament:
        result = tournament.run()
    assert result.rounds >= 12
    assert writer_threads
    assert all(name.startswith("podracer-writer") for name in writer_threads)
    state = json.loads((tmp_path / "state.json").read_text())
    for record in state["pool"]:
        assert (tmp_path / "pods" / record["snapshot_name"]).is_file()
    board = Leaderboard.open(tmp_path / "leaderboard")
    assert len(board.entries) == config.leaderboard_size
    board.verify()  # every entry's snapshot on disk, intact
    assert resume_tournament(tmp_path).run().rounds == result.rounds  # finished: nothing more to do


def test_a_snapshot_that_cannot_be_written_stops_the_run_and_it_resumes_from_the_state_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = rundir_module.write_snapshot_file
    calls = {"n": 0}

    def full_disk(path: Path, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 7:
            raise OSError(28, "No space left on device")
        real(path, data)

    monkeypatch.setattr(rundir_module, "write_snapshot_file", full_disk)
    events: list[TournamentEvent] = []
    with pytest.raises(OSError, match="No space left"):
        new_tournament(tmp_path, tournament_config(pool_size=2)).run(on_event=events.append)
    state = json.loads((tmp_path / "state.json").read_text())
    assert not state["finished"]
    for record in state["pool"]:  # state.json never names the snapshot that failed
        assert (tmp_path / "pods" / record["snapshot_name"]).is_file()
    monkeypatch.setattr(rundir_module, "write_snapshot_file", real)
    with resume_tournament(tmp_path) as resumed:
        result = resumed.run()
    config = tournament_config(pool_size=2)
    assert config.budget_env_steps is not None
    assert result.env_steps >= config.budget_env_steps


def test_a_queue_over_its_size_makes_the_caller_wait_for_the_oldest_write() -> None:
    writer = OrderedWriter(max_queued_bytes=10)
    release = threading.Event()
    done: list[int] = []

    def slow(index: int) -> None:
        release.wait(5.0)
        done.append(index)

    writer.submit(slow, 0, size=8)
    assert writer.queued_bytes == 8  # under the size: the caller goes on
    threading.Timer(0.2, release.set).start()
    writer.submit(slow, 1, size=8)  # 16 > 10: waits until the first write is done
    assert done[:1] == [0]
    assert writer.queued_bytes <= 10
    writer.close()
    assert done == [0, 1]
    assert writer.queued_bytes == 0


def test_a_new_pod_s_id_is_on_disk_before_its_first_event(tmp_path: Path) -> None:
    """A kill right after ``pod_started`` must not hand the id to another pod on resume."""
    seen: list[tuple[int, int]] = []

    def check(event: TournamentEvent) -> None:
        if event.kind == "pod_started" and event.pod_id is not None:
            on_disk = json.loads((tmp_path / "state.json").read_text())["next_pod_id"]
            seen.append((event.pod_id, on_disk))

    config = tournament_config(pool_size=2, budget_env_steps=12 * ROUND_ENV_STEPS, lagging_rounds=1)
    with new_tournament(tmp_path, config) as tournament:
        tournament.run(on_event=check)
    assert len(seen) >= 2
    assert all(pod_id < next_id for pod_id, next_id in seen)
