"""Elasticity: the backend's slots change mid-run and the pool follows (seen through the events)."""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from engine._tournament_kit import ROUND_ENV_STEPS, new_tournament, resume_tournament, tournament_config
from podracer import LocalBackend, TournamentEvent, read_events
from podracer.backends.local import default_torch_threads_per_slot

RESIZES = {3: 3, 12: 1, 20: 2}
"""Rounds finished -> slots to set: grow from 1 to 3, shrink to 1, grow to 2."""


def _rounds_between(events: list[dict], start: int, stop: int) -> set[int]:
    return {e["pod_id"] for e in events[start:stop] if e["kind"] == "round_finished"}


def test_the_pool_follows_the_backend_slots(tmp_path: Path) -> None:
    backend = LocalBackend(slots=1)
    finished = 0

    def on_event(event: TournamentEvent) -> None:
        nonlocal finished
        if event.kind == "round_finished":
            finished += 1
            if finished in RESIZES:
                backend.set_slots(RESIZES[finished])

    config = tournament_config(pool_size=1, budget_env_steps=30 * ROUND_ENV_STEPS, lagging_rounds=1000)
    new_tournament(tmp_path, config, backend).run(on_event)
    backend.shutdown()
    events = read_events(tmp_path)
    resized = [i for i, e in enumerate(events) if e["kind"] == "pool_resized"]
    assert [(events[i]["data"]["old"], events[i]["data"]["new"]) for i in resized] == [(1, 3), (3, 1), (1, 2)]
    grow, shrink, regrow = resized

    assert _rounds_between(events, 0, grow) == {0}
    started_on_grow = [e for e in events[grow:shrink] if e["kind"] == "pod_started"]
    assert [e["pod_id"] for e in started_on_grow] == [1, 2]
    assert _rounds_between(events, grow, shrink) == {0, 1, 2}

    retired = [i for i, e in enumerate(events[shrink:regrow], start=shrink) if e["kind"] == "pod_retired"]
    assert len(retired) == 2
    assert all(events[i]["data"]["reason"] == "pool shrank" for i in retired)
    assert len(_rounds_between(events, retired[-1] + 1, regrow)) == 1

    restarted = next(e for e in events[regrow:] if e["kind"] == "pod_started")
    assert restarted["data"]["origin"] == "snapshot"
    assert restarted["data"]["reason"] == "pool grew"
    assert restarted["pod_id"] in {events[i]["pod_id"] for i in retired}
    assert len(_rounds_between(events, regrow, len(events))) == 2


def test_zero_slots_pause_the_run_and_resume_continues(tmp_path: Path) -> None:
    backend = LocalBackend(slots=2)

    def on_event(event: TournamentEvent) -> None:
        if event.kind == "round_finished" and event.env_steps >= 6 * ROUND_ENV_STEPS:
            backend.set_slots(0)

    config = tournament_config(pool_size=2, budget_env_steps=20 * ROUND_ENV_STEPS)
    paused = new_tournament(tmp_path, config, backend).run(on_event)
    backend.shutdown()
    assert paused.env_steps < 20 * ROUND_ENV_STEPS
    assert read_events(tmp_path)[-1]["data"]["budget_spent"] is False
    resumed = resume_tournament(tmp_path).run()
    assert resumed.env_steps >= 20 * ROUND_ENV_STEPS
    assert read_events(tmp_path)[-1]["data"]["budget_spent"] is True


def test_local_backend_runs_tasks_with_its_share_of_torch_threads() -> None:
    threads_before = torch.get_num_threads()
    backend = LocalBackend(slots=2, torch_threads_per_slot=1)
    try:
        assert backend.submit(torch.get_num_threads).result() == 1
        backend.set_slots(5)
        futures = [backend.submit(lambda: threading.current_thread().name) for _ in range(5)]
        assert all(f.result().startswith("podracer-pod") for f in futures)
    finally:
        backend.shutdown()
        torch.set_num_threads(threads_before)
    assert default_torch_threads_per_slot(1) >= default_torch_threads_per_slot(64) == 1
