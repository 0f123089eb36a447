"""The batched float32 env agrees with the plain float64 reference on random actions and panels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from env.panels import random_panel
from env.reference import reference_batch, reference_observation
from env.rollout import Case, cases, rollout
from finpod.env import EnvConfig

STEPS = 16
MONEY_RTOL = 1e-12
"""Cash, equity, costs and notionals: relative to the initial cash (the env's books are float64)."""
SHARES_ATOL = 1e-9
SHARES_RTOL = 1e-12
REWARD_ATOL = 1e-5
"""Rewards are float32 (scaled by up to 100)."""
OBS_ATOL = 1e-5
"""Observation columns are features, weights and shares of the day, in float32."""


def _np(t: object) -> np.ndarray:
    return np.asarray(t, dtype=np.float64)


def _assert_matches_reference(case: Case) -> None:
    money_atol = MONEY_RTOL * case.config.initial_cash_usd
    compared = 0
    for _, tr in rollout(case, STEPS):
        refs = reference_batch(
            case.panel,
            case.config,
            bars=tr.before.t.numpy(),
            cash_usd=_np(tr.before.cash_usd),
            shares=_np(tr.before.shares),
            equity_usd=_np(tr.before.equity_usd),
            actions=_np(tr.actions),
        )
        for n, ref in enumerate(refs):
            if ref.rounding_ambiguous or ref.band_ambiguous:
                continue
            compared += 1
            np.testing.assert_allclose(float(tr.info["cash_usd"][n]), ref.cash_usd, rtol=0, atol=money_atol)
            np.testing.assert_allclose(
                _np(tr.info["shares"][n]), ref.shares, rtol=SHARES_RTOL, atol=SHARES_ATOL
            )
            np.testing.assert_allclose(
                float(tr.info["equity_usd"][n]), ref.equity_usd, rtol=0, atol=money_atol
            )
            np.testing.assert_allclose(float(tr.info["cost_usd"][n]), ref.cost_usd, rtol=0, atol=money_atol)
            np.testing.assert_allclose(
                float(tr.info["traded_usd"][n]), ref.traded_usd, rtol=0, atol=money_atol
            )
            np.testing.assert_allclose(float(tr.reward[n]), ref.reward, rtol=0, atol=REWARD_ATOL)
            ref_obs = reference_observation(
                case.panel, int(tr.info["bar_index"][n]), ref.cash_usd, ref.shares, ref.equity_usd
            )
            np.testing.assert_allclose(_np(tr.info["final_obs"][n]), ref_obs, rtol=0, atol=OBS_ATOL)
    assert compared >= STEPS * case.num_envs // 2, (
        "too few steps compared: rounding excuses swallowed the test"
    )


@settings(max_examples=60, deadline=None)
@given(case=cases())
def test_batched_env_matches_float64_reference(case: Case) -> None:
    _assert_matches_reference(case)


@pytest.mark.parametrize("action_mode", ["weights", "share_delta"])
@pytest.mark.parametrize("fill", ["next_open", "next_close"])
@pytest.mark.parametrize("whole_shares", [False, True])
@pytest.mark.parametrize("max_participation", [math.inf, 0.05])
@pytest.mark.parametrize("rebalance_band", [0.0, 0.1])
def test_every_mode_matches_the_reference(
    action_mode: str, fill: str, whole_shares: bool, max_participation: float, rebalance_band: float
) -> None:
    config = EnvConfig(
        fee_rate=0.002,
        half_spread_bps=10.0,
        max_participation=max_participation,
        action_mode=action_mode,  # type: ignore[arg-type]
        fill=fill,  # type: ignore[arg-type]
        whole_shares=whole_shares,
        rebalance_band=rebalance_band,
        horizon_bars=5,
    )
    panel = random_panel(num_bars=40, num_assets=4, num_features=2, seed=17, untradable_fraction=0.2)
    _assert_matches_reference(Case(panel=panel, config=config, num_envs=4, seed=17))
