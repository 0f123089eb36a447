"""The population backend: P pods in lockstep equal the same P pods trained one by one.

Real pieces only: :class:`podracer.ppo.PPOAgent` on the toy task (flat MLP, Beta policy, envs
joined by :class:`podracer.env_stack.ConcatEnvs`) and on a small cross-sectional layout; the
orchestrator with a :class:`podracer.PopulationBackend`, killed and resumed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from engine._tournament_kit import (
    DEVICE,
    TINY_PPO,
    make_agent,
    make_env,
    new_tournament,
    resume_tournament,
    tournament_config,
)
from podracer import PopulationBackend, TournamentError, TournamentEvent
from podracer.backends import LockstepBackend
from podracer.entity import EntityLayout
from podracer.env_stack import ConcatEnvs, stack_envs
from podracer.population import check_population, structure_key, train_population_round
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

ROUNDS = 6
PARAM_ATOL = 1e-5
"""Batched matmuls round differently from one matmul per pod; after several rounds of Adam steps the
parameters agree to float32 rounding, far below any learning step (``lr`` >= 1e-3 here)."""


def _configs(count: int, base: PPOConfig) -> list[PPOConfig]:
    """Per-pod hyper-parameters that differ in every per-pod field a tournament perturbs."""
    return [
        dataclasses.replace(
            base,
            learning_rate=base.learning_rate * (1.0 + 0.2 * index),
            gamma=0.9 + 0.02 * index,
            gae_lambda=0.95 - 0.05 * index,
            clip_coef=0.1 + 0.05 * index,
            value_coef=0.5 + 0.1 * index,
            entropy_coef=0.01 * (index % 2),
        )
        for index in range(count)
    ]


def _max_difference(first: PPOAgent, second: PPOAgent) -> float:
    pairs = zip(first.model.parameters(), second.model.parameters(), strict=True)
    return max(float((a - b).abs().max().detach()) for a, b in pairs)


def _train_both(
    make: list[PPOAgent], twins: list[PPOAgent], envs_alone: list, envs_pop: list, rounds: int
) -> None:
    for _ in range(rounds):
        for agent, env in zip(make, envs_alone, strict=True):
            agent.train_round(env)
        train_population_round(twins, envs_pop)


def test_a_population_equals_its_pods_trained_one_by_one() -> None:
    configs = _configs(3, TINY_PPO)
    alone = [make_agent(config, 10 + index) for index, config in enumerate(configs)]
    population = [make_agent(config, 10 + index) for index, config in enumerate(configs)]
    envs_alone = [make_env(index) for index in range(3)]
    envs_pop = [make_env(index) for index in range(3)]
    _train_both(alone, population, envs_alone, envs_pop, ROUNDS)
    for one, other in zip(alone, population, strict=True):
        assert _max_difference(one, other) < PARAM_ATOL
        assert one.env_steps == other.env_steps == ROUNDS * TINY_PPO.rollout_steps * envs_alone[0].num_envs
        assert one.policy_version == other.policy_version == ROUNDS
        torch.testing.assert_close(one.obs_stats.mean, other.obs_stats.mean, rtol=1e-6, atol=1e-9)
        state_one, state_other = one.optimizer.state_dict()["state"], other.optimizer.state_dict()["state"]
        assert [float(s["step"]) for s in state_one.values()] == [
            float(s["step"]) for s in state_other.values()
        ]
    # The same random draws in the same order: both generators stand at the same place.
    for one, other in zip(alone, population, strict=True):
        assert torch.equal(one.generator.get_state(), other.generator.get_state())


def test_the_equality_holds_after_an_exploit_copy_and_a_snapshot_restore() -> None:
    """Exploit/explore writes a leader's weights under new hyper-parameters; a resume loads a snapshot."""
    configs = _configs(2, TINY_PPO)
    alone = [make_agent(config, 20 + index) for index, config in enumerate(configs)]
    population = [make_agent(config, 20 + index) for index, config in enumerate(configs)]
    envs_alone, envs_pop = [make_env(0), make_env(1)], [make_env(0), make_env(1)]
    _train_both(alone, population, envs_alone, envs_pop, 2)
    # Exploit: pod 1 becomes a child of pod 0 with a perturbed learning rate and a fresh env.
    child_config = dataclasses.replace(configs[1], learning_rate=configs[1].learning_rate * 1.5)
    alone[1] = _child_of(alone[0], child_config, seed=99)
    population[1] = _child_of(population[0], child_config, seed=99)
    envs_alone[1], envs_pop[1] = make_env(2), make_env(2)
    _train_both(alone, population, envs_alone, envs_pop, 2)
    # Kill and resume: pod 0 restarts from its snapshot (a fresh agent and env).
    alone[0] = PPOAgent.from_state_dict(alone[0].state_dict(), DEVICE)
    population[0] = PPOAgent.from_state_dict(population[0].state_dict(), DEVICE)
    envs_alone[0], envs_pop[0] = make_env(3), make_env(3)
    _train_both(alone, population, envs_alone, envs_pop, 2)
    for one, other in zip(alone, population, strict=True):
        assert _max_difference(one, other) < PARAM_ATOL


