"""The orchestrator: budget, events, determinism, crash handling, asynchrony, resume, bad settings."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from engine._tournament_kit import (
    ACTION_DIM,
    OBS_DIM,
    ROUND_ENV_STEPS,
    TINY_PPO,
    Validation,
    make_agent,
    make_env,
    new_tournament,
    resume_tournament,
    tournament_config,
)
from podracer import (
    Leaderboard,
    LocalBackend,
    Policy,
    SnapshotError,
    Tournament,
    TournamentConfig,
    TournamentError,
    TournamentEvent,
    read_events,
)
from podracer.api import RoundStats, TensorVectorEnv
from podracer.ppo import PPOAgent
from podracer.toy import TargetMatchingEnv

BLOCK_TIMEOUT_S = 60.0
"""How long the asynchrony test lets a blocked pod wait before declaring the pool stuck."""


def _fingerprint(run_dir: Path) -> list[tuple[Any, ...]]:
    """Everything about a run's leaderboard but admission times."""
    index = json.loads((run_dir / "leaderboard" / "index.json").read_text())
    return [tuple(v for k, v in sorted(entry.items()) if k != "created_at") for entry in index["entries"]]


def test_a_run_spends_its_budget_and_fills_the_leaderboard(tmp_path: Path) -> None:
    config = tournament_config(pool_size=2)
    events: list[TournamentEvent] = []
    result = new_tournament(tmp_path, config).run(on_event=events.append)
    assert config.budget_env_steps is not None
    assert config.budget_env_steps <= result.env_steps <= config.budget_env_steps + 2 * ROUND_ENV_STEPS
    assert result.rounds == result.env_steps // ROUND_ENV_STEPS
    scores = result.leaderboard.scores()
    pods_that_finished_a_round = {e.pod_id for e in events if e.kind == "round_finished"}
    assert len(scores) == min(config.leaderboard_size, len(pods_that_finished_a_round))
    assert len({e.pod_id for e in result.leaderboard.entries}) == len(scores)
    assert scores == sorted(scores, reverse=True)
    result.leaderboard.verify()
    kinds = [e.kind for e in events]
    assert kinds.count("round_finished") == result.rounds
    assert kinds[-1] == "tournament_finished"
    assert {"pod_started", "entry_admitted"} <= set(kinds)
    assert [e["kind"] for e in read_events(tmp_path)] == kinds
    assert len(result.history) == result.rounds
    assert result.history[-1].scores == tuple(scores)
    assert all(a.env_steps < b.env_steps for a, b in zip(result.history, result.history[1:], strict=False))


def test_the_tournament_learns(tmp_path: Path) -> None:
    validation = Validation()
    untrained = validation(make_agent(TINY_PPO, 0).act)
    result = new_tournament(tmp_path, tournament_config(pool_size=2)).run()
    best = result.leaderboard.load_agent(0, make_agent)
    assert validation(best.act) == pytest.approx(result.leaderboard.entries[0].score)
    assert result.leaderboard.entries[0].score > untrained + 0.02


def test_one_slot_is_deterministic(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, lagging_rounds=1, budget_env_steps=24 * ROUND_ENV_STEPS)
    first = new_tournament(tmp_path / "a", config).run()
    second = new_tournament(tmp_path / "b", config).run()
    assert _fingerprint(tmp_path / "a") == _fingerprint(tmp_path / "b")
    assert [h.scores for h in first.history] == [h.scores for h in second.history]
    for entry_a, entry_b in zip(first.leaderboard.entries, second.leaderboard.entries, strict=True):
        assert entry_a.snapshot.read_bytes() == entry_b.snapshot.read_bytes()


