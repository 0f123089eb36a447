"""Per-entity advantages (``PPOConfig.advantages = "entity"``): the terms, the loss, learning, populations."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine._choice_kit import (
    CHOICE_PPO,
    ENTITIES,
    LAYOUT,
    assert_population_equals_pods_one_by_one,
    choice_agent,
    trained_alone,
)
from podracer.distributions import LogisticNormalDistribution
from podracer.entity_advantage import (
    ENTITY_COSTS,
    ENTITY_OUTCOMES,
    entity_policy_loss,
    entity_terms,
    with_future,
)
from podracer.ppo import PPOAgent, PPOConfig
from podracer.ppo_config import AgentError
from podracer.toy import TargetMatchingEnv


def _share_of_best(agent: PPOAgent) -> float:
    """Expected edge of the agent's deterministic weights as a share of always picking the best entity."""
    features = torch.randn(4096, ENTITIES, generator=torch.Generator().manual_seed(99))
    obs = torch.cat([features, torch.ones(4096, 1)], dim=1)
    weights = agent.act(obs, deterministic=True)
    weights = weights / weights.sum(dim=1, keepdim=True)
    return float((weights[:, 1:] * features).sum(dim=1).mean() / features.max(dim=1).values.mean())


def test_a_term_is_the_draws_deviation_from_the_mode_times_the_centred_outcome_less_the_cost() -> None:
    loc = torch.tensor([[0.0, 1.0, -1.0]])
    dist = LogisticNormalDistribution(loc, torch.zeros(3))
    raw = torch.tensor([[0.5, 0.2, -1.0]])
    outcomes, costs = torch.tensor([[2.0, -3.0]]), torch.tensor([[0.1, 0.0]])
    terms = entity_terms(dist, raw, {ENTITY_OUTCOMES: outcomes, ENTITY_COSTS: costs}, action_globals=1)
    mode = torch.softmax(loc, 1)[:, 1:]
    centred = outcomes - (mode * outcomes).sum(dim=1, keepdim=True)
    expected = (torch.softmax(raw, 1)[:, 1:] - mode) * centred - costs
    torch.testing.assert_close(terms, expected)
    no_cost = entity_terms(dist, raw, {ENTITY_OUTCOMES: outcomes}, action_globals=1)
    torch.testing.assert_close(no_cost, expected + costs)


@pytest.mark.parametrize("loc_spread", [0.5, 3.0])
def test_the_terms_score_function_gradient_is_the_softmax_s_own(loc_spread: float) -> None:
    """Per score, E[d log pi / d loc_i x term_i] is the own-draw part of the softmax's gradient,
    m_i (1 - m_i) (o_i - m . o): d E[sum_j u_j o_j] / d loc_i = m_i (o_i - m . o) less what the other
    scores' draws carry. Without the centring it would be m_i (1 - m_i) o_i, which pushes the
    scores of a portfolio that earns (m . o > 0) apart with their weights: ever more concentration."""
    generator = torch.Generator().manual_seed(0)
    loc = torch.randn(1, 7, generator=generator) * loc_spread
    loc[0, 0] = -3.0  # little cash: the portfolio's own outcome m . o matters
    outcomes = torch.randn(1, 6, generator=generator) + 1.0  # a market that mostly rises
    std, draws = 0.02, 200_000
    dist = LogisticNormalDistribution(loc.expand(draws, -1), torch.full((7,), std).log())
    raw = dist.sample(generator)
    terms = entity_terms(dist, raw, {ENTITY_OUTCOMES: outcomes.expand(draws, -1)}, action_globals=1)
    estimate = ((raw - loc)[:, 1:] / std**2 * terms).mean(dim=0)
    mode = torch.softmax(loc, 1)[0, 1:]
    exact = mode * (1.0 - mode) * (outcomes[0] - (mode * outcomes[0]).sum())
    scale = float((mode * outcomes[0].abs()).max())
    torch.testing.assert_close(estimate, exact, atol=0.03 * scale, rtol=0.0)
    uncentred = mode * (1.0 - mode) * outcomes[0]
    assert float((uncentred - exact).abs().max()) > 0.3 * scale  # the test can tell them apart


def test_an_env_without_outcomes_is_refused_with_the_fix() -> None:
    dist = LogisticNormalDistribution(torch.zeros(1, 3), torch.zeros(3))
    with pytest.raises(AgentError, match=r"entity_outcomes.*fix: use advantages = 'joint'"):
        entity_terms(dist, torch.zeros(1, 3), {"final_obs": torch.zeros(1, 3)}, action_globals=1)
    agent = choice_agent(CHOICE_PPO, 0)
    layout_env = TargetMatchingEnv(4, LAYOUT.obs_dim, LAYOUT.action_dim, 8, 0.0, 1.0, 0, "cpu")
    with pytest.raises(AgentError, match="entity_outcomes"):
        agent.train_round(layout_env)


def test_entity_advantages_need_the_cross_sectional_policy() -> None:
    with pytest.raises(AgentError, match="advantages 'entity' needs policy 'cross_sectional'"):
        PPOConfig(policy="mlp", advantages="entity")
    with pytest.raises(AgentError, match="advantages must be 'joint' or 'entity'"):
        PPOConfig(policy="cross_sectional", advantages="per_asset")  # type: ignore[arg-type]


def test_the_future_part_is_the_gae_advantage_beyond_the_steps_own_reward() -> None:
    terms = torch.randn(4, 3, 5)
    rewards, values = torch.randn(4, 3), torch.randn(4, 3)
    myopic = rewards - values  # gamma = 0: GAE is the one-step advantage
    torch.testing.assert_close(with_future(terms, myopic, rewards, values), terms)
    later = myopic + 0.7
    torch.testing.assert_close(with_future(terms, later, rewards, values), terms + 0.7)


def test_one_entity_credited_with_the_joint_advantage_is_plain_clipped_ppo() -> None:
    generator = torch.Generator().manual_seed(0)
    new = torch.randn(64, 1, generator=generator) * 0.3
    old = torch.randn(64, 1, generator=generator) * 0.3
    adv = torch.randn(64, generator=generator)
    loss = entity_policy_loss(new, old, old.sum(dim=1), adv.unsqueeze(1), adv, 0.8, 1.2, 0, normalize=False)
    ratio = (new - old).squeeze(1).exp()
    expected = torch.max(-adv * ratio, -adv * ratio.clamp(0.8, 1.2)).mean()
    torch.testing.assert_close(loss, expected)


def test_entity_advantages_learn_a_noisy_choice_that_the_joint_advantage_barely_starts_on() -> None:
    """16 entities whose outcomes are 96 % noise, 30 rounds (7,680 env steps), two seeds: the entity
    advantage gets more than half of the best choice's edge; the joint one about a tenth (measured on
    seeds 0-2: 0.54-0.61 vs 0.11-0.13)."""
    joint = dataclasses.replace(CHOICE_PPO, advantages="joint")
    for seed in range(2):
        shares = {}
        for name, config in (("joint", joint), ("entity", CHOICE_PPO)):
            shares[name] = _share_of_best(trained_alone(config, seed, rounds=30))
        assert shares["entity"] > 0.4, shares
        assert shares["entity"] > 2.5 * shares["joint"], shares


def test_a_population_with_entity_advantages_equals_its_pods_trained_one_by_one() -> None:
    configs = [CHOICE_PPO, dataclasses.replace(CHOICE_PPO, learning_rate=1e-3, clip_coef=0.1, gamma=0.5)]
    assert_population_equals_pods_one_by_one(configs)
