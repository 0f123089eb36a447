"""Observation noise in training (``PPOConfig.obs_noise``): on the entity features only, kept in the
rollout, off in the deterministic policy, and the same in a population as in a pod alone."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from podracer.entity import EntityLayout
from podracer.normalization import add_feature_noise
from podracer.population import train_population_round
from podracer.ppo import PPOAgent, PPOConfig
from podracer.ppo_config import AgentError
from podracer.toy import TargetMatchingEnv

LAYOUT = EntityLayout(num_entities=3, entity_features=2, entity_extras=1, num_globals=1, action_globals=1)
BASE = PPOConfig(
    policy="cross_sectional",
    rollout_steps=8,
    learning_rate=1e-2,
    update_epochs=2,
    num_minibatches=2,
    hidden_sizes=(8,),
)


def _agent(config: PPOConfig, seed: int = 0) -> PPOAgent:
    return PPOAgent(LAYOUT.obs_dim, LAYOUT.action_dim, 0.0, 1.0, config, "cpu", seed, layout=LAYOUT)


def _env() -> TargetMatchingEnv:
    return TargetMatchingEnv(8, LAYOUT.obs_dim, LAYOUT.action_dim, 5, 0.0, 1.0, 3, "cpu")


def test_noise_lands_on_the_entity_features_of_the_collected_rows_only() -> None:
    quiet, noisy = _agent(BASE), _agent(dataclasses.replace(BASE, obs_noise=0.5))
    quiet_rows, _ = quiet.collect(_env())
    noisy_rows, _ = noisy.collect(_env())
    features = LAYOUT.feature_columns
    assert features == 6
    # the first step sees the same reset and statistics: only the noise tells the rows apart
    difference = noisy_rows.obs[0] - quiet_rows.obs[0]
    assert float(difference[:, :features].abs().min()) > 0.0
    assert torch.equal(difference[:, features:], torch.zeros_like(difference[:, features:]))
    assert 0.3 < float(difference[:, :features].std()) < 0.7


def test_no_noise_draws_nothing_and_keeps_the_round_bit_identical() -> None:
    first, second = _agent(BASE), _agent(dataclasses.replace(BASE, obs_noise=0.0))
    first.train_round(_env())
    second.train_round(_env())
    assert torch.equal(first.generator.get_state(), second.generator.get_state())
    for a, b in zip(first.model.parameters(), second.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_policy_a_validation_pass_uses_sees_no_noise() -> None:
    agent = _agent(dataclasses.replace(BASE, obs_noise=1.0))
    agent.train_round(_env())
    obs = torch.randn(4, LAYOUT.obs_dim)
    assert torch.equal(agent.act(obs), agent.act(obs))


def test_a_population_with_noise_equals_its_pods_trained_alone() -> None:
    configs = [dataclasses.replace(BASE, obs_noise=0.3), dataclasses.replace(BASE, learning_rate=3e-3)]
    alone = [_agent(config, index) for index, config in enumerate(configs)]
    population = [_agent(config, index) for index, config in enumerate(configs)]
    envs_alone, envs_pop = [_env(), _env()], [_env(), _env()]
    for _ in range(3):
        for agent, env in zip(alone, envs_alone, strict=True):
            agent.train_round(env)
        train_population_round(population, envs_pop)
    for one, other in zip(alone, population, strict=True):
        assert torch.equal(one.generator.get_state(), other.generator.get_state())
        for a, b in zip(one.model.parameters(), other.model.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=0.0, atol=1e-5)


def test_a_negative_noise_is_refused_with_the_field_named() -> None:
    with pytest.raises(AgentError, match="obs_noise"):
        PPOConfig(obs_noise=-0.1)


def test_add_feature_noise_returns_a_new_tensor_and_leaves_the_input_alone() -> None:
    rows = torch.zeros(5, 4)
    noisy = add_feature_noise(rows, 1.0, 2, torch.Generator().manual_seed(0))
    assert torch.equal(rows, torch.zeros(5, 4))
    assert torch.equal(noisy[:, 2:], torch.zeros(5, 2))
    assert add_feature_noise(rows, 0.0, 2, torch.Generator()) is rows