def test_lagging_pods_are_replaced_by_children_of_live_pods(tmp_path: Path) -> None:
    config = tournament_config(pool_size=2, lagging_rounds=1, fresh_pod_prob=0.0)
    new_tournament(tmp_path, config).run()
    events = read_events(tmp_path)
    replaced = [e for e in events if e["kind"] == "pod_replaced"]
    assert replaced
    assert all(e["data"]["reason"] == "lagging" for e in replaced)
    started = {e["pod_id"]: e["data"] for e in events if e["kind"] == "pod_started"}
    successors = [started[e["data"]["by"]] for e in replaced]
    assert all(s["origin"] == "pod" and s["generation"] >= 1 for s in successors)
    assert any(s["agent_config"] != started[0]["agent_config"] for s in successors)


class _FlakyEvaluate:
    """Raises on the calls numbered in ``fail_on`` (1-based), else scores like :class:`Validation`."""

    def __init__(self, fail_on: set[int] | None, value: float | None = None) -> None:
        self.validation = Validation()
        self.fail_on = fail_on
        self.value = value
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, policy: Policy) -> float:
        with self.lock:
            self.calls += 1
            call = self.calls
        if self.fail_on is None or call in self.fail_on:
            raise RuntimeError(f"injected failure on call {call}")
        return self.validation(policy) if self.value is None else self.value


def test_a_crashing_pod_is_restored_from_its_snapshot(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=10 * ROUND_ENV_STEPS)
    tournament = Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, _FlakyEvaluate({4}))
    result = tournament.run()
    assert result.crashes == 1
    assert result.env_steps >= 10 * ROUND_ENV_STEPS
    events = read_events(tmp_path)
    crash = next(i for i, e in enumerate(events) if e["kind"] == "pod_crashed")
    assert "injected failure on call 4" in events[crash]["data"]["error"]
    restart = events[crash + 1]
    assert (restart["kind"], restart["pod_id"], restart["data"]["origin"]) == ("pod_started", 0, "snapshot")


def test_a_pod_crashing_before_any_snapshot_is_replaced_by_a_new_one(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=4 * ROUND_ENV_STEPS)
    Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, _FlakyEvaluate({1})).run()
    events = read_events(tmp_path)
    replaced = next(e for e in events if e["kind"] == "pod_replaced")
    assert (replaced["pod_id"], replaced["data"]) == (0, {"reason": "crash", "by": 1})


def test_a_tournament_that_only_crashes_gives_up_with_a_clear_error(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, max_consecutive_crashes=3)
    tournament = Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, _FlakyEvaluate(None))
    with pytest.raises(TournamentError, match="4 pod rounds crashed in a row"):
        tournament.run()


def test_a_pod_whose_crash_ends_the_tournament_resumes_from_its_snapshot(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, max_consecutive_crashes=1)
    tournament = Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, _FlakyEvaluate({3, 4}))
    with pytest.raises(TournamentError, match="2 pod rounds crashed in a row"):
        tournament.run()
    resumed = Tournament.resume(tmp_path, make_agent, TINY_PPO, make_env, _FlakyEvaluate(set()))
    events: list[TournamentEvent] = []
    resumed.run(on_event=events.append)
    first = next(e for e in events if e.kind == "pod_started")
    assert (first.pod_id, first.data["origin"]) == (0, "snapshot")


def test_resume_refuses_another_base_agent_config(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=2 * ROUND_ENV_STEPS)
    Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, Validation())
    other = dataclasses.replace(TINY_PPO, learning_rate=1e-4)
    with pytest.raises(TournamentError, match="base_agent_config differs"):
        Tournament.resume(tmp_path, make_agent, other, make_env, Validation())
    Tournament.resume(tmp_path, make_agent, TINY_PPO, make_env, Validation())


def test_the_one_constructor_resumes_only_with_the_config_the_run_was_started_with(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=2 * ROUND_ENV_STEPS)
    Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, Validation()).close()
    bigger = dataclasses.replace(config, budget_env_steps=4 * ROUND_ENV_STEPS)
    with pytest.raises(TournamentError, match="tournament config differs"):
        Tournament(bigger, tmp_path, make_agent, TINY_PPO, make_env, Validation(), resume=True)
    with Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, Validation(), resume=True) as resumed:
        assert resumed.run().rounds == 2