def _child_of(parent: PPOAgent, config: PPOConfig, seed: int) -> PPOAgent:
    child = make_agent(config, seed)
    child.load_weights_from(parent.state_dict(), keep_optimizer=True)
    return child


def test_cross_sectional_pods_with_a_target_kl_stop_alone_as_they_would_one_by_one() -> None:
    layout = EntityLayout(num_entities=3, entity_features=2, entity_extras=1, num_globals=1, action_globals=1)
    base = PPOConfig(
        policy="cross_sectional",
        rollout_steps=8,
        learning_rate=1e-2,
        update_epochs=4,
        num_minibatches=2,
        hidden_sizes=(8,),
        target_kl=0.002,
    )
    configs = [base, dataclasses.replace(base, target_kl=None, learning_rate=3e-3)]

    def agent(config: PPOConfig, seed: int) -> PPOAgent:
        return PPOAgent(layout.obs_dim, layout.action_dim, 0.0, 1.0, config, DEVICE, seed, layout=layout)

    def env() -> TargetMatchingEnv:
        return TargetMatchingEnv(8, layout.obs_dim, layout.action_dim, 5, 0.0, 1.0, 3, DEVICE)

    alone = [agent(config, index) for index, config in enumerate(configs)]
    population = [agent(config, index) for index, config in enumerate(configs)]
    envs_alone, envs_pop = [env(), env()], [env(), env()]
    epochs_alone, epochs_pop = [], []
    for _ in range(4):
        epochs_alone.append(
            [a.train_round(e).metrics["epochs_run"] for a, e in zip(alone, envs_alone, strict=True)]
        )
        epochs_pop.append([s.metrics["epochs_run"] for s in train_population_round(population, envs_pop)])
    assert epochs_pop == epochs_alone
    assert any(row[0] < base.update_epochs for row in epochs_pop), (
        "the KL stop never fired: the test proves nothing"
    )
    for one, other in zip(alone, population, strict=True):
        assert _max_difference(one, other) < PARAM_ATOL


def test_agents_of_different_structure_are_refused_with_the_fields_that_must_match() -> None:
    small = make_agent(TINY_PPO, 0)
    wide = make_agent(dataclasses.replace(TINY_PPO, hidden_sizes=(32,)), 1)
    assert structure_key(small) != structure_key(wide)
    with pytest.raises(TournamentError, match="hidden_sizes"):
        check_population([small, wide])
    with pytest.raises(TournamentError, match="2 agents but 1 envs"):
        train_population_round([small, make_agent(TINY_PPO, 2)], [make_env(0)])


def test_envs_that_cannot_stack_natively_are_joined_and_stepped_in_turn() -> None:
    members = [make_env(0), make_env(1)]
    stack = stack_envs(members)
    assert not stack.native
    assert isinstance(stack.env, ConcatEnvs)
    assert stack.env.num_envs == sum(member.num_envs for member in members)


