"""An agent learns: on a market with a strong planted signal, the trader beats equal weight held out."""

from __future__ import annotations

import torch

from finpod.data.panel_builder import build_panel
from finpod.data.signals import SignalSpec
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from finpod.oracle import equal_weight_policy, segment_sharpe
from podracer.ppo import PPOAgent, PPOConfig

SEGMENTS = {
    "train": ("2016-01-04", "2017-12-29"),
    "validation": ("2018-01-02", "2018-03-29"),
    "backtest": ("2018-04-02", "2019-03-29"),
}
TRAIN_ENV_STEPS = 15_360
"""About 15 s on one CPU thread (loaded 2-core box: up to ~40 s)."""


def test_cross_sectional_agent_beats_equal_weight_on_held_out_bars() -> None:
    torch.set_num_threads(1)
    cpu = torch.device("cpu")
    signal = SignalSpec("reversal", 0.3)
    bars = synth_market(10, 814, "1d", seed=1, signal=signal, alpha_annual=0.0)
    panel = build_panel(
        bars,
        freq="1d",
        start="2016-01-04",
        end="2019-03-29",
        segments=SEGMENTS,
        device=cpu,
        benchmark_symbol=None,
    )
    config = EnvConfig(fee_rate=0.0005, half_spread_bps=1.0, horizon_bars=64, reward="excess_log_return")
    env = TradingEnv(panel, "train", config, num_envs=16, seed=1)
    agent_config = PPOConfig(
        policy="cross_sectional",
        rollout_steps=32,
        gamma=0.5,
        learning_rate=1e-3,
        hidden_sizes=(32, 32),
        update_epochs=4,
        num_minibatches=4,
    )
    agent = PPOAgent(
        env.obs_dim,
        env.action_dim,
        env.action_low,
        env.action_high,
        agent_config,
        cpu,
        seed=1,
        layout=env.layout,
    )
    steps = 0
    while steps < TRAIN_ENV_STEPS:
        steps += agent.train_round(env).env_steps
    trader = segment_sharpe(panel, "backtest", config, lambda obs: agent.act(obs, deterministic=True), cpu)
    equal = segment_sharpe(panel, "backtest", config, equal_weight_policy(panel.num_assets), cpu)
    assert trader > equal + 0.5, f"trader Sharpe {trader:.2f} vs equal weight {equal:.2f}"