def test_a_non_finite_score_counts_as_a_crash(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, max_consecutive_crashes=1)
    tournament = Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, _FlakyEvaluate(set(), math.nan))
    with pytest.raises(TournamentError, match="evaluate returned nan"):
        tournament.run()


class _BlockingEnvFactory:
    """The first env it builds blocks in ``step`` until ``release`` is set: a pod stuck mid-round."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.built = 0
        self.timed_out = False

    def __call__(self, seed: int) -> TargetMatchingEnv:
        env = make_env(seed)
        self.built += 1
        if self.built == 1:
            step = env.step

            def blocking_step(actions: torch.Tensor) -> Any:
                if not self.release.wait(BLOCK_TIMEOUT_S):
                    self.timed_out = True
                return step(actions)

            env.step = blocking_step  # type: ignore[method-assign]
        return env


def test_pods_never_wait_for_each_other_when_judged_in_completion_order(tmp_path: Path) -> None:
    envs = _BlockingEnvFactory()
    finished_by_other_pod: list[int] = []

    def on_event(event: TournamentEvent) -> None:
        if event.kind == "round_finished" and event.pod_id != 0:
            finished_by_other_pod.append(event.env_steps)
            if len(finished_by_other_pod) == 5:
                envs.release.set()

    config = tournament_config(
        pool_size=2, budget_env_steps=12 * ROUND_ENV_STEPS, lagging_rounds=100, judge_order="completion"
    )
    Tournament(config, tmp_path, make_agent, TINY_PPO, envs, Validation()).run(on_event)
    assert not envs.timed_out
    events = read_events(tmp_path)
    first_round_of_blocked_pod = next(
        i for i, e in enumerate(events) if e["kind"] == "round_finished" and e["pod_id"] == 0
    )
    others_before = [
        e for e in events[:first_round_of_blocked_pod] if e["kind"] == "round_finished" and e["pod_id"] != 0
    ]
    assert len(others_before) >= 5


def test_wall_time_budget_stops_the_run(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=None, budget_seconds=1.0)
    result = new_tournament(tmp_path, config).run()
    assert result.rounds >= 1
    assert result.seconds >= 1.0


def test_resume_continues_an_interrupted_run_to_the_same_budget(tmp_path: Path) -> None:
    config = tournament_config(pool_size=2)

    def interrupt(event: TournamentEvent) -> None:
        if event.kind == "round_finished" and event.env_steps >= 15 * ROUND_ENV_STEPS:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        new_tournament(tmp_path, config).run(on_event=interrupt)
    before = json.loads((tmp_path / "state.json").read_text())
    assert not before["finished"]
    assert before["pool"]
    events: list[TournamentEvent] = []
    with resume_tournament(tmp_path) as resumed:
        result = resumed.run(on_event=events.append)
    restarted = [e for e in events if e.kind == "pod_started" and e.data["origin"] == "snapshot"]
    assert {e.pod_id for e in restarted} >= {p["pod_id"] for p in before["pool"][:2]}
    assert config.budget_env_steps is not None
    assert config.budget_env_steps <= result.env_steps <= config.budget_env_steps + 2 * ROUND_ENV_STEPS
    assert resume_tournament(tmp_path).run().rounds == result.rounds


def test_a_used_run_dir_is_refused(tmp_path: Path) -> None:
    new_tournament(tmp_path, tournament_config())
    with pytest.raises(TournamentError, match=r"already holds a tournament; use Tournament\.resume"):
        new_tournament(tmp_path, tournament_config())


def test_resume_refuses_a_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"hello": "world"}')
    with pytest.raises(SnapshotError, match="foreign file"):
        resume_tournament(tmp_path)
    with pytest.raises(SnapshotError, match="does not exist"):
        resume_tournament(tmp_path / "nothing")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pool_size": 0}, "pool_size is 0"),
        ({"leaderboard_size": 0}, "leaderboard_size is 0"),
        ({"budget_env_steps": None, "budget_seconds": None}, "no budget"),
        ({"budget_env_steps": -5}, "budget_env_steps is -5"),
        ({"budget_seconds": math.inf}, "budget_seconds is inf"),
        ({"fresh_pod_prob": 1.5}, "fresh_pod_prob is 1.5"),
        ({"perturb_scale": -0.1}, "perturb_scale is -0.1"),
        ({"softmax_temperature": 0.0}, "softmax_temperature is 0.0"),
        ({"eval_every_rounds": 0}, "eval_every_rounds is 0"),
        ({"seed": -1}, "seed is -1"),
        ({"lagging_rounds": 0}, "lagging_rounds is 0"),
        ({"max_consecutive_crashes": 0}, "max_consecutive_crashes is 0"),
    ],
)
def test_bad_settings_are_refused(changes: dict[str, Any], message: str) -> None:
    base = dataclasses.asdict(tournament_config())
    with pytest.raises(TournamentError, match=message):
        TournamentConfig(**{**base, **changes})


def test_local_backend_refuses_bad_sizes() -> None:
    with pytest.raises(TournamentError, match="at least 1"):
        LocalBackend(0)
    with pytest.raises(TournamentError, match="torch_threads_per_slot is 0"):
        LocalBackend(1, torch_threads_per_slot=0)
    backend = LocalBackend(1)
    with pytest.raises(TournamentError, match="slots is -1"):
        backend.set_slots(-1)
    backend.shutdown()


def test_a_constructor_killed_before_its_state_was_written_leaves_a_reusable_folder(tmp_path: Path) -> None:
    config = tournament_config(budget_env_steps=2 * ROUND_ENV_STEPS)
    Leaderboard.create(tmp_path / "leaderboard", capacity=config.leaderboard_size)
    assert new_tournament(tmp_path, config).run().rounds >= 2


def test_a_folder_with_another_leaderboard_is_refused(tmp_path: Path) -> None:
    Leaderboard.create(tmp_path / "leaderboard", capacity=99)
    with pytest.raises(TournamentError, match="holds another leaderboard"):
        new_tournament(tmp_path, tournament_config())


def test_an_event_line_cut_by_a_kill_is_skipped_and_the_log_goes_on(tmp_path: Path) -> None:
    new_tournament(tmp_path, tournament_config(budget_env_steps=2 * ROUND_ENV_STEPS)).run()
    logged = read_events(tmp_path)
    with (tmp_path / "events.jsonl").open("a") as handle:
        handle.write('{"kind": "round_fin')
    resume_tournament(tmp_path).run()
    events = read_events(tmp_path)
    assert events[: len(logged)] == logged
    assert [e["kind"] for e in events[len(logged) :]] == ["tournament_finished"]


def test_resume_refuses_a_state_file_with_missing_fields(tmp_path: Path) -> None:
    new_tournament(tmp_path, tournament_config())
    state = json.loads((tmp_path / "state.json").read_text())
    del state["rng"]
    (tmp_path / "state.json").write_text(json.dumps(state))
    with pytest.raises(SnapshotError, match="malformed"):
        resume_tournament(tmp_path)


def test_numpy_scores_are_accepted(tmp_path: Path) -> None:
    validation = Validation()
    config = tournament_config(pool_size=1, budget_env_steps=2 * ROUND_ENV_STEPS)
    result = Tournament(
        config, tmp_path, make_agent, TINY_PPO, make_env, lambda policy: np.float32(validation(policy))
    ).run()
    assert result.crashes == 0


def test_run_can_be_called_again_after_a_pause_of_its_own_backend(tmp_path: Path) -> None:
    config = tournament_config(pool_size=1, budget_env_steps=6 * ROUND_ENV_STEPS)
    tournament = new_tournament(tmp_path, config)

    def pause(event: TournamentEvent) -> None:
        if event.kind == "round_finished" and event.env_steps >= 2 * ROUND_ENV_STEPS:
            assert isinstance(tournament.backend, LocalBackend)
            tournament.backend.set_slots(0)

    assert tournament.run(on_event=pause).env_steps < 6 * ROUND_ENV_STEPS
    assert tournament.run().env_steps >= 6 * ROUND_ENV_STEPS


def test_a_pod_round_is_eval_every_rounds_training_rounds_then_one_evaluation(tmp_path: Path) -> None:
    evaluate = _FlakyEvaluate(set())
    config = tournament_config(pool_size=1, eval_every_rounds=3, budget_env_steps=9 * ROUND_ENV_STEPS)
    result = Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, evaluate).run()
    assert (result.rounds, evaluate.calls, result.env_steps) == (3, 3, 9 * ROUND_ENV_STEPS)
    assert [e.policy_version for e in result.leaderboard.entries] == [9]


class _IdleAgent(PPOAgent):
    """A PPO agent whose rounds collect nothing: a tournament must not wait on it forever."""

    def train_round(self, env: TensorVectorEnv) -> RoundStats:
        return RoundStats(env_steps=0, seconds=0.0)


def test_an_agent_that_collects_no_env_steps_is_a_crash_not_an_endless_loop(tmp_path: Path) -> None:
    def idle_agent(config: Any, seed: int) -> _IdleAgent:
        return _IdleAgent(OBS_DIM, ACTION_DIM, 0.0, 1.0, config, "cpu", seed)

    config = tournament_config(pool_size=1, max_consecutive_crashes=2)
    tournament = Tournament(config, tmp_path, idle_agent, TINY_PPO, make_env, Validation())
    with pytest.raises(TournamentError, match="reported 0 env steps"):
        tournament.run()


def test_seconds_a_scorer_leaves_out_do_not_count_against_the_wall_budget(tmp_path: Path) -> None:
    """A benchmark's own measurements inside the scorer: with them left out, a wall budget that the
    first round alone spends lets the run go on to its env-step budget."""
    config = tournament_config(pool_size=1, budget_env_steps=6 * ROUND_ENV_STEPS, budget_seconds=1e-3)
    plain = new_tournament(tmp_path / "plain", config).run()
    assert plain.env_steps < 6 * ROUND_ENV_STEPS  # the wall budget stopped it

    validation = Validation()
    holder: list[Tournament] = []

    def scorer(policy: Policy) -> float:
        holder[0].exclude_seconds(1e6)
        return validation(policy)

    tournament = Tournament(config, tmp_path / "excluded", make_agent, TINY_PPO, make_env, scorer)
    holder.append(tournament)
    assert tournament.run().env_steps >= 6 * ROUND_ENV_STEPS
    with pytest.raises(TournamentError, match="exclude_seconds"):
        tournament.exclude_seconds(-1.0)


def test_a_judged_round_encodes_its_state_once_for_every_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pods/, the leaderboard and the archive keep the same bytes of a round's state: serialised and
    hashed once per judged round (a GPU run's states are tens of MB), not once per store."""
    from podracer import leaderboard

    encodings = 0
    encode = leaderboard.encode_snapshot

    def counted(payload: Any) -> Any:
        nonlocal encodings
        encodings += 1
        return encode(payload)

    monkeypatch.setattr(leaderboard, "encode_snapshot", counted)
    run_dir = tmp_path / "run"
    tournament = new_tournament(run_dir, tournament_config(pool_size=1, archive_size=64))  # keeps every round
    events: list[Any] = []
    tournament.run(on_event=events.append)
    rounds = sum(event.kind == "round_finished" for event in events)
    admitted = sum(event.kind == "entry_admitted" for event in events)
    assert admitted > 0, "nothing entered the leaderboard: the test proves nothing"
    assert encodings == rounds
    tournament.close()
    # A state kept by two stores is the same bytes in both (the digest in each name is the same).
    archive = tournament.archive
    assert archive is not None

    def digest(path: Path) -> str:
        return path.name.rsplit("-", 1)[1]

    kept = {(e.pod_id, e.policy_version): digest(e.snapshot) for e in tournament.leaderboard.entries}
    shared = [e for e in archive.entries if (e.pod_id, e.policy_version) in kept]
    assert shared, "no round both archived and on the leaderboard: the test proves nothing"
    for entry in shared:
        assert digest(entry.snapshot) == kept[(entry.pod_id, entry.policy_version)]


