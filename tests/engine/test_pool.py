"""The pool: lagging against live pods, exploit from the latest state, the schedule, reproducibility."""

from __future__ import annotations

import dataclasses
import json
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
    resume_tournament,
    tournament_config,
)
from podracer import Tournament, TournamentError, read_events
from podracer.leaderboard import Leaderboard
from podracer.pod import Pod
from podracer.schedule import fresh_probability, pool_target, retirees


def _fingerprint(run_dir: Path) -> list[tuple[Any, ...]]:
    """Everything about a run's leaderboard but admission times."""
    index = json.loads((run_dir / "leaderboard" / "index.json").read_text())
    return [tuple(v for k, v in sorted(entry.items()) if k != "created_at") for entry in index["entries"]]


def _started(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {e["pod_id"]: e["data"] for e in events if e["kind"] == "pod_started"}


def test_no_pod_is_ever_replaced_in_a_one_pod_pool(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, lagging_rounds=1, budget_env_steps=16 * ROUND_ENV_STEPS)
    with new_tournament(tmp_path, config) as tournament:
        result = tournament.run()
    events = read_events(tmp_path)
    assert result.rounds == 16
    assert not [e for e in events if e["kind"] == "pod_replaced"]
    assert [e["data"]["reason"] for e in events if e["kind"] == "pod_retired"] == ["budget spent"]
    assert {e["pod_id"] for e in events if e["kind"] == "round_finished"} == {0}


def test_a_lagging_pod_is_reseeded_from_a_live_leaders_latest_state(tmp_path: Path) -> None:
    config = tournament_config(
        pool_size=3, lagging_rounds=1, fresh_pod_prob=0.0, budget_env_steps=30 * ROUND_ENV_STEPS
    )
    with new_tournament(tmp_path, config) as tournament:
        tournament.run()
    events = read_events(tmp_path)
    replaced = [(i, e) for i, e in enumerate(events) if e["kind"] == "pod_replaced"]
    assert replaced
    started = _started(events)
    for i, event in replaced:
        assert event["data"]["reason"] == "lagging"
        child = started[event["data"]["by"]]
        assert child["origin"] == "pod"
        parent = child["parent_id"]
        parent_rounds = [e for e in events[:i] if e["kind"] == "round_finished" and e["pod_id"] == parent]
        # the parent's LATEST state (its last finished round), not an older best-ever snapshot
        assert child["env_steps"] == parent_rounds[-1]["data"]["lineage_env_steps"]
        assert child["lineage_id"] == started[parent]["lineage_id"]
        assert child["generation"] == started[parent]["generation"] + 1
        laggard = [e for e in events[:i] if e["kind"] == "round_finished" and e["pod_id"] == event["pod_id"]]
        assert laggard[-1]["data"]["smoothed_score"] < parent_rounds[-1]["data"]["smoothed_score"]


def test_step_counts_and_learning_rate_schedules_continue_in_the_child(tmp_path: Path) -> None:
    config = tournament_config(
        pool_size=2, lagging_rounds=1, fresh_pod_prob=0.0, budget_env_steps=24 * ROUND_ENV_STEPS
    )
    with new_tournament(tmp_path, config) as tournament:
        tournament.run()
    board = Leaderboard.open(tmp_path / "leaderboard")
    children = [rank for rank, entry in enumerate(board.entries) if entry.generation >= 1]
    assert children
    for rank in children:
        entry, state = board.entries[rank], board.load_state(rank)
        assert state["env_steps"] == entry.env_steps  # the agent's own counter, which drives its schedule
        assert entry.env_steps > ROUND_ENV_STEPS * (entry.policy_version - entry.generation) // 2


def test_a_pool_of_two_is_bit_reproducible(tmp_path: Path) -> None:
    config = tournament_config(
        pool_size=2, lagging_rounds=1, pool_schedule="halving", budget_env_steps=20 * ROUND_ENV_STEPS
    )
    runs = []
    for name in ("a", "b"):
        with new_tournament(tmp_path / name, config) as tournament:
            runs.append(tournament.run())
    assert _fingerprint(tmp_path / "a") == _fingerprint(tmp_path / "b")
    assert [h.scores for h in runs[0].history] == [h.scores for h in runs[1].history]
    for entry_a, entry_b in zip(runs[0].leaderboard.entries, runs[1].leaderboard.entries, strict=True):
        assert entry_a.snapshot.read_bytes() == entry_b.snapshot.read_bytes()
    kinds = [[(e["kind"], e["pod_id"]) for e in read_events(tmp_path / name)] for name in ("a", "b")]
    assert kinds[0] == kinds[1]
    assert (
        json.loads((tmp_path / "a" / "config.json").read_text())["tournament"]["torch_threads_per_pod"] == 1
    )


def test_successive_halving_retires_the_worst_and_lets_one_lineage_run_long(tmp_path: Path) -> None:
    budget = 36 * ROUND_ENV_STEPS
    config = tournament_config(
        pool_size=4, lagging_rounds=100, pool_schedule="halving", fresh_pod_prob=0.0, budget_env_steps=budget
    )
    with new_tournament(tmp_path, config) as tournament:
        tournament.run()
    events = read_events(tmp_path)
    resized = [(e["data"]["old"], e["data"]["new"]) for e in events if e["kind"] == "pool_resized"]
    assert resized == [(4, 2), (2, 1)]
    smoothed: dict[int, float] = {}
    live = set(_started(events))
    for event in events:
        if event["kind"] == "round_finished":
            smoothed[event["pod_id"]] = event["data"]["smoothed_score"]
        if event["kind"] == "pod_retired" and event["data"]["reason"] != "budget spent":
            assert event["data"]["reason"] == "schedule"
            live.discard(event["pod_id"])
            assert all(smoothed[event["pod_id"]] <= smoothed[other] for other in live)
    assert len(live) == 1
    (survivor,) = live
    last = [e for e in events if e["kind"] == "round_finished" and e["pod_id"] == survivor][-1]
    assert last["data"]["lineage_env_steps"] > budget / 2  # a fixed pool of 4 caps it at budget / 4


def test_schedule_numbers() -> None:
    halving = tournament_config(pool_size=4, pool_schedule="halving", budget_env_steps=1200)
    assert [pool_target(halving, f, 4) for f in (0.0, 0.32, 0.34, 0.66, 0.67, 1.0)] == [4, 4, 2, 2, 1, 1]
    assert pool_target(halving, 0.5, 0) == 0
    fixed = tournament_config(pool_size=4)
    assert {pool_target(fixed, f, 3) for f in (0.0, 0.5, 1.0)} == {3}
    floored = dataclasses.replace(halving, halving_floor=2)
    assert [pool_target(floored, f, 4) for f in (0.0, 0.34, 0.67, 1.0)] == [4, 2, 2, 2]
    assert pool_target(floored, 1.0, 1) == 1  # a floor never grows a smaller pool
    assert pool_target(dataclasses.replace(halving, halving_floor=8), 1.0, 4) == 4
    with pytest.raises(TournamentError, match="halving_floor is 0"):
        dataclasses.replace(halving, halving_floor=0)
    fresh = tournament_config(fresh_pod_prob=0.4)
    assert [fresh_probability(fresh, f) for f in (0.0, 0.5, 1.0)] == [0.4, 0.2, 0.0]


def test_retirees_are_the_worst_smoothed_scores() -> None:
    def pod(pod_id: int, score: float | None) -> Pod:
        return Pod(pod_id, None, pod_id, 0, 0, TINY_PPO, None, None, 0, 0, smoothed_score=score)  # type: ignore[arg-type]

    pods = [pod(0, 0.5), pod(1, -1.0), pod(2, None), pod(3, 0.9), pod(4, -1.0)]
    assert [p.pod_id for p in retirees(pods, 3)] == [2, 4, 1]
    assert retirees(pods, 0) == []


class _KilledAfterTheLeaderboardWrite(BaseException):
    """Stands in for SIGKILL: nothing runs after it but ``finally`` blocks."""


def test_pod_ids_stay_unique_when_killed_between_the_leaderboard_and_the_state_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tournament_config(pool_size=2, budget_env_steps=12 * ROUND_ENV_STEPS)
    offer = Leaderboard.offer
    for kill_at in (1, 3):
        calls = 0

        def offer_then_die(self: Leaderboard, *args: Any, _kill_at: int = kill_at) -> Any:
            nonlocal calls
            calls += 1
            entry = offer(self, *args)
            if calls == _kill_at:
                raise _KilledAfterTheLeaderboardWrite
            return entry

        monkeypatch.setattr(Leaderboard, "offer", offer_then_die)
        started = (tmp_path / "state.json").exists()
        with pytest.raises(_KilledAfterTheLeaderboardWrite):
            (resume_tournament(tmp_path) if started else new_tournament(tmp_path, config)).run()
    monkeypatch.setattr(Leaderboard, "offer", offer)
    with resume_tournament(tmp_path) as tournament:
        tournament.run()
    events = read_events(tmp_path)
    new_ids = [
        e["pod_id"] for e in events if e["kind"] == "pod_started" and e["data"]["origin"] != "snapshot"
    ]
    assert len(new_ids) == len(set(new_ids)) >= 4
    board = Leaderboard.open(tmp_path / "leaderboard")
    seeds = {e["pod_id"]: e["data"]["seed"] for e in events if e["kind"] == "pod_started"}
    assert all(entry.seed == seeds[entry.pod_id] for entry in board.entries)


def test_one_tournament_at_a_time_per_run_folder(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=2 * ROUND_ENV_STEPS)
    first = new_tournament(tmp_path, config)
    with pytest.raises(TournamentError, match=r"in use by another open tournament \(process \d+\)"):
        resume_tournament(tmp_path)
    with pytest.raises(TournamentError, match="in use by another open tournament"):
        Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, Validation())
    first.run()
    first.close()
    with resume_tournament(tmp_path) as second:
        with pytest.raises(TournamentError, match="in use"):
            resume_tournament(tmp_path)
        second.run()
    with pytest.raises(TournamentError, match=r"is closed; use Tournament\.resume"):
        second.run()
    resume_tournament(tmp_path).close()
