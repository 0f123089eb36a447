"""The pathwise term (``PPOConfig.pathwise_coef``): the objective, its optimum, learning, populations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from engine._choice_kit import CHOICE_PPO, ENTITIES, assert_population_equals_pods_one_by_one, trained_alone
from podracer.generator import perturb_config
from podracer.pathwise import pathwise_loss, store_step_inputs
from podracer.ppo import PPOAgent, PPOConfig
from podracer.ppo_config import AgentError


def _edge_captured(agent: PPOAgent) -> float:
    """Expected edge of the agent's deterministic weights over the uniform weights, as a share of
    always picking the best entity's edge over them."""
    features = torch.randn(4096, ENTITIES, generator=torch.Generator().manual_seed(99))
    obs = torch.cat([features, torch.ones(4096, 1)], dim=1)
    weights = agent.act(obs, deterministic=True)
    weights = weights / weights.sum(dim=1, keepdim=True)
    earned = (weights[:, 1:] * features).sum(dim=1) - features.mean(dim=1)
    best = features.max(dim=1).values - features.mean(dim=1)
    return float(earned.mean() / best.mean())


def test_the_loss_is_m_times_the_mean_objective_by_hand() -> None:
    mode = torch.tensor([[0.1, 0.5, 0.3, 0.1], [0.0, 0.2, 0.2, 0.6]])  # (B=2, A=1+3)
    outcomes = torch.tensor([[1.0, -1.0, 0.5], [0.0, 2.0, -2.0]])
    holdings = torch.tensor([[0.2, 0.2, 0.2], [0.5, 0.5, 0.0]])  # row 0 buys on net, row 1 rotates
    rates = torch.full((2, 3), 0.1)
    risk = 0.2
    scale = outcomes.std()
    weights = mode[:, 1:]
    excess = ((weights - 1 / 3) * outcomes).sum(dim=1) / scale
    costs = (0.1 * (weights - holdings).abs()).sum(dim=1) / scale
    objective = excess - 0.5 * 3 * risk * excess**2 - costs
    expected = -3 * objective.mean()
    torch.testing.assert_close(pathwise_loss(mode, outcomes, holdings, rates, 1, risk), expected)
    # the same rows as a population of one pod, with the risk per pod
    per_pod = pathwise_loss(mode[None], outcomes[None], holdings[None], rates[None], 1, torch.tensor([risk]))
    torch.testing.assert_close(per_pod, expected.reshape(1))
    # a rotation aversion k charges the part of the costs that rotates the book k times; k = 1 is
    # the default, to the bit
    net = (0.1 * (weights - holdings)).sum(dim=1).abs() / scale
    averse = -3 * (excess - 0.5 * 3 * risk * excess**2 - costs - 3.0 * (costs - net)).mean()
    torch.testing.assert_close(pathwise_loss(mode, outcomes, holdings, rates, 1, risk, 4.0), averse)
    assert torch.equal(
        pathwise_loss(mode, outcomes, holdings, rates, 1, risk, 1.0),
        pathwise_loss(mode, outcomes, holdings, rates, 1, risk),
    )
    two_pods = pathwise_loss(
        torch.stack([mode, mode]),
        torch.stack([outcomes, outcomes]),
        torch.stack([holdings, holdings]),
        torch.stack([rates, rates]),
        1,
        torch.tensor([risk, risk]),
        torch.tensor([1.0, 4.0]),
    )
    torch.testing.assert_close(two_pods, torch.stack([expected, averse]))


def test_a_batch_whose_outcomes_do_not_vary_contributes_nothing() -> None:
    """All outcomes 0 (orders filled at the close they are scored at): no scale, no term, rather
    than the costs divided by a zero spread."""
    mode = torch.softmax(torch.randn(3, 8, 5, requires_grad=True), dim=-1)
    outcomes = torch.zeros(3, 8, 4)
    outcomes[1] = torch.randn(8, 4)  # one pod of three has outcomes
    holdings, rates = torch.full((3, 8, 4), 0.25), torch.full((3, 8, 4), 0.002)
    loss = pathwise_loss(mode, outcomes, holdings, rates, 1, torch.tensor([0.01, 0.01, 0.01]))
    assert torch.isfinite(loss).all()
    assert float(loss[0]) == 0.0
    assert float(loss[2]) == 0.0
    assert float(loss[1]) != 0.0