def test_a_resumed_run_logs_each_judged_round_once(tmp_path: Path) -> None:
    """A run stopped after a round's event but before its ``state.json`` redoes that round on resume:
    the log must then hold it once (the DSR counts ``round_finished`` events as trials)."""
    config = tournament_config(pool_size=1, budget_env_steps=8 * ROUND_ENV_STEPS)
    straight = new_tournament(tmp_path / "straight", config).run()
    straight_scores = [
        e["data"]["score"] for e in read_events(tmp_path / "straight") if e["kind"] == "round_finished"
    ]

    def interrupt(event: TournamentEvent) -> None:
        if event.kind == "round_finished" and event.env_steps >= 3 * ROUND_ENV_STEPS:
            raise KeyboardInterrupt  # its state.json is not written yet: the round is redone

    run_dir = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        new_tournament(run_dir, config).run(on_event=interrupt)
    assert json.loads((run_dir / "state.json").read_text())["rounds"] == 2
    with resume_tournament(run_dir) as resumed:
        result = resumed.run()
    events = read_events(run_dir)
    scores = [e["data"]["score"] for e in events if e["kind"] == "round_finished"]
    assert len(scores) == result.rounds == straight.rounds
    assert scores[:2] == straight_scores[:2]  # the rounds state.json counted stay in the log, once
    assert [e["kind"] for e in events].count("tournament_finished") == 1
    assert resume_tournament(run_dir).run().rounds == result.rounds  # a finished run's log stays whole
    assert read_events(run_dir)[: len(events)] == events


