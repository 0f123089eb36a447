"""The evaluation average (``PPOConfig.eval_average``): an EMA of the weights that every evaluation uses.

Real pieces only: :class:`podracer.ppo.PPOAgent` on the toy task, its snapshots, and a population
round (:func:`podracer.population.train_population_round`).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine._tournament_kit import OBS_DIM, TINY_PPO, make_agent, make_env
from podracer.population import train_population_round
from podracer.ppo import PPOAgent, PPOConfig
from podracer.ppo_config import AgentError
from podracer.protocols import deterministic_policy
from podracer.stacked import PopulationPolicy

DECAY = 0.5
AVERAGED = dataclasses.replace(TINY_PPO, eval_average=DECAY)


def _params(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _obs(rows: int = 5) -> torch.Tensor:
    return torch.randn(rows, OBS_DIM, generator=torch.Generator().manual_seed(3))


def test_the_average_is_the_ema_of_the_weights_after_each_round() -> None:
    agent, env = make_agent(AVERAGED, 1), make_env(0)
    assert agent.evaluation_model is agent.model  # nothing averaged before a round is learned
    agent.train_round(env)
    first = _params(agent.model)
    for averaged, now in zip(agent.evaluation_model.parameters(), first, strict=True):
        assert torch.equal(averaged, now)  # the first update copies the weights
    agent.train_round(env)
    second = _params(agent.model)
    expected = [DECAY * a + (1.0 - DECAY) * b for a, b in zip(first, second, strict=True)]
    for averaged, want, now in zip(agent.evaluation_model.parameters(), expected, second, strict=True):
        torch.testing.assert_close(averaged, want, rtol=1e-6, atol=1e-7)
        assert not torch.equal(averaged, now)  # it is not the current weights
    assert all(not p.requires_grad for p in agent.evaluation_model.parameters())


def test_deterministic_actions_use_the_average_and_sampled_ones_the_current_weights() -> None:
    averaged, plain = make_agent(AVERAGED, 1), make_agent(TINY_PPO, 1)
    env_a, env_b = make_env(0), make_env(0)
    for _ in range(3):
        averaged.train_round(env_a)
        plain.train_round(env_b)
    obs = _obs()
    # Training is untouched by the average: both agents hold the same current weights.
    for a, b in zip(averaged.model.parameters(), plain.model.parameters(), strict=True):
        assert torch.equal(a, b)
    torch.testing.assert_close(deterministic_policy(averaged)(obs), averaged.act(obs), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(averaged.act(obs), plain.act(obs))
    seed_state = averaged.generator.get_state()
    sampled = averaged.act(obs, deterministic=False)
    plain.generator.set_state(seed_state)
    assert torch.equal(sampled, plain.act(obs, deterministic=False))


def test_a_snapshot_keeps_the_average_and_an_old_one_starts_it_over() -> None:
    agent, env = make_agent(AVERAGED, 1), make_env(0)
    for _ in range(3):
        agent.train_round(env)
    obs = _obs()
    state = agent.state_dict()
    assert "eval_average" in state
    restored = PPOAgent.from_state_dict(state)
    assert torch.equal(restored.act(obs), agent.act(obs))
    # Training on from the snapshot averages as the original does.
    agent.train_round(make_env(1))
    restored.train_round(make_env(1))
    torch.testing.assert_close(restored.act(obs), agent.act(obs), rtol=0, atol=0)
    # A snapshot taken without an average (eval_average was 0) gives a child the leader's weights,
    # and the average starts from the child's first learned round.
    leader = make_agent(TINY_PPO, 2)
    leader.train_round(make_env(0))
    assert "eval_average" not in leader.state_dict()
    child = make_agent(AVERAGED, 3)
    child.train_round(make_env(0))
    child.load_weights_from(leader.state_dict(), keep_optimizer=False)
    assert child.evaluation_model is child.model
    assert torch.equal(child.act(obs), leader.act(obs))


def test_a_population_averages_as_its_pods_do_one_by_one() -> None:
    configs = [AVERAGED, dataclasses.replace(AVERAGED, learning_rate=6e-3, eval_average=0.8)]
    alone = [make_agent(config, 10 + i) for i, config in enumerate(configs)]
    population = [make_agent(config, 10 + i) for i, config in enumerate(configs)]
    envs_alone, envs_pop = [make_env(0), make_env(1)], [make_env(0), make_env(1)]
    for _ in range(4):
        for agent, env in zip(alone, envs_alone, strict=True):
            agent.train_round(env)
        train_population_round(population, envs_pop)
    obs = _obs(4)
    for one, other in zip(alone, population, strict=True):
        torch.testing.assert_close(other.act(obs), one.act(obs), rtol=1e-5, atol=1e-5)
    # The population's batched scoring policy is the pods' averaged policies, a block of rows each.
    stacked = PopulationPolicy(population)(torch.cat([obs, obs]))
    torch.testing.assert_close(stacked[:4], population[0].act(obs), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(stacked[4:], population[1].act(obs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("decay", [-0.1, 1.0, 1.5, float("nan")])
def test_a_decay_outside_zero_to_one_is_refused(decay: float) -> None:
    with pytest.raises(AgentError, match=r"eval_average must be in \[0, 1\)"):
        PPOConfig(eval_average=decay)
