"""TradingEnvs stacked for a population: one env of P x N rows that equals its members stepped alone."""

from __future__ import annotations

import pytest
import torch

from env.panels import random_panel
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError
from podracer.env_stack import StackableEnv, stack_envs

STEPS = 45
"""More than two 20-bar episodes, so autoresets happen inside the stacked steps."""


def test_a_stacked_env_steps_its_members_exactly_as_they_step_alone() -> None:
    panel = random_panel(300, 5, 3, seed=4)
    config = EnvConfig(horizon_bars=20, fee_rate=0.001)
    alone = [TradingEnv(panel, "train", config, 4, seed) for seed in (1, 2, 3)]
    members = [TradingEnv(panel, "train", config, 4, seed) for seed in (1, 2, 3)]
    assert isinstance(members[0], StackableEnv)
    for env in (*alone, *members):
        env.reset(seed=7)
    alone[1].step(torch.full((4, 6), 1.0 / 6.0))  # members start at different points of their episodes
    members[1].step(torch.full((4, 6), 1.0 / 6.0))
    generator = torch.Generator().manual_seed(0)
    stack = stack_envs(members)
    assert stack.native
    assert stack.env.num_envs == 12
    for _ in range(STEPS):
        actions = torch.rand(12, 6, generator=generator)
        obs, reward, _, truncated, info = stack.env.step(actions)
        for index, env in enumerate(alone):
            rows = slice(4 * index, 4 * index + 4)
            own_obs, own_reward, _, own_truncated, own_info = env.step(actions[rows])
            assert torch.equal(obs[rows], own_obs)
            assert torch.equal(reward[rows], own_reward)
            assert torch.equal(truncated[rows], own_truncated)
            assert torch.equal(info["equity_usd"][rows], own_info["equity_usd"])
    stack.scatter()
    for own, member in zip(alone, members, strict=True):
        for ours, theirs in zip(own.state, member.state, strict=True):
            assert torch.equal(ours, theirs)
        assert member.episode_ends_within(5) == own.episode_ends_within(5)


def test_envs_of_different_markets_or_settings_are_refused() -> None:
    panel = random_panel(300, 5, 3, seed=4)
    env = TradingEnv(panel, "train", EnvConfig(horizon_bars=20), 4, 1)
    other_fee = TradingEnv(panel, "train", EnvConfig(horizon_bars=20, fee_rate=0.01), 4, 1)
    other_segment = TradingEnv(panel, "validation", EnvConfig(horizon_bars=20), 4, 1)
    for other in (other_fee, other_segment):
        with pytest.raises(SpecError, match="one market segment with one EnvConfig"):
            env.stack([env, other])
