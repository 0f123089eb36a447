"""Per-asset outcomes and costs in the step info: the reward is linear in the target weights through them
(no volume cap here: a capped fill is not the target the weights ask for)."""

from __future__ import annotations

import dataclasses
import math

import torch

from env.panels import random_panel
from finpod.env import EnvConfig, TradingEnv

NUM_ASSETS = 5
NUM_ENVS = 8


def _first_step(config: EnvConfig, actions: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Reward and info of the first step (all cash before it) of a fresh env, same start bars each call."""
    panel = random_panel(200, NUM_ASSETS, 3, seed=4, untradable_fraction=0.0)
    env = TradingEnv(panel, "train", config, NUM_ENVS, seed=11, entity_info=True)
    env.reset(seed=5)
    _, reward, _, _, info = env.step(actions)
    return reward, info


def _weights(seed: int) -> torch.Tensor:
    """Random target weights over ``[cash, assets]`` with at least 20 % cash (the buys always fit)."""
    scores = torch.rand(NUM_ENVS, NUM_ASSETS + 1, generator=torch.Generator().manual_seed(seed))
    scores[:, 0] = scores[:, 1:].sum(dim=1) * 0.25 + 0.1
    return scores / scores.sum(dim=1, keepdim=True)


def test_pnl_reward_differences_are_the_weight_differences_times_outcomes_less_the_costs() -> None:
    config = EnvConfig(
        fee_rate=0.001, half_spread_bps=0.0, reward="pnl", reward_scale=100.0, max_participation=math.inf
    )
    first, second = _weights(0), _weights(1)
    reward_1, info_1 = _first_step(config, first)
    reward_2, info_2 = _first_step(config, second)
    torch.testing.assert_close(info_1["entity_outcomes"], info_2["entity_outcomes"])  # action-free
    predicted = ((first - second)[:, 1:] * info_1["entity_outcomes"]).sum(dim=1) - (
        info_1["entity_costs"].sum(dim=1) - info_2["entity_costs"].sum(dim=1)
    )
    torch.testing.assert_close(reward_1 - reward_2, predicted, rtol=1e-4, atol=1e-5)


def test_log_rewards_follow_the_same_linear_form_to_first_order() -> None:
    config = EnvConfig(
        fee_rate=0.0005,
        half_spread_bps=1.0,
        reward="excess_log_return",
        reward_scale=100.0,
        max_participation=math.inf,
    )
    first, second = _weights(2), _weights(3)
    reward_1, info_1 = _first_step(config, first)
    reward_2, _ = _first_step(config, second)
    _, info_2 = _first_step(config, second)
    predicted = ((first - second)[:, 1:] * info_1["entity_outcomes"]).sum(dim=1) - (
        info_1["entity_costs"].sum(dim=1) - info_2["entity_costs"].sum(dim=1)
    )
    error = (reward_1 - reward_2 - predicted).abs()
    assert float(error.max()) < 0.05 * float((reward_1 - reward_2).abs().max()) + 1e-3


def test_costs_are_zero_without_a_trade_and_share_delta_mode_reports_no_outcomes() -> None:
    config = EnvConfig(fee_rate=0.002)
    all_cash = torch.zeros(NUM_ENVS, NUM_ASSETS + 1)
    all_cash[:, 0] = 1.0
    _, info = _first_step(config, all_cash)
    assert float(info["entity_costs"].abs().max()) == 0.0
    assert info["entity_outcomes"].shape == (NUM_ENVS, NUM_ASSETS)
    _, delta_info = _first_step(
        dataclasses.replace(config, action_mode="share_delta"), torch.zeros(NUM_ENVS, NUM_ASSETS)
    )
    assert "entity_outcomes" not in delta_info


def test_entity_info_is_reported_only_when_asked_for() -> None:
    panel = random_panel(200, NUM_ASSETS, 3, seed=4, untradable_fraction=0.0)
    actions = _weights(0)
    for asked in (False, True):
        env = TradingEnv(panel, "train", EnvConfig(), NUM_ENVS, seed=11, entity_info=asked)
        env.reset(seed=5)
        _, _, _, _, info = env.step(actions)
        assert ("entity_outcomes" in info) is asked
        assert ("entity_costs" in info) is asked


def test_with_a_risk_penalty_the_outcomes_are_the_reward_s_slopes_at_the_step_s_action() -> None:
    """A concave reward: the outcomes predict the reward of a nearby action to first order, and
    far better than the unpenalised outcomes do."""
    penalised = EnvConfig(
        fee_rate=0.0005,
        half_spread_bps=1.0,
        reward="excess_log_return",
        risk_penalty=20.0,
        reward_scale=100.0,
        max_participation=math.inf,
    )
    near = _weights(4)
    shift = torch.randn(NUM_ENVS, NUM_ASSETS + 1, generator=torch.Generator().manual_seed(9)) * 0.01
    far = (near + shift).clamp_min(0.0)
    far = far / far.sum(dim=1, keepdim=True)
    reward_near, info_near = _first_step(penalised, near)
    reward_far, info_far = _first_step(penalised, far)
    _, info_plain = _first_step(dataclasses.replace(penalised, risk_penalty=0.0), near)
    moved = reward_far - reward_near
    costs = info_far["entity_costs"].sum(dim=1) - info_near["entity_costs"].sum(dim=1)
    predicted = ((far - near)[:, 1:] * info_near["entity_outcomes"]).sum(dim=1) - costs
    unpenalised = ((far - near)[:, 1:] * info_plain["entity_outcomes"]).sum(dim=1) - costs
    error = float((moved - predicted).abs().max())
    assert error < 0.05 * float(moved.abs().max())
    assert error < 0.5 * float((moved - unpenalised).abs().max())


def test_each_asset_s_cost_is_the_cost_rate_times_the_move_away_from_its_holdings() -> None:
    """The pathwise term's inputs (``entity_holdings``, ``entity_cost_rates``): on a second step,
    from a book the first step bought, each asset's trade cost is the rate times ``|u_i - holding_i|``
    (exactly, up to float32, where no volume cap or band cuts the order), in both reward modes."""
    panel = random_panel(200, NUM_ASSETS, 3, seed=4, untradable_fraction=0.0)
    for reward in ("excess_log_return", "pnl"):
        config = EnvConfig(
            fee_rate=0.001, half_spread_bps=2.0, reward=reward, reward_scale=100.0, max_participation=math.inf
        )
        env = TradingEnv(panel, "train", config, NUM_ENVS, seed=11, entity_info=True)
        env.reset(seed=5)
        _, _, _, _, first = env.step(_weights(0))
        assert float(first["entity_holdings"].abs().max()) == 0.0  # all cash before the first trades
        target = _weights(1)
        _, _, _, _, second = env.step(target)
        held = second["entity_holdings"]
        assert held.shape == (NUM_ENVS, NUM_ASSETS)
        assert second["entity_cost_rates"].shape == (NUM_ENVS, 1)
        assert float(held.sum(dim=1).max()) < 1.0  # part of the book is cash
        predicted = second["entity_cost_rates"] * (target[:, 1:] - held).abs()
        torch.testing.assert_close(second["entity_costs"], predicted, rtol=1e-4, atol=1e-7)
