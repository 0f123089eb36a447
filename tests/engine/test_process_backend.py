"""The process backend: pods in worker processes on this machine (forked or fresh interpreters).

Real processes throughout: the tiny toy tournament of ``_tournament_kit`` trains on forked workers
and must give the thread backend's leaderboard bit for bit; workers are killed with SIGKILL
mid-round; a driver process is killed and its workers must exit.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine._tournament_kit import (
    ROUND_ENV_STEPS,
    TINY_PPO,
    Validation,
    make_agent,
    make_env,
    new_tournament,
    tournament_config,
)
from podracer import LocalBackend, TournamentEvent
from podracer.backends import ProcessBackend, RoundTask, processes
from podracer.backends.pod_host import WorkerLostError
from podracer.errors import TournamentError
from podracer.pod import Pod

TESTS_DIR = Path(__file__).resolve().parents[1]


def _pod(seed: int = 3) -> Pod:
    return Pod(0, None, 0, 0, seed, TINY_PPO, make_agent(TINY_PPO, seed), make_env(seed), 0, 0)


def _gone(pid: int) -> bool:
    """The process has exited (a zombie left for a parent that does not reap counts as exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


def _wait_gone(pids: list[int], timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


class SlowValidation(Validation):
    """The kit's validation score, after a pause long enough to kill the worker mid-round."""

    def __call__(self, policy: Any) -> float:
        time.sleep(30.0)
        return super().__call__(policy)


class BrokenValidation(Validation):
    def __call__(self, policy: Any) -> float:
        raise ValueError("evaluate is broken")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork workers are the Linux default")
def test_pods_in_processes_give_the_thread_backends_leaderboard_bit_for_bit(tmp_path: Path) -> None:
    """Replacements, halving retirements and many rounds: the same scores in the same order."""
    config = tournament_config(
        pool_size=3, budget_env_steps=36 * ROUND_ENV_STEPS, pool_schedule="halving", lagging_rounds=1
    )
    runs: dict[str, list[TournamentEvent]] = {}
    backends = {"threads": LocalBackend(3, torch_threads_per_slot=1), "processes": ProcessBackend(3)}
    try:
        for name, backend in backends.items():
            events: list[TournamentEvent] = []
            with new_tournament(tmp_path / name, config, backend) as tournament:
                result = tournament.run(on_event=events.append)
            assert result.env_steps == 36 * ROUND_ENV_STEPS
            runs[name] = events
    finally:
        for backend in backends.values():
            backend.shutdown()

    def rounds(events: list[TournamentEvent]) -> list[tuple[Any, ...]]:
        return [(e.pod_id, e.env_steps, e.data["score"]) for e in events if e.kind == "round_finished"]

    def kinds(events: list[TournamentEvent]) -> list[tuple[str, int | None]]:
        return [(e.kind, e.pod_id) for e in events]

    assert rounds(runs["processes"]) == rounds(runs["threads"])
    assert kinds(runs["processes"]) == kinds(runs["threads"])
    assert {"pod_replaced", "pod_retired"} <= {kind for kind, _ in kinds(runs["threads"])}


def test_a_killed_worker_fails_its_round_and_a_new_worker_takes_the_next() -> None:
    backend = ProcessBackend(1)
    pod = _pod()
    try:
        (pid,) = backend.pids()
        future = backend.submit(RoundTask(pod, 1, SlowValidation(), make_agent, make_env))
        time.sleep(1.0)  # the round is in its evaluation now
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerLostError, match=rf"pid {pid}\) died mid-round"):
            future.result(timeout=60)
        assert _wait_gone([pid])
        result = backend.submit(RoundTask(pod, 2, Validation(), make_agent, make_env)).result(timeout=120)
        assert result.env_steps == 2 * ROUND_ENV_STEPS
        assert pod.agent.env_steps == 2 * ROUND_ENV_STEPS  # the trained state came back into the pod
        assert backend.pids()
        assert pid not in backend.pids()
    finally:
        backend.shutdown()


def test_a_worker_killed_between_rounds_fails_its_pods_next_round_instead_of_restarting_its_env() -> None:
    """The env's episode died with the worker: a silent rebuild elsewhere would leave the thread
    backend's leaderboard, so the orchestrator gets a crashed round (and restores the pod)."""
    backend = ProcessBackend(1)
    pod = _pod()
    try:
        (pid,) = backend.pids()
        backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env)).result(timeout=120)
        os.kill(pid, signal.SIGKILL)
        assert _wait_gone([pid])
        with pytest.raises(WorkerLostError, match=r"died between its rounds"):
            backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env)).result(timeout=60)
        result = backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env)).result(timeout=120)
        assert result.env_steps == ROUND_ENV_STEPS
        assert pid not in backend.pids()
    finally:
        backend.shutdown()


