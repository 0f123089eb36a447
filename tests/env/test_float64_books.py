"""The books stay exact over a long run: 10,000 steps of the env against the float64 reference.

The reference is iterated on its own state (not re-synchronised with the env each step), so any
drift of the env's accounting accumulates and shows. In float32 the env's equity drifted 5e-5
relative after 10k steps, with a positive bias; in float64 it must stay at float64 rounding.
"""

from __future__ import annotations

import numpy as np
import torch

from env.panels import random_panel
from env.reference import reference_step
from finpod.env import EnvConfig, TradingEnv

STEPS = 10_000
EQUITY_RTOL = 1e-10
"""The largest relative gap allowed between the env's equity and the reference's after STEPS steps."""
REBALANCE_EVERY = 25
"""Steps between new random target weights (in between, the env trades back to the same targets)."""


def test_equity_matches_the_float64_reference_after_10k_steps() -> None:
    panel = random_panel(
        num_bars=STEPS + 1,
        num_assets=4,
        num_features=1,
        seed=8,
        untradable_fraction=0.05,
        segments={"train": (0, STEPS + 1)},
    )
    config = EnvConfig(
        fee_rate=0.0005,
        half_spread_bps=1.0,
        max_participation=float("inf"),
        horizon_bars=STEPS,
        random_start=False,
    )
    env = TradingEnv(panel, "train", config, num_envs=1, seed=0)
    env.reset()
    rng = np.random.default_rng(3)
    cash, shares, equity = config.initial_cash_usd, [0.0] * panel.num_assets, config.initial_cash_usd
    actions = torch.zeros(1, env.action_dim)
    for step in range(STEPS):
        if step % REBALANCE_EVERY == 0:
            actions = torch.from_numpy(rng.uniform(0.0, 1.0, size=(1, env.action_dim)).astype(np.float32))
        _, _, _, truncated, info = env.step(actions)
        ref = reference_step(panel, config, step, cash, shares, equity, [float(a) for a in actions[0]])
        cash, shares, equity = ref.cash_usd, ref.shares, ref.equity_usd
    assert bool(truncated.all())
    env_equity = float(info["equity_usd"][0])
    env_cash, env_shares = float(info["cash_usd"][0]), info["shares"][0]
    assert abs(env_equity / equity - 1.0) < EQUITY_RTOL
    assert abs(env_cash - cash) < EQUITY_RTOL * equity
    close = panel.close[STEPS].to(torch.float64)
    np.testing.assert_allclose(env_equity, env_cash + float((env_shares * close).sum()), rtol=1e-14)
