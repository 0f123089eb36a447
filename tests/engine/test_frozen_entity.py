"""The frozen cross-sectional policy equals the live network's mode, at any batch and layout."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from podracer.api import deterministic_policy
from podracer.entity import EntityLayout
from podracer.frozen import RowWisePolicy
from podracer.frozen_entity import FrozenCrossSectionalPolicy
from podracer.ppo import PPOAgent, PPOConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BASE = PPOConfig(policy="cross_sectional", rollout_steps=8, num_minibatches=2, hidden_sizes=(16, 16))


def _agent(layout: EntityLayout, config: PPOConfig, low: float, high: float, seed: int) -> PPOAgent:
    agent = PPOAgent(layout.obs_dim, layout.action_dim, low, high, config, "cpu", seed, layout=layout)
    stats = torch.Generator().manual_seed(100 + seed)
    mean = torch.randn(layout.obs_dim, generator=stats).double()
    second_moment = mean**2 + torch.rand(layout.obs_dim, generator=stats).double() + 0.1
    agent.obs_stats.merge(mean, second_moment, torch.tensor(50.0).double())
    with torch.no_grad():  # trained-looking weights: the heads' small initial gains would hide errors
        for param in agent.model.parameters():
            param.add_(0.3 * torch.randn(param.shape, generator=stats))
    return agent


def _live_actions(agent: PPOAgent, obs: torch.Tensor) -> torch.Tensor:
    """The live network's mode, through the agent's own (unfrozen) deterministic ``act``."""
    return agent.act(obs, deterministic=True)


@pytest.mark.parametrize(
    ("layout", "config", "box"),
    [
        (  # finpod's shape: a cash score first, one extra (the current weight), two globals
            EntityLayout(num_entities=7, entity_features=3, entity_extras=1, num_globals=2, action_globals=1),
            BASE,
            (0.0, 1.0),
        ),
        (  # no global score, two extras, a third encoder layer, tanh, another action box
            EntityLayout(num_entities=5, entity_features=2, entity_extras=2, num_globals=1, action_globals=0),
            dataclasses.replace(BASE, hidden_sizes=(12, 10, 8), activation="tanh"),
            (-1.0, 1.0),
        ),
        (  # two global scores, elu, no normalisation
            EntityLayout(num_entities=4, entity_features=3, entity_extras=1, num_globals=3, action_globals=2),
            dataclasses.replace(BASE, activation="elu", normalize_observations=False),
            (0.0, 1.0),
        ),
    ],
)
@pytest.mark.parametrize("rows", [1, 9])
def test_the_frozen_policy_equals_the_live_mode(
    layout: EntityLayout, config: PPOConfig, box: tuple[float, float], rows: int
) -> None:
    agent = _agent(layout, config, *box, seed=3)
    policy = deterministic_policy(agent)
    assert isinstance(policy, RowWisePolicy)
    assert isinstance(policy.act, FrozenCrossSectionalPolicy)
    obs = 2.0 * torch.randn(rows, layout.obs_dim, generator=torch.Generator().manual_seed(rows))
    frozen = policy(obs)
    assert frozen.shape == (rows, layout.action_dim)
    torch.testing.assert_close(frozen, _live_actions(agent, obs), rtol=1e-5, atol=1e-6)
    # One row alone gives that row's action in a batch (to float32 rounding of batched products).
    torch.testing.assert_close(policy(obs[-1:]), frozen[-1:], rtol=1e-5, atol=1e-6)


def test_the_frozen_policy_is_a_snapshot() -> None:
    layout = EntityLayout(num_entities=6, entity_features=2, entity_extras=1, num_globals=2, action_globals=1)
    agent = _agent(layout, BASE, 0.0, 1.0, seed=5)
    obs = torch.randn(3, layout.obs_dim, generator=torch.Generator().manual_seed(0))
    policy = deterministic_policy(agent)
    before = policy(obs).clone()
    with torch.no_grad():
        for param in agent.model.parameters():
            param.mul_(-2.0)
    agent.obs_stats.merge(
        torch.ones(layout.obs_dim, dtype=torch.float64),
        torch.full((layout.obs_dim,), 4.0, dtype=torch.float64),
        torch.tensor(500.0).double(),
    )
    assert torch.equal(policy(obs), before)
    assert not torch.allclose(_live_actions(agent, obs), before)