def test_a_request_that_cannot_be_built_raises_and_leaves_the_worker_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = ProcessBackend(1)
    pod = _pod()

    def broken_pack(state: Any) -> bytes:
        raise TypeError("cannot pickle 'torch._C.Generator' object")

    try:
        with monkeypatch.context() as patch:
            patch.setattr(processes, "pack_state", broken_pack)
            with pytest.raises(TypeError, match="Generator"):
                backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env))
        result = backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env)).result(timeout=120)
        assert result.env_steps == ROUND_ENV_STEPS
    finally:
        backend.shutdown()  # returns: no round was left pending


def test_a_round_that_raises_crashes_only_that_round() -> None:
    backend = ProcessBackend(1)
    pod = _pod()
    try:
        with pytest.raises(ValueError, match="evaluate is broken"):
            backend.submit(RoundTask(pod, 1, BrokenValidation(), make_agent, make_env)).result(timeout=120)
        result = backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env)).result(timeout=120)
        assert result.env_steps == ROUND_ENV_STEPS
    finally:
        backend.shutdown()


def test_a_spawned_worker_runs_a_round_in_a_fresh_interpreter() -> None:
    backend = ProcessBackend(1, start="spawn")
    pod = _pod()
    try:
        assert backend.start == "spawn"
        result = backend.submit(RoundTask(pod, 1, Validation(), make_agent, make_env)).result(timeout=180)
        assert result.env_steps == ROUND_ENV_STEPS
        assert pod.agent.env_steps == ROUND_ENV_STEPS
    finally:
        pids = backend.pids()
        backend.shutdown()
    assert _wait_gone(pids)


def test_bad_settings_and_tasks_are_refused_with_the_fix() -> None:
    with pytest.raises(TournamentError, match="at least 1"):
        ProcessBackend(0)
    with pytest.raises(TournamentError, match="torch_threads_per_worker"):
        ProcessBackend(1, torch_threads_per_worker=0)
    with pytest.raises(TournamentError, match="use 'fork' or 'spawn'"):
        ProcessBackend(1, start="thread")  # type: ignore[arg-type]
    backend = ProcessBackend(1)
    lock = threading.Lock()

    def unpicklable_env(seed: int) -> Any:
        with lock:
            return make_env(seed)

    try:
        with pytest.raises(TournamentError, match="RoundTask objects only"):
            backend.submit(lambda: 1)
        with pytest.raises(TournamentError, match="make them picklable"):
            backend.submit(RoundTask(_pod(), 1, Validation(), make_agent, unpicklable_env))
    finally:
        pids = backend.pids()
        backend.shutdown()
    assert _wait_gone(pids)


def test_workers_exit_when_their_driver_is_killed_and_hold_none_of_its_locks(tmp_path: Path) -> None:
    """A SIGKILLed driver's ``flock`` is free at once (its workers closed their copies of its
    descriptors), and its workers exit when their sockets end."""
    lock_path = tmp_path / "lock"
    driver = textwrap.dedent(
        f"""
        import fcntl, time
        from podracer.backends import ProcessBackend
        lock = open({str(lock_path)!r}, "a+")
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        backend = ProcessBackend(2)
        print(" ".join(map(str, backend.pids())), flush=True)
        time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p or os.getcwd() for p in sys.path)}
    process = subprocess.Popen(
        [sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, cwd=TESTS_DIR, env=env
    )
    try:
        assert process.stdout is not None
        pids = [int(pid) for pid in process.stdout.readline().split()]
        assert len(pids) == 2
        assert not any(_gone(pid) for pid in pids)
        process.kill()
        process.wait(timeout=30)
        with lock_path.open("a+") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a worker holds it
        assert _wait_gone(pids), f"pod workers {pids} outlived their driver"
    finally:
        process.kill()
        process.wait(timeout=30)
