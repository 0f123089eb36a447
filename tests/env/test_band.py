"""The no-trade band: an asset within the band of its target weight never trades; band 0 is unchanged."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from env.panels import random_panel
from env.rollout import Case, cases, rollout
from finpod.env import EnvConfig, TradingEnv
from finpod.env.accounting import execute_orders, weights_to_orders

STEPS = 12
WEIGHT_SLACK = 1e-5
"""A weight gap this close to the band may fall on either side of it in float32: not checked."""
NUM_ASSETS = 6


def _weight_gaps(
    case: Case,
    actions: torch.Tensor,
    before_cash: torch.Tensor,
    before_shares: torch.Tensor,
    bar: torch.Tensor,
) -> np.ndarray:
    """``(N, M)`` ``|target weight - current weight|`` in float64 at the fill prices of ``bar``."""
    fill_table = case.panel.open if case.config.fill == "next_open" else case.panel.close
    held_usd = before_shares.double().numpy() * fill_table[bar].double().numpy()
    equity_usd = before_cash.double().numpy() + held_usd.sum(axis=1)
    scores = actions.double().numpy().clip(0.0, 1.0)
    if case.config.fully_invested:
        scores[:, 0] = 0.0
    total = scores.sum(axis=1, keepdims=True)
    target_weight = np.divide(scores[:, 1:], total, out=np.zeros_like(scores[:, 1:]), where=total > 0)
    return np.abs(target_weight - held_usd / equity_usd[:, None])


@settings(max_examples=40, deadline=None)
@given(case=cases(), band=st.sampled_from([0.02, 0.1, 0.3]))
def test_no_asset_inside_the_band_trades(case: Case, band: float) -> None:
    config = dataclasses.replace(case.config, action_mode="weights", rebalance_band=band)
    case = dataclasses.replace(case, config=config)
    for _, tr in rollout(case, STEPS):
        gaps = _weight_gaps(case, tr.actions, tr.before.cash_usd, tr.before.shares, tr.info["bar_index"])
        inside = gaps < band - WEIGHT_SLACK
        np.testing.assert_array_equal(tr.info["shares"].numpy()[inside], tr.before.shares.numpy()[inside])
        everything_inside = inside.all(axis=1)
        assert not tr.info["traded_usd"].numpy()[everything_inside].any()
        assert not tr.info["cost_usd"].numpy()[everything_inside].any()


def test_a_small_drift_is_not_traded_and_a_large_move_is() -> None:
    panel = random_panel(num_bars=60, num_assets=NUM_ASSETS, num_features=1, seed=3, untradable_fraction=0.0)
    equal_weights = torch.tensor([[0.0] + [1.0] * NUM_ASSETS])
    all_in_first = torch.tensor([[0.0, 1.0] + [0.0] * (NUM_ASSETS - 1)])
    traded = {}
    for band in (0.0, 0.05):
        config = EnvConfig(
            max_participation=math.inf, random_start=False, horizon_bars=10, rebalance_band=band
        )
        env = TradingEnv(panel, "train", config, num_envs=1, seed=0)
        env.reset()
        first = env.step(equal_weights)[4]["traded_usd"]
        again = env.step(equal_weights)[4]["traded_usd"]
        moved = env.step(all_in_first)[4]["traded_usd"]
        traded[band] = (float(first[0]), float(again[0]), float(moved[0]))
    # from all cash every gap is 1/6 > 5 %; the day's price drift moves weights by well under 5 %
    assert traded[0.05][0] == traded[0.0][0] > 0.0
    assert traded[0.0][1] > 0.0
    assert traded[0.05][1] == 0.0
    assert traded[0.05][2] > 0.0


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), num_envs=st.integers(1, 6), num_assets=st.integers(1, 5))
def test_zero_band_orders_are_bit_identical_to_the_unbanded_formula(
    seed: int, num_envs: int, num_assets: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    actions = torch.rand(num_envs, num_assets + 1, generator=generator) * 1.2 - 0.1
    actions[0] = 0.0
    cash_usd = torch.rand(num_envs, generator=generator) * 1e6
    shares = torch.rand(num_envs, num_assets, generator=generator) * 1e3
    fill_price = torch.rand(num_envs, num_assets, generator=generator) * 200.0 + 1.0
    # the pre-band formula, verbatim
    scores = actions.clamp(0.0, 1.0)
    total = scores.sum(dim=1)
    equity_usd = cash_usd + (shares * fill_price).sum(dim=1)
    usd_per_score = torch.where(total > 0.0, equity_usd / total, torch.zeros_like(total))
    unbanded = (scores[:, 1:] * usd_per_score.unsqueeze(1)).div_(fill_price).sub_(shares)
    orders = weights_to_orders(actions, cash_usd, shares, fill_price, rebalance_band=0.0)
    assert torch.equal(orders, unbanded)
    assert torch.equal(orders.signbit(), unbanded.signbit())


@settings(max_examples=25, deadline=None)
@given(band=st.sampled_from([0.0, 0.02]), seed=st.integers(0, 10_000), whole=st.booleans())
def test_weight_orders_never_sell_more_than_held_so_skipping_that_clamp_changes_nothing(
    band: float, seed: int, whole: bool
) -> None:
    generator = torch.Generator().manual_seed(seed)
    num_envs = 16
    shares = torch.rand(num_envs, NUM_ASSETS, generator=generator, dtype=torch.float64) * 50.0
    shares[:, 0] = 0.0
    cash = torch.rand(num_envs, generator=generator, dtype=torch.float64) * 1e4
    fill = 10.0 + torch.rand(num_envs, NUM_ASSETS, generator=generator, dtype=torch.float64) * 90.0
    actions = torch.rand(num_envs, NUM_ASSETS + 1, generator=generator)
    actions[:, 1] = 0.0  # sell a whole position
    buy_limit = torch.rand(num_envs, NUM_ASSETS, generator=generator, dtype=torch.float64) * 40.0
    sell_limit = torch.rand(num_envs, NUM_ASSETS, generator=generator, dtype=torch.float64) * 80.0
    config = EnvConfig(rebalance_band=band, whole_shares=whole, half_spread_bps=2.0)
    orders = weights_to_orders(actions, cash, shares, fill, band)
    assert bool((orders >= -shares).all())
    checked, skipped = (
        execute_orders(
            orders, cash, shares, fill, buy_limit, sell_limit, config, orders_within_holdings=vouched
        )
        for vouched in (False, True)
    )
    for field in checked._fields:
        assert torch.equal(getattr(checked, field), getattr(skipped, field)), field
