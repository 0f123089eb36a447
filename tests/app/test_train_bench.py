"""``finpod bench train``: it trains PPO on the finpod env, counts the learner's FLOPs, fails cleanly."""

from __future__ import annotations

import json
from unittest import mock

import pytest
import torch

from clirun import run_cli
from finpod.bench.train_bench import measure_matmul_peak, run_train_bench
from finpod.errors import SpecError
from podracer.ppo import PPOConfig

TINY = ("--envs", "4", "--assets", "3", "--sessions", "1", "--warmup-rounds", "0", "--rounds", "1")
FAST_PEAK = ("--matmul-size", "64", "--matmul-repeats", "1")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_cli_json_reports_a_full_round_with_the_default_agent() -> None:
    r = run_cli("bench", "train", *TINY, *FAST_PEAK, "--cuda-matmul-precision", "high", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["matmul_precision"] == "highest"  # TF32 is for CUDA only: the CPU ignores it
    default = PPOConfig()
    assert out["env_steps"] == default.rollout_steps * 4
    assert out["obs_dim"] == 3 * 12 + 3 + 2
    assert out["action_dim"] == 4
    assert out["hidden_sizes"] == list(default.hidden_sizes)
    assert out["update_epochs"] == default.update_epochs
    assert out["samples_per_second"] == pytest.approx(out["env_steps"] / out["seconds"])
    assert out["matmul_utilisation"] == pytest.approx(
        out["learner_flops"] / out["seconds"] / out["peak_matmul_flops_per_second"]
    )
    assert out["peak_memory_bytes"] > 0


def test_cli_text_names_the_figures() -> None:
    r = run_cli("bench", "train", *TINY, *FAST_PEAK, "--threads", "1")
    assert r.exit_code == 0, r.stderr
    assert "(cpu, 1 threads)" in r.stdout
    assert "samples/s (learning included)" in r.stdout
    assert "of the measured float32 matmul peak" in r.stdout


def test_learner_flops_follow_the_network_shape() -> None:
    config = PPOConfig(rollout_steps=2, hidden_sizes=(16, 8), num_minibatches=2, update_epochs=3)
    result = run_train_bench(
        num_envs=5,
        num_assets=2,
        num_features=4,
        num_sessions=1,
        device=torch.device("cpu"),
        config=config,
        warmup_rounds=1,
        rounds=2,
        matmul_size=32,
        matmul_repeats=1,
        seed=0,
    )
    obs, act = 2 * 4 + 2 + 2, 3
    actor = obs * 16 + 16 * 8 + 8 * 2 * act
    critic = obs * 16 + 16 * 8 + 8 * 1
    forward = 2 * (actor + critic)
    first_layers = 2 * 2 * obs * 16
    transitions = 2 * 5
    per_round = forward * transitions + (3 * forward - first_layers) * transitions * 3
    assert result.obs_dim == obs
    assert result.learner_flops == 2 * per_round
    assert result.env_steps == 2 * transitions
    assert result.minibatch_size == 5


def test_matmul_peak_is_a_positive_rate() -> None:
    assert measure_matmul_peak(torch.device("cpu"), size=32, repeats=2) > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--envs", "0"), "--envs must be >= 1, got 0"),
        (("--rounds", "0"), "--rounds must be >= 1, got 0"),
        (("--matmul-size", "0"), "--matmul-size must be >= 1, got 0"),
        (("--threads", "-1"), "--threads must be >= 0 (0 = torch's default), got -1"),
        (("--device", "mps"), "--device 'mps' is not supported; use cpu or cuda"),
        (("--device", "tpu"), "--device 'tpu' is not a torch device; use cpu or cuda"),
        (
            ("--cuda-matmul-precision", "medium"),
            "--cuda-matmul-precision must be one of highest, high, got 'medium'",
        ),
    ],
)
def test_bad_options_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    r = run_cli("bench", "train", *args)
    assert r.exit_code == 2
    assert r.stderr.strip() == f"error: {message}"


def test_cuda_without_a_gpu_is_refused() -> None:
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        r = run_cli("bench", "train", "--device", "cuda")
    assert r.exit_code == 2
    assert "sees no CUDA GPU; use --device cpu" in r.stderr


def test_run_train_bench_refuses_negative_warmup() -> None:
    with pytest.raises(SpecError, match="--warmup-rounds must be >= 0"):
        run_train_bench(
            num_envs=1,
            num_assets=1,
            num_features=1,
            num_sessions=1,
            device=torch.device("cpu"),
            config=PPOConfig(),
            warmup_rounds=-1,
            rounds=1,
            matmul_size=8,
            matmul_repeats=1,
            seed=0,
        )
