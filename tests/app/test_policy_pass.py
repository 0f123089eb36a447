"""A policy pass in blocks of static buffers (what a GPU records as CUDA graphs) equals the plain
step loop bit for bit: same outputs, same final state, across a tail shorter than a block and the
step where the episode ends; and on a CUDA device the replayed graphs equal the eager loop."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
import torch

from finpod.backtest.policy_pass import BLOCK_STEPS, drive_blocks, equity_curve
from finpod.backtest.recorder import RECORDED_FIELDS, backtest_config
from finpod.backtest.trader_batch import TraderBatch
from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.env.shape import EnvShape
from finpod.env.trading_env import TradingEnv
from finpod.linear_baseline import fit_linear_trader
from finpod.pipeline.training import agent_factory, deterministic_policy
from podracer.ppo import PPOConfig

CPU = torch.device("cpu")
CONFIG = EnvConfig(fee_rate=0.002, half_spread_bps=1.0, max_participation=0.1, rebalance_band=0.01)


@pytest.fixture(scope="module")
def minute_panel() -> Panel:
    """4 synthetic symbols, 6 minute sessions: 2 to train, 4 (1,560 bars) to validate."""
    bars = synth_market(4, 6, "1min", seed=5, start="2019-01-02")
    first, last = bars["timestamp"].min().date(), bars["timestamp"].max().date()
    split = first + dt.timedelta(days=2)
    segments = {"train": (first, split), "validation": (split + dt.timedelta(days=1), last)}
    return build_panel(
        bars, freq="1min", start=first, end=last, segments=segments, device=CPU, benchmark_symbol=None
    )


def _policy(panel: Panel, device: torch.device, policy: str = "cross_sectional") -> object:
    shape = EnvShape.of(panel.num_assets, panel.num_features, CONFIG.action_mode)
    config = PPOConfig(hidden_sizes=(16, 16), policy=policy)
    return deterministic_policy(agent_factory(shape, device)(config, 3))


def _env(panel: Panel, device: torch.device, num_envs: int, horizon: int | None = None) -> TradingEnv:
    config = backtest_config(CONFIG, panel, "validation")
    if horizon is not None:
        config = dataclasses.replace(config, horizon_bars=horizon)
    return TradingEnv(panel, "validation", config, num_envs, seed=0, device=device)


def drive(
    env: TradingEnv, policy: object, obs: torch.Tensor, steps: int, fields: tuple[str, ...], graphs: bool
) -> dict[str, torch.Tensor]:
    """The blocks of :func:`drive_blocks` joined: each field ``(S, N, ...)``."""
    blocks = list(drive_blocks(env, policy, obs, steps, fields, graphs=graphs))
    return {name: torch.cat([block[name] for block in blocks]) for name in fields}


def _plain_loop(env: TradingEnv, policy: object, steps: int) -> dict[str, torch.Tensor]:
    obs = env.reset(seed=0)[0]
    kept: dict[str, list[torch.Tensor]] = {name: [] for name in RECORDED_FIELDS}
    for _ in range(steps):
        obs, _, _, _, info = env.step(policy(obs))  # type: ignore[operator]
        for name in RECORDED_FIELDS:
            kept[name].append(info[name])
    return {name: torch.stack(values) for name, values in kept.items()}


@pytest.mark.parametrize("policy_kind", ["cross_sectional", "mlp"])
def test_blocks_equal_the_plain_loop_through_the_episode_end(minute_panel: Panel, policy_kind: str) -> None:
    policy = _policy(minute_panel, CPU, policy_kind)
    plain_env = _env(minute_panel, CPU, num_envs=3)
    steps = plain_env.market.horizon_bars  # the whole segment: the last step ends the episode
    assert steps % BLOCK_STEPS != 0  # a tail shorter than a block
    assert steps > 3 * BLOCK_STEPS
    with torch.inference_mode():
        expected = _plain_loop(plain_env, policy, steps)
        env = _env(minute_panel, CPU, num_envs=3)
        obs = env.reset(seed=0)[0]
        got = drive(env, policy, obs, steps, RECORDED_FIELDS, graphs=True)
    for name in RECORDED_FIELDS:
        assert got[name].shape == expected[name].shape
        assert torch.equal(got[name], expected[name]), name
    for mine, theirs in zip(env.state, plain_env.state, strict=True):
        assert torch.equal(mine, theirs)


def test_blocks_continue_across_episodes_and_yield_every_step_once(minute_panel: Panel) -> None:
    policy = _policy(minute_panel, CPU)
    horizon = 2 * BLOCK_STEPS + 5  # episodes end mid-pass: the blocks around them step eagerly
    steps = 3 * horizon + 7
    with torch.inference_mode():
        expected = _plain_loop(_env(minute_panel, CPU, 2, horizon), policy, steps)
        env = _env(minute_panel, CPU, 2, horizon)
        blocks = list(
            drive_blocks(env, policy, env.reset(seed=0)[0], steps, ("equity_usd", "bar_index"), graphs=True)
        )
    assert all(1 <= block["equity_usd"].shape[0] <= BLOCK_STEPS for block in blocks)
    assert torch.equal(torch.cat([b["bar_index"] for b in blocks]), expected["bar_index"])
    assert torch.equal(torch.cat([b["equity_usd"] for b in blocks]), expected["equity_usd"])


def test_an_equity_curve_starts_at_the_current_equity(minute_panel: Panel) -> None:
    policy = _policy(minute_panel, CPU)
    with torch.inference_mode():
        expected = _plain_loop(_env(minute_panel, CPU, 2), policy, 10)["equity_usd"]
        env = _env(minute_panel, CPU, 2)
        obs = env.reset(seed=0)[0]
        start = env.equity_usd.clone()
        curve = equity_curve(env, policy, obs, 10)
        empty = equity_curve(_env(minute_panel, CPU, 2), policy, obs, 0)
    assert curve.shape == (11, 2)
    assert torch.equal(curve[0], start)
    assert torch.equal(curve[1:], expected)
    assert empty.shape == (1, 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the graph replays)")
@pytest.mark.parametrize("policy_kind", ["cross_sectional", "mlp"])
def test_cuda_graph_replays_equal_the_eager_loop(minute_panel: Panel, policy_kind: str) -> None:
    cuda = torch.device("cuda")
    panel = minute_panel.to(cuda)
    policy = _policy(panel, cuda, policy_kind)
    with torch.inference_mode():
        plain_env = _env(panel, cuda, 3)
        steps = plain_env.market.horizon_bars
        expected = _plain_loop(plain_env, policy, steps)
        env = _env(panel, cuda, 3)
        got = drive(env, policy, env.reset(seed=0)[0], steps, RECORDED_FIELDS, graphs=True)
    for name in RECORDED_FIELDS:
        assert torch.equal(got[name], expected[name]), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the graph replays)")
def test_the_linear_baseline_and_a_trader_batch_are_graphed_on_cuda(minute_panel: Panel) -> None:
    cuda = torch.device("cuda")
    panel = minute_panel.to(cuda)
    linear = fit_linear_trader(panel, CONFIG, cuda).policy
    traders = TraderBatch([_policy(panel, cuda, "mlp"), _policy(panel, cuda, "mlp")])
    both = TraderBatch([_policy(panel, cuda, "mlp"), linear, _policy(panel, cuda, "mlp")])  # one pass on CUDA
    for policy, rows in ((linear, 2), (traders, 2), (both, 3)):
        with torch.inference_mode():
            plain_env = _env(panel, cuda, rows)
            steps = plain_env.market.horizon_bars
            expected = _plain_loop(plain_env, policy, steps)
            env = _env(panel, cuda, rows)
            got = drive(env, policy, env.reset(seed=0)[0], steps, ("equity_usd", "shares"), graphs=True)
        assert torch.equal(got["equity_usd"], expected["equity_usd"])
        assert torch.equal(got["shares"], expected["shares"])
