"""Frozen flat-MLP policies, and several of them in one stacked pass, equal to each alone bit for bit."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from podracer.api import deterministic_policy
from podracer.frozen import FrozenActorPolicy, StackedActors
from podracer.ppo import PPOAgent, PPOConfig

from .test_ppo import SMALL

OBS_DIM, ACTION_DIM = 6, 4


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _agent(
    seed: int,
    *,
    normalize: bool = True,
    low: float = 0.0,
    high: float = 1.0,
    hidden: tuple[int, ...] = (32, 32),
    activation: str = "relu",
    action_dim: int = ACTION_DIM,
) -> PPOAgent:
    config: PPOConfig = dataclasses.replace(
        SMALL, hidden_sizes=hidden, activation=activation, normalize_observations=normalize
    )
    agent = PPOAgent(OBS_DIM, action_dim, low, high, config, device="cpu", seed=seed)
    stats = torch.Generator().manual_seed(100 + seed)
    mean = torch.randn(OBS_DIM, generator=stats).double()
    second_moment = mean**2 + torch.rand(OBS_DIM, generator=stats).double() + 0.1
    agent.obs_stats.merge(mean, second_moment, torch.tensor(50.0).double())
    return agent


def _policy(agent: PPOAgent) -> FrozenActorPolicy:
    policy = deterministic_policy(agent)
    assert isinstance(policy, FrozenActorPolicy)
    return policy


def test_the_flat_policy_is_frozen_data_equal_to_act() -> None:
    agent = _agent(0)
    policy = _policy(agent)
    obs = 3.0 * torch.randn(5, OBS_DIM, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(policy(obs), agent.act(obs), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        next(agent.model.parameters()).add_(1.0)
    assert not torch.equal(_policy(agent)(obs), policy(obs))  # a snapshot: later changes do not reach it


ARCHITECTURES = [
    ((32, 32), "relu", ACTION_DIM),  # exact activation: any width
    ((64, 128), "tanh", 5),  # transcendental activation on lane-sized rows
    ((64,), "elu", 40),  # a head wider than one lane chunk (2A = 80)
]


@pytest.mark.parametrize(("hidden", "activation", "action_dim"), ARCHITECTURES)
def test_a_stacked_pass_equals_each_policy_alone_bit_for_bit(
    hidden: tuple[int, ...], activation: str, action_dim: int
) -> None:
    shape = {"hidden": hidden, "activation": activation, "action_dim": action_dim}
    policies = [
        _policy(_agent(0, **shape)),
        _policy(_agent(1, normalize=False, **shape)),  # no normalisation: shift 0, scale 1, no clip
        _policy(_agent(2, low=-1.0, high=2.0, **shape)),  # another action range
        _policy(_agent(0, **shape)),  # the same network twice
        _policy(_agent(3, **shape)),
    ]
    stacked = StackedActors(policies)
    generator = torch.Generator().manual_seed(2)
    for draw in range(100):  # bit differences are rare per row: many rows
        obs = 4.0 * torch.randn(len(policies), OBS_DIM, generator=generator)
        obs[0, 0] = 1e6  # clipped
        together = stacked(obs)
        assert together.shape == (len(policies), action_dim)
        for index, policy in enumerate(policies):
            assert torch.equal(together[index : index + 1], policy(obs[index : index + 1])), (draw, index)
        assert not torch.equal(together[0], together[3])  # its own row each


def test_a_stacked_pass_gives_the_same_numbers_at_any_thread_count() -> None:
    policies = [_policy(_agent(seed)) for seed in range(3)]
    stacked = StackedActors(policies)
    obs = torch.randn(3, OBS_DIM, generator=torch.Generator().manual_seed(3))
    one = stacked(obs)
    torch.set_num_threads(2)
    assert torch.equal(stacked(obs), one)


def test_policies_of_other_architectures_do_not_stack() -> None:
    small = _policy(_agent(0))
    config = dataclasses.replace(SMALL, hidden_sizes=(16, 32), activation="relu")
    other = _policy(PPOAgent(OBS_DIM, ACTION_DIM, 0.0, 1.0, config, device="cpu", seed=0))
    assert StackedActors.compatible([small, small])
    assert not StackedActors.compatible([small, other])
    assert not StackedActors.compatible([small, lambda obs: obs])
    narrow_tanh = _policy(_agent(0, hidden=(32, 32), activation="tanh"))  # rows off the lane chunks
    assert not StackedActors.compatible([narrow_tanh, narrow_tanh])
    assert not StackedActors.compatible([])
    with pytest.raises(ValueError, match="one architecture"):
        StackedActors([small, other])
