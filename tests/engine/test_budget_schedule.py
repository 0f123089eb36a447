"""``lr_schedule = "budget"``: each round's learning rate decays as the tournament's budget is spent,
on every backend (the share spent travels with the round to a worker process or a population)."""

from __future__ import annotations

import dataclasses
import itertools
import sys
from pathlib import Path

import pytest

from engine._tournament_kit import (
    ROUND_ENV_STEPS,
    TINY_PPO,
    Validation,
    make_agent,
    make_env,
    tournament_config,
)
from podracer import LocalBackend, PopulationBackend, Tournament, TournamentError, TournamentEvent
from podracer.backends import ProcessBackend
from podracer.backends.base import Backend
from podracer.fusion.agent import FusedAgent
from podracer.ppo import PPOAgent, PPOConfig, learning_rate_at
from podracer.protocols import follow_budget
from podracer.schedule import schedule_fraction

BUDGET_PPO = dataclasses.replace(TINY_PPO, lr_schedule="budget")
ROUNDS = 24


def test_the_rate_falls_linearly_to_zero_as_the_budget_is_spent() -> None:
    assert learning_rate_at(BUDGET_PPO, 10_000, 0.0) == BUDGET_PPO.learning_rate
    assert learning_rate_at(BUDGET_PPO, 0, 0.25) == pytest.approx(0.75 * BUDGET_PPO.learning_rate)
    assert learning_rate_at(BUDGET_PPO, 0, 1.0) == 0.0
    assert learning_rate_at(TINY_PPO, 0, 0.9) == TINY_PPO.learning_rate  # constant ignores it
    agent = make_agent(BUDGET_PPO, 0)
    follow_budget(agent, 1.7)  # a budget overrun is all of it
    assert agent.budget_spent == 1.0
    follow_budget(object(), 0.5)  # an agent that does not follow it is left alone


def test_an_unknown_schedule_is_refused_naming_the_three() -> None:
    with pytest.raises(Exception, match="'constant', 'linear' or 'budget', got 'cosine'"):
        PPOConfig(lr_schedule="cosine")  # type: ignore[arg-type]


def _run(tmp_path: Path, backend: Backend) -> list[tuple[int, int, float, float]]:
    """``(pod, env steps, score, learning rate / the pod's configured rate)`` of every judged round."""
    config = tournament_config(budget_env_steps=ROUNDS * ROUND_ENV_STEPS, fresh_pod_prob=0.0)
    rows: list[tuple[int, int, float, float]] = []
    with Tournament(config, tmp_path, make_agent, BUDGET_PPO, make_env, Validation(), backend) as tournament:

        def record(event: TournamentEvent) -> None:
            if event.kind == "round_finished":
                agent = tournament.agent_of(event.pod_id)
                assert isinstance(agent, PPOAgent)
                ratio = event.data["metrics"]["learning_rate"] / agent.config.learning_rate
                rows.append((event.pod_id, event.env_steps, event.data["score"], ratio))

        tournament.run(on_event=record)
    return rows


def _check_decay(rows: list[tuple[int, int, float, float]]) -> None:
    ratios = [ratio for *_, ratio in rows]
    assert ratios[0] == pytest.approx(1.0)  # nothing was spent when the first round started (float32)
    assert all(0.0 <= r <= 1.0 + 1e-6 for r in ratios)
    assert max(ratios[-2:]) <= 3.0 / ROUNDS + 1e-6  # the last two rounds start with 2-3 rounds of budget left
    assert all(later <= earlier + 1e-6 for earlier, later in itertools.pairwise(ratios))


def test_threads_and_worker_processes_decay_alike(tmp_path: Path) -> None:
    threads = _run(tmp_path / "threads", LocalBackend(2, torch_threads_per_slot=1))
    _check_decay(threads)
    if sys.platform.startswith("linux"):
        backend = ProcessBackend(2)
        try:
            processes = _run(tmp_path / "processes", backend)
        finally:
            backend.shutdown()
        assert processes == threads


def test_a_population_decays_too(tmp_path: Path) -> None:
    _check_decay(_run(tmp_path, PopulationBackend(2, torch_threads=1, workers=1)))


def test_learner_fusion_refuses_the_budget_schedule() -> None:
    with pytest.raises(TournamentError, match="lr_schedule 'budget' cannot decay there"):
        FusedAgent(make_agent, make_env, BUDGET_PPO, 0, learners=2)


def test_a_resumed_run_decays_from_where_it_stopped(tmp_path: Path) -> None:
    """Stopped half-way (the pool drained, as when a run is interrupted), then resumed: the resumed
    rounds start where the budget stood, not at the full rate again."""
    stopping = LocalBackend(2, torch_threads_per_slot=1)
    ratios: list[float] = []
    config = tournament_config(budget_env_steps=ROUNDS * ROUND_ENV_STEPS, fresh_pod_prob=0.0)
    with Tournament(config, tmp_path, make_agent, BUDGET_PPO, make_env, Validation(), stopping) as first:

        def drain_at_half(event: TournamentEvent) -> None:
            if event.kind == "round_finished":
                agent = first.agent_of(event.pod_id)
                ratios.append(event.data["metrics"]["learning_rate"] / agent.config.learning_rate)
                if len(ratios) == ROUNDS // 2:
                    stopping.set_slots(0)

        stopped = first.run(on_event=drain_at_half)
    assert stopped.env_steps < config.budget_env_steps
    resumed_ratios: list[float] = []
    with Tournament.resume(tmp_path, make_agent, BUDGET_PPO, make_env, Validation()) as second:

        def record(event: TournamentEvent) -> None:
            if event.kind == "round_finished":
                agent = second.agent_of(event.pod_id)
                resumed_ratios.append(event.data["metrics"]["learning_rate"] / agent.config.learning_rate)

        second.run(on_event=record)
    assert resumed_ratios
    assert max(resumed_ratios) <= min(ratios) + 1e-6


def test_the_rate_follows_the_env_step_budget_whenever_one_is_set() -> None:
    """The wall clock runs ahead of the env steps in every first round; a rate that followed it would
    make a run that states an env-step budget differ in its last bits from one run to the next."""
    both = tournament_config(budget_env_steps=1000, budget_seconds=60.0)
    assert schedule_fraction(both, env_steps=0, seconds=30.0) == 0.0
    assert schedule_fraction(both, env_steps=250, seconds=59.0) == 0.25
    wall_only = tournament_config(budget_env_steps=None, budget_seconds=60.0)
    assert schedule_fraction(wall_only, env_steps=10**9, seconds=15.0) == 0.25
    assert schedule_fraction(wall_only, env_steps=0, seconds=90.0) == 1.0