def _fit_free_scores(
    mean_outcomes: torch.Tensor,
    risk: float,
    holdings: torch.Tensor | None = None,
    cost: float = 0.0,
    cost_aversion: float = 1.0,
) -> torch.Tensor:
    """The entity weights that minimise the pathwise loss with one free score per slot (no
    network), on outcomes ``mean + N(0, 1)``; slot 0 is the global (cash) score."""
    entities = mean_outcomes.shape[0]
    generator = torch.Generator().manual_seed(0)
    scores = torch.zeros(entities + 1, requires_grad=True)
    optimizer = torch.optim.Adam([scores], lr=0.05)
    held = torch.zeros(entities) if holdings is None else holdings
    for _ in range(600):
        outcomes = mean_outcomes + torch.randn(256, entities, generator=generator)
        mode = torch.softmax(scores, dim=0).expand(256, -1)
        rates = torch.full((256, entities), cost)
        loss = pathwise_loss(mode, outcomes, held.expand(256, -1), rates, 1, risk, cost_aversion)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.softmax(scores.detach(), dim=0)[1:]


def test_without_risk_the_objective_puts_everything_on_the_best_entity_and_risk_makes_it_a_tilt() -> None:
    mean = torch.tensor([0.10, 0.05, 0.0, -0.05, -0.10])
    all_in = _fit_free_scores(mean, risk=0.0)
    assert float(all_in[0]) > 0.9, all_in
    tilt = _fit_free_scores(mean, risk=0.5)
    assert float(tilt.max()) < 0.5, tilt
    assert torch.all(tilt[:-1] > tilt[1:]), tilt  # ordered as the predicted outcomes
    # the optimum of independent unit-variance outcomes: M (m_i - 1/M) ~ mean_i / risk
    relative = 5 * (tilt - 0.2)
    torch.testing.assert_close(relative, mean / 0.5, atol=0.08, rtol=0.0)


def test_costs_hold_the_weights_near_what_is_held_when_outcomes_are_unpredictable() -> None:
    holdings = torch.tensor([0.55, 0.15, 0.15, 0.15])
    weights = _fit_free_scores(torch.zeros(4), risk=0.0, holdings=holdings, cost=0.5)
    torch.testing.assert_close(weights, holdings, atol=0.05, rtol=0.0)


def test_a_cost_aversion_above_one_trades_less_toward_a_predicted_edge() -> None:
    """From an equal-weight book, the optimum moves toward the best predicted entity only as far as
    the edge pays for the cost; weighing the cost 8 times moves it less (a smaller trade)."""
    mean = torch.tensor([0.3, 0.1, -0.1, -0.3])
    held = torch.full((4,), 0.25)
    plain = _fit_free_scores(mean, risk=0.5, holdings=held, cost=0.02)
    averse = _fit_free_scores(mean, risk=0.5, holdings=held, cost=0.02, cost_aversion=8.0)
    traded_plain, traded_averse = float((plain - held).abs().sum()), float((averse - held).abs().sum())
    assert traded_plain > 0.2, plain
    assert traded_averse < 0.6 * traded_plain, (plain, averse)
    assert torch.all(averse[:-1] >= averse[1:] - 1e-3), averse  # still ordered as the predicted outcomes


def test_the_rotation_aversion_does_not_keep_a_book_in_cash() -> None:
    """Buying in from cash changes how much is invested and rotates nothing: a rotation aversion of
    8 invests as fully as the cost alone does (an aversion to every trade would stay in cash)."""
    mean = torch.full((4,), 0.2)
    cash = torch.zeros(4)
    plain = _fit_free_scores(mean, risk=0.5, holdings=cash, cost=0.05)
    averse = _fit_free_scores(mean, risk=0.5, holdings=cash, cost=0.05, cost_aversion=8.0)
    assert float(plain.sum()) > 0.9, plain
    assert float(averse.sum()) > 0.9, averse


