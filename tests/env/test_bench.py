"""The env benchmark: the numpy comparison env has the same semantics; the CLI runs and fails cleanly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from clirun import run_cli
from env.panels import random_panel
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


@pytest.mark.parametrize("config", [EnvConfig(action_mode="share_delta"), EnvConfig(rebalance_band=0.05)])
def test_numpy_comparison_env_refuses_other_modes(config: EnvConfig) -> None:
    panel = random_panel(num_bars=30, num_assets=2, num_features=1, seed=0)
    with pytest.raises(SpecError, match="numpy comparison env"):
        ClassicNumpyEnv(panel, "train", config, seed=0)


def test_bench_env_cli_reports_throughput_memory_and_speedup() -> None:
    args = ["--envs", "16", "--assets", "4", "--features", "2", "--sessions", "1", "--steps", "10"]
    result = run_cli("bench", "env", *args, "--numpy-steps", "10", "--warmup-steps", "2", "--json")
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
    threads = torch.get_num_threads()
    try:
        text = run_cli("bench", "env", *args, "--numpy-steps", "10", "--threads", "1")
    finally:
        torch.set_num_threads(threads)
    assert text.exit_code == 0, text.stderr
    assert "env steps/s" in text.stdout
    assert "speed-up" in text.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--envs", "0"], "--envs must be >= 1"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--threads", "-1"], "--threads"),
        (["--device", "tpu"], "--device"),
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