def _leaderboard_rows(run_dir: Path) -> list[tuple[int, float, int]]:
    index = json.loads((run_dir / "leaderboard" / "index.json").read_text())
    return [(entry["pod_id"], round(entry["score"], 5), entry["env_steps"]) for entry in index["entries"]]


def test_a_tournament_on_the_population_backend_is_reproducible_and_resumes(tmp_path: Path) -> None:
    config = tournament_config(pool_size=3, budget_env_steps=24 * 128)
    backend = PopulationBackend(3, torch_threads=1, workers=1)
    assert isinstance(backend, LockstepBackend)
    with new_tournament(tmp_path / "a", config, backend) as tournament:
        result = tournament.run()
    assert result.rounds >= 20
    assert result.leaderboard.entries
    # The same run with its pods split over two worker threads (two sub-populations): the same board.
    with new_tournament(
        tmp_path / "b", config, PopulationBackend(3, torch_threads=1, workers=2)
    ) as tournament:
        tournament.run()
    assert _leaderboard_rows(tmp_path / "a") == _leaderboard_rows(tmp_path / "b")

    # Stopped half-way (the pool drained to 0 slots, as when a run is interrupted), then resumed.
    stopping = PopulationBackend(3, torch_threads=1)

    def drain_after_ten_rounds(event: TournamentEvent) -> None:
        if event.kind == "round_finished" and event.data["policy_version"] >= 4:
            stopping.set_slots(0)

    with new_tournament(tmp_path / "c", config, stopping) as tournament:
        stopped = tournament.run(on_event=drain_after_ten_rounds)
    assert stopped.env_steps < config.budget_env_steps
    with resume_tournament(tmp_path / "c", PopulationBackend(3, torch_threads=1)) as tournament:
        resumed = tournament.run()
    assert resumed.env_steps >= config.budget_env_steps - 3 * 128
    assert len(resumed.leaderboard.entries) == config.leaderboard_size


def test_a_child_never_shares_adam_moments_with_a_live_donor() -> None:
    """Found by the population test: torch's optimizer load keeps same-device tensors, so a child made
    from a live agent's state_dict stepped its parent's moments too."""
    parent = make_agent(TINY_PPO, 0)
    parent.train_round(make_env(0))
    child = _child_of(parent, TINY_PPO, seed=1)
    theirs = [s["exp_avg"] for s in parent.optimizer.state_dict()["state"].values()]
    ours = [s["exp_avg"] for s in child.optimizer.state_dict()["state"].values()]
    assert all(a.data_ptr() != b.data_ptr() for a, b in zip(theirs, ours, strict=True))
    before = [t.clone() for t in theirs]
    child.train_round(make_env(1))
    assert all(torch.equal(a, b) for a, b in zip(theirs, before, strict=True))


def test_pods_with_and_without_the_h_term_train_together_as_they_would_alone() -> None:
    configs = [dataclasses.replace(TINY_PPO, h_term_coef=0.125, h_term_trajectories=8), TINY_PPO]
    alone = [make_agent(config, 30 + index) for index, config in enumerate(configs)]
    population = [make_agent(config, 30 + index) for index, config in enumerate(configs)]
    envs_alone, envs_pop = [make_env(0), make_env(1)], [make_env(0), make_env(1)]
    for _ in range(3):
        own = [agent.train_round(env).metrics for agent, env in zip(alone, envs_alone, strict=True)]
        together = [stats.metrics for stats in train_population_round(population, envs_pop)]
    assert "h_term_loss" in together[0]
    assert "h_term_loss" not in together[1]
    assert together[0]["h_term_loss"] == pytest.approx(own[0]["h_term_loss"], rel=1e-4, abs=1e-9)
    for one, other in zip(alone, population, strict=True):
        assert _max_difference(one, other) < PARAM_ATOL
