"""The env benchmark: the numpy comparison env has the same semantics; the CLI runs and fails cleanly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from clirun import run_cli
from env.panels import random_panel
from finpod.bench import env_bench
from finpod.bench.env_bench import copy_bandwidth, min_bytes_per_env_step
from finpod.bench.numpy_env import ClassicNumpyEnv
from finpod.env import EnvConfig, TradingEnv
from finpod.errors import SpecError

MONEY_RTOL = 2e-6


@pytest.mark.parametrize(
    "config",
    [
        EnvConfig(horizon_bars=25, random_start=False),
        EnvConfig(horizon_bars=25, random_start=False, half_spread_bps=20.0, max_participation=0.1),
        EnvConfig(horizon_bars=25, random_start=False, whole_shares=True, fill="next_close", fee_rate=0.0),
    ],
)
def test_numpy_comparison_env_has_the_same_semantics(config: EnvConfig) -> None:
    panel = random_panel(num_bars=80, num_assets=5, num_features=2, seed=4, untradable_fraction=0.2)
    ours = TradingEnv(panel, "train", config, num_envs=1, seed=0)
    theirs = ClassicNumpyEnv(panel, "train", config, seed=0)
    obs, _ = ours.reset()
    np.testing.assert_allclose(obs[0].numpy(), theirs.reset(), rtol=1e-6, atol=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(40):
        action = rng.random(panel.num_assets + 1).astype(np.float32)
        obs, reward, _, truncated, info = ours.step(torch.from_numpy(action[None]))
        their_obs, their_reward, _, their_truncated, their_equity = theirs.step(action.astype(np.float64))
        assert bool(truncated[0]) == their_truncated
        np.testing.assert_allclose(
            float(info["equity_usd"][0]), their_equity, rtol=0, atol=MONEY_RTOL * config.initial_cash_usd
        )
        np.testing.assert_allclose(float(reward[0]), their_reward, rtol=0, atol=2e-4)
        np.testing.assert_allclose(obs[0].numpy(), their_obs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "config",
    [
        EnvConfig(action_mode="share_delta"),
        EnvConfig(rebalance_band=0.05),
        EnvConfig(start_portfolio="equal_weight"),
        EnvConfig(fully_invested=True),
    ],
)
def test_numpy_comparison_env_refuses_other_modes(config: EnvConfig) -> None:
    panel = random_panel(num_bars=30, num_assets=2, num_features=1, seed=0)
    with pytest.raises(SpecError, match="numpy comparison env"):
        ClassicNumpyEnv(panel, "train", config, seed=0)


def test_bench_env_cli_reports_throughput_memory_and_speedup() -> None:
    args = ["--envs", "16", "--assets", "4", "--features", "2", "--sessions", "1", "--steps", "10"]
    result = run_cli(
        "bench", "env", *args, "--numpy-steps", "10", "--warmup-steps", "2", "--bandwidth-mib", "4", "--json"
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["num_envs"], report["num_assets"], report["num_features"]) == (16, 4, 2)
    assert report["steps"] == 10
    assert report["obs_dim"] == 4 * 2 + 4 + 2
    assert report["env_steps_per_second"] > 0
    assert report["numpy_steps_per_second"] > 0
    assert report["speedup"] == pytest.approx(
        report["env_steps_per_second"] / report["numpy_steps_per_second"]
    )
    assert report["peak_memory_bytes"] > report["env_tensor_bytes"] > 0
    action_dim, obs_dim = 4 + 1, report["obs_dim"]
    assert report["min_bytes_per_env_step"] == 4 * (action_dim + 4 * 4 + 2 * obs_dim) + 8 * 2 * 4
    assert report["achieved_bytes_per_second"] == pytest.approx(
        report["env_steps_per_second"] * report["min_bytes_per_env_step"]
    )
    assert report["cuda_graph"] is False  # the CPU times plain steps
    assert report["advance_graph_replays"] == report["step_graph_replays"] == 0
    assert report["copy_bytes_per_second"] > 0
    assert report["bandwidth_share"] == pytest.approx(
        report["achieved_bytes_per_second"] / report["copy_bytes_per_second"]
    )
    threads = torch.get_num_threads()
    try:
        text = run_cli("bench", "env", *args, "--numpy-steps", "10", "--threads", "1")
    finally:
        torch.set_num_threads(threads)
    assert text.exit_code == 0, text.stderr
    assert "env steps/s" in text.stdout
    assert "speed-up" in text.stdout
    assert "of the measured copy bandwidth" in text.stdout
    assert report["entity_info"] is False
    asked = run_cli("bench", "env", *args, "--numpy-steps", "1", "--entity-info", "--json")
    assert asked.exit_code == 0, asked.stderr
    assert json.loads(asked.stdout)["entity_info"] is True


@pytest.mark.parametrize("every_step_resets", [False, True])
def test_the_bytes_per_step_model_follows_the_env_tensors(every_step_resets: bool) -> None:
    """Each term of min_bytes_per_env_step is a row of a tensor the step really reads or writes."""
    panel = random_panel(num_bars=40, num_assets=6, num_features=3, seed=0)
    env = TradingEnv(panel, "train", EnvConfig(horizon_bars=10), num_envs=2, seed=0)
    obs, _ = env.reset(seed=0)
    actions = torch.full((env.num_envs, env.action_dim), 1.0 / env.action_dim)
    new_obs, _, _, _, info = env.step(actions)
    row = env.market.bars[0]  # the fill bar: fill price, close, buy and sell caps of every asset
    reads = actions[0].nbytes + row.nbytes + env.state.shares[0].nbytes + env.market.obs_template[0].nbytes
    writes = env.state.shares[0].nbytes + new_obs[0].nbytes
    if every_step_resets:  # a second template row for the reset env, and final_obs apart from obs
        reads += env.market.obs_template[0].nbytes
        writes += info["final_obs"][0].nbytes
    assert obs.dtype == torch.float32
    assert env.market.obs_template.shape[1] == env.obs_dim
    model = min_bytes_per_env_step(panel.num_assets, env.obs_dim, env.action_dim, every_step_resets)
    assert model == reads + writes


def test_the_copy_bandwidth_counts_bytes_read_and_written(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 3.0])  # copies of 0.5, 0.25 and 1.0 s: the best counts
    monkeypatch.setattr(env_bench.time, "perf_counter", lambda: next(clock))
    assert copy_bandwidth(torch.device("cpu"), 4 * 2**20, repeats=3) == pytest.approx(2 * 4 * 2**20 / 0.25)


def test_a_cuda_graph_on_the_cpu_is_one_line() -> None:
    result = run_cli("bench", "env", "--sessions", "1", "--numpy-steps", "1", "--cuda-graph")
    assert result.exit_code == 2
    assert "--cuda-graph needs --device cuda" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--envs", "0"], "--envs must be >= 1"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--threads", "-1"], "--threads"),
        (["--device", "tpu"], "--device"),
        (["--entity-info", "--cuda-graph"], "--cuda-graph"),
    ],
)
def test_bench_env_cli_user_errors_are_one_line(args: list[str], message: str) -> None:
    result = run_cli("bench", "env", "--sessions", "1", "--numpy-steps", "1", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_bench_env_cli_without_a_gpu_says_so() -> None:
    result = run_cli("bench", "env", "--device", "cuda", "--sessions", "1")
    assert result.exit_code == 2
    assert "no CUDA GPU" in result.stderr
