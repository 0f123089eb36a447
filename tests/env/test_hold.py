"""Holding through many bars at once equals stepping the env with no orders, bit for bit."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from env.panels import random_panel
from finpod.env import EnvConfig, TradingEnv, dynamics


@pytest.mark.parametrize("num_assets", [3, 40])
def test_hold_equals_stepping_a_zero_order(num_assets: int) -> None:
    panel = random_panel(num_bars=120, num_assets=num_assets, num_features=2, seed=num_assets)
    config = EnvConfig(horizon_bars=200, random_start=False, half_spread_bps=3.0, whole_shares=False)
    env = TradingEnv(panel, "train", config, num_envs=2, seed=0)
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(1)
    _, _, _, _, info = env.step(torch.rand(2, env.action_dim, generator=generator))
    first, (_, stop) = int(info["bar_index"][0]) + 1, panel.segment("train")
    held = dynamics.hold(env.market, info["cash_usd"], info["shares"], first, stop)

    zero_orders = dataclasses.replace(config, action_mode="share_delta")
    state, no_orders = env.state, torch.zeros((2, num_assets))
    for row in range(stop - first):
        state, out = dynamics.advance(zero_orders, env.market, state, no_orders)
        for name, values in held.items():
            assert torch.equal(values[row], getattr(out, name)), (name, row)
    assert held["equity_usd"].shape == (stop - first, 2)
    assert not torch.equal(held["equity_usd"][0], held["equity_usd"][-1])  # the valuation moves
