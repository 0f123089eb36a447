"""Hypothesis strategies and a random-action rollout shared by the env's property tests."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st

from env.panels import random_panel
from finpod.data.panel import Panel
from finpod.env import EnvConfig, TradingEnv
from finpod.env.state import EnvState


@st.composite
def env_configs(draw: st.DrawFn) -> EnvConfig:
    """Every action, fill and reward mode, cost setting (fee, spread, volume cap, whole shares), band,
    starting book."""
    return EnvConfig(
        initial_cash_usd=draw(st.sampled_from([10_000.0, 1_000_000.0])),
        fee_rate=draw(st.sampled_from([0.0, 0.002, 0.01])),
        half_spread_bps=draw(st.sampled_from([0.0, 5.0, 50.0])),
        max_participation=draw(st.sampled_from([math.inf, 1.0, 0.05])),
        action_mode=draw(st.sampled_from(["weights", "share_delta"])),
        max_shares=draw(st.sampled_from([10.0, 500.0])),
        fill=draw(st.sampled_from(["next_open", "next_close"])),
        reward=draw(st.sampled_from(["log_return", "pnl", "risk_penalised"])),
        reward_scale=draw(st.sampled_from([1.0, 100.0])),
        risk_penalty=draw(st.sampled_from([0.0, 5.0])),
        horizon_bars=draw(st.integers(1, 12)),
        random_start=draw(st.booleans()),
        whole_shares=draw(st.booleans()),
        rebalance_band=draw(st.sampled_from([0.0, 0.02, 0.1])),
        start_portfolio=draw(st.sampled_from(["cash", "equal_weight"])),
        fully_invested=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Case:
    """A random panel, an env config and a batch size."""

    panel: Panel
    config: EnvConfig
    num_envs: int
    seed: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Panels of 12..40 bars x 1..5 assets x 1..3 features, 1..6 envs."""
    seed = draw(st.integers(0, 2**31 - 1))
    panel = random_panel(
        num_bars=draw(st.integers(12, 40)),
        num_assets=draw(st.integers(1, 5)),
        num_features=draw(st.integers(1, 3)),
        seed=seed,
        untradable_fraction=draw(st.sampled_from([0.0, 0.3])),
    )
    return Case(panel=panel, config=draw(env_configs()), num_envs=draw(st.integers(1, 6)), seed=seed)


def random_actions(rng: np.random.Generator, env: TradingEnv) -> torch.Tensor:
    """Random actions, some out of range (clamped by the env), some rows all zero (all cash)."""
    shape = (env.num_envs, env.action_dim)
    if env.config.action_mode == "weights":
        actions = rng.uniform(-0.1, 1.1, size=shape) * (rng.random(shape) < 0.7)
        actions[rng.random(env.num_envs) < 0.15] = 0.0
    else:
        actions = rng.uniform(-1.2, 1.2, size=shape)
    return torch.from_numpy(actions.astype(np.float32))


@dataclass(frozen=True)
class Transition:
    """One step of a rollout: the state before, the actions, and what the env returned."""

    before: EnvState
    actions: torch.Tensor
    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    info: dict[str, Any]
    after: EnvState


def rollout(case: Case, num_steps: int) -> Iterator[tuple[TradingEnv, Transition]]:
    """Reset an env for ``case`` and step it ``num_steps`` times with random actions."""
    env = TradingEnv(case.panel, "train", case.config, num_envs=case.num_envs, seed=case.seed)
    env.reset(seed=case.seed)
    rng = np.random.default_rng(case.seed)
    for _ in range(num_steps):
        before = env.state
        actions = random_actions(rng, env)
        obs, reward, terminated, truncated, info = env.step(actions)
        yield env, Transition(before, actions, obs, reward, terminated, truncated, info, env.state)
