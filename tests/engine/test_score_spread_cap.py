"""``PPOConfig.score_spread_cap``: a cap on how far a row's entity scores spread across entities."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from engine._choice_kit import CHOICE_PPO, LAYOUT, assert_population_equals_pods_one_by_one, choice_agent
from podracer.api import deterministic_policy
from podracer.entity import capped_scores
from podracer.frozen import RowWisePolicy
from podracer.ppo import PPOAgent, PPOConfig
from podracer.ppo_config import AgentError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CAPPED_PPO = dataclasses.replace(CHOICE_PPO, score_spread_cap=0.5)


def _spread(scores: torch.Tensor) -> torch.Tensor:
    return (scores - scores.mean(dim=-1, keepdim=True)).square().mean(dim=-1).sqrt()


def _trained_looking(config: PPOConfig, seed: int = 3) -> PPOAgent:
    agent = choice_agent(config, seed)
    with torch.no_grad():  # the heads' small initial gains would leave every row below the cap
        for param in agent.model.parameters():
            param.add_(0.3 * torch.randn(param.shape, generator=torch.Generator().manual_seed(seed)))
    return agent


def test_rows_above_the_cap_shrink_to_it_around_their_mean_and_rows_below_pass_unchanged() -> None:
    scores = torch.randn(6, 9, generator=torch.Generator().manual_seed(0))
    scores[:3] *= 3.0  # spread about 3: above a cap of 1
    scores[3:] *= 0.2  # spread about 0.2: below it
    capped = capped_scores(scores, 1.0)
    torch.testing.assert_close(_spread(capped[:3]), torch.ones(3), atol=1e-5, rtol=0)
    torch.testing.assert_close(capped[:3].mean(dim=1), scores[:3].mean(dim=1), atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.argsort(capped[:3]), torch.argsort(scores[:3]), atol=0, rtol=0)
    assert torch.equal(capped[3:], scores[3:])
    assert capped_scores(scores, 0.0) is scores


def test_a_softmax_of_gaussian_scores_at_the_cap_holds_about_m_exp_minus_c_squared_entities() -> None:
    """The docstring's rule of thumb for how concentrated a cap lets the mode get."""
    m, cap = 2000, 1.2
    scores = capped_scores(3.0 * torch.randn(64, m, generator=torch.Generator().manual_seed(1)), cap)
    weights = torch.softmax(scores.double(), dim=1)
    effective = (1.0 / weights.square().sum(dim=1)).mean()
    assert float(effective) == pytest.approx(m * math.exp(-(cap**2)), rel=0.1)


def test_the_actor_caps_its_entity_scores_and_leaves_the_global_one() -> None:
    obs = torch.randn(9, LAYOUT.obs_dim, generator=torch.Generator().manual_seed(0))
    cap = 0.1
    with torch.no_grad():
        capped = (
            _trained_looking(dataclasses.replace(CHOICE_PPO, score_spread_cap=cap))
            .model.distribution(obs)
            .loc
        )
        free = _trained_looking(CHOICE_PPO).model.distribution(obs).loc
    k = LAYOUT.action_globals
    assert float(_spread(free[:, k:]).min()) > cap  # the same weights spread further without the cap
    torch.testing.assert_close(_spread(capped[:, k:]), torch.full((9,), cap), atol=1e-5, rtol=0)
    torch.testing.assert_close(capped[:, :k], free[:, :k], atol=0, rtol=0)


def test_the_frozen_policy_caps_the_scores_too() -> None:
    agent = _trained_looking(CAPPED_PPO)
    policy = deterministic_policy(agent)
    assert isinstance(policy, RowWisePolicy)
    obs = 2.0 * torch.randn(7, LAYOUT.obs_dim, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(policy(obs), agent.act(obs, deterministic=True), rtol=1e-5, atol=1e-6)


def test_a_population_with_a_cap_equals_its_pods_trained_one_by_one() -> None:
    configs = [CAPPED_PPO, dataclasses.replace(CAPPED_PPO, learning_rate=1e-3), CHOICE_PPO]
    assert_population_equals_pods_one_by_one(configs)


def test_a_cap_needs_the_cross_sectional_policy_and_is_not_negative() -> None:
    with pytest.raises(AgentError, match="score_spread_cap > 0 needs policy 'cross_sectional'"):
        PPOConfig(score_spread_cap=1.0)
    with pytest.raises(AgentError, match=r"score_spread_cap must be in >= 0.0"):
        dataclasses.replace(CHOICE_PPO, score_spread_cap=-1.0)