def test_the_cost_aversion_is_pinned_unless_a_search_space_is_given() -> None:
    start = dataclasses.replace(CHOICE_PPO, pathwise_coef=1.0)
    assert start.pathwise_cost == 1.0
    rng = np.random.default_rng(5)
    assert {perturb_config(start, 0.5, rng, None, 0.25).pathwise_cost for _ in range(50)} == {1.0}
    costs = np.array(
        [
            perturb_config(start, 0.5, rng, {"pathwise_cost": (1.0, 8.0)}, 0.25).pathwise_cost
            for _ in range(200)
        ]
    )
    assert costs.min() >= 1.0
    assert costs.max() <= 8.0
    assert costs.max() > 4.0  # resampled log-uniformly over the range
    with pytest.raises(AgentError, match=r"pathwise_cost must be in >= 0.0"):
        PPOConfig(pathwise_cost=-1.0)


def test_an_env_without_holdings_is_refused_with_the_fix() -> None:
    buffers = [torch.zeros(2, 3) for _ in range(3)]
    with pytest.raises(AgentError, match=r"entity_holdings.*fix: set pathwise_coef = 0"):
        store_step_inputs({"entity_outcomes": torch.zeros(2, 3)}, *buffers)


def test_the_pathwise_term_needs_per_entity_advantages() -> None:
    with pytest.raises(AgentError, match="pathwise_coef > 0 needs advantages 'entity'"):
        PPOConfig(policy="cross_sectional", advantages="joint", pathwise_coef=1.0)
    with pytest.raises(AgentError, match=r"pathwise_risk must be in >= 0.0"):
        PPOConfig(pathwise_risk=-1.0)


def test_the_pathwise_term_learns_a_noisy_choice_about_three_times_as_fast() -> None:
    """16 entities whose outcomes are 99 % noise (edge 0.1): after 10 rounds (2,560 env steps) the
    pathwise term has about three times the edge of the score-function terms alone (measured on
    seeds 0-2: pathwise 0.44-0.62 after 10 rounds and 0.83-0.90 after 30; the entity terms alone
    0.14-0.18 and 0.31-0.46)."""
    pathwise = dataclasses.replace(CHOICE_PPO, pathwise_coef=1.0, pathwise_risk=0.01)
    for seed in range(2):
        shares = {}
        for name, config in (("entity", CHOICE_PPO), ("pathwise", pathwise)):
            shares[name] = _edge_captured(trained_alone(config, seed, rounds=10, edge=0.1))
        assert shares["pathwise"] > 0.4, shares
        assert shares["pathwise"] > 2.0 * shares["entity"], shares


def test_a_population_with_the_pathwise_term_equals_its_pods_trained_one_by_one() -> None:
    configs = [
        dataclasses.replace(CHOICE_PPO, pathwise_coef=1.0, pathwise_risk=0.01),
        dataclasses.replace(
            CHOICE_PPO, pathwise_coef=0.5, pathwise_risk=0.1, learning_rate=1e-3, pathwise_cost=4.0
        ),
        CHOICE_PPO,  # off in one pod of the population
    ]
    assert_population_equals_pods_one_by_one(configs)


def test_the_tracking_error_aversion_is_pinned_unless_a_search_space_is_given() -> None:
    """``pathwise_risk`` keeps every child's value by default (podracer is domain-free: how
    concentrated a portfolio may be is the domain's call) and moves within ``perturb_bounds``."""
    start = dataclasses.replace(CHOICE_PPO, pathwise_coef=1.0, pathwise_risk=0.004)
    rng = np.random.default_rng(3)
    assert {perturb_config(start, 0.5, rng, None, 0.25).pathwise_risk for _ in range(50)} == {0.004}
    searched = [perturb_config(start, 0.5, rng, {"pathwise_risk": (0.002, 0.02)}, 0.25) for _ in range(200)]
    risks = np.array([child.pathwise_risk for child in searched])
    assert risks.min() >= 0.002
    assert risks.max() <= 0.02
    assert len(set(risks.tolist())) > 100
    assert risks.max() > 0.01  # resampled log-uniformly over the whole range, not only stepped