def test_a_full_disk_stops_the_run_and_the_folder_resumes_with_each_round_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``state.json``'s write fails (ENOSPC) after writes it follows went through (the round's
    snapshots, the leaderboard's index): the run stops with that error, and the folder resumes."""
    import errno

    import podracer.rundir

    real_write = podracer.rundir.atomic_write_json
    writes = 0

    def write(path: Path, record: Any, indent: int | None = 2) -> None:
        nonlocal writes
        writes += 1
        if writes == 8:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real_write(path, record, indent)

    monkeypatch.setattr(podracer.rundir, "atomic_write_json", write)
    config = tournament_config(pool_size=2, budget_env_steps=10 * ROUND_ENV_STEPS)
    with pytest.raises(OSError, match="No space left"):
        new_tournament(tmp_path, config).run()
    monkeypatch.setattr(podracer.rundir, "atomic_write_json", real_write)
    state = json.loads((tmp_path / "state.json").read_text())
    assert not state["finished"]
    Leaderboard.open(tmp_path / "leaderboard").verify()
    result = resume_tournament(tmp_path).run()
    events = read_events(tmp_path)
    assert sum(1 for e in events if e["kind"] == "round_finished") == result.rounds
    started = {e["pod_id"] for e in events if e["kind"] == "pod_started"}
    assert {entry.pod_id for entry in result.leaderboard.entries} <= started
    result.leaderboard.verify()


def test_a_resume_deletes_the_temp_files_of_interrupted_state_writes(tmp_path: Path) -> None:
    new_tournament(tmp_path, tournament_config(budget_env_steps=2 * ROUND_ENV_STEPS)).run()
    left = [tmp_path / ".state.json.k1ll3d.tmp", tmp_path / ".config.json.0bb2x.tmp"]
    for path in left:
        path.write_text('{"format": "podracer.tournament-st')  # a write a kill cut short
    (tmp_path / "notes.tmp").write_text("the user's")
    resume_tournament(tmp_path).close()
    assert not any(path.exists() for path in left)
    assert (tmp_path / "notes.tmp").read_text() == "the user's"
