"""The pure step compiles (torch.compile, CPU inductor) and replays in CUDA graphs (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from env.panels import random_panel
from finpod.env import EnvConfig, GraphedRollout, TradingEnv
from finpod.env.trading_env import episode_ends_within
from finpod.errors import SpecError

PANEL = random_panel(num_bars=60, num_assets=3, num_features=2, seed=8)
CONFIG = EnvConfig(horizon_bars=6, half_spread_bps=5.0, max_participation=0.5)
STEPS = 20
GRAPH_STEPS = 4
"""Steps per graph replay: fewer than the horizon (6), so some replays see no episode end."""


def _rollout(env: TradingEnv) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    out: list[torch.Tensor] = []
    for _ in range(STEPS):
        actions = torch.rand(env.num_envs, env.action_dim, generator=generator).to(env.device)
        obs, reward, _, truncated, info = env.step(actions)
        out += [obs, reward, truncated, info["final_obs"], info["equity_usd"], info["cost_usd"]]
    return out


@pytest.mark.slow
def test_compiled_step_matches_the_eager_step() -> None:
    eager = TradingEnv(PANEL, "train", CONFIG, num_envs=4, seed=1)
    compiled = TradingEnv(PANEL, "train", CONFIG, num_envs=4, seed=1, compile_step=True)
    for ours, theirs in zip(_rollout(compiled), _rollout(eager), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-3)


def test_cuda_graph_rollout_refuses_a_cpu_env() -> None:
    with pytest.raises(SpecError, match="CUDA device"):
        GraphedRollout(TradingEnv(PANEL, "train", CONFIG, num_envs=2, seed=0), num_steps=4)


@pytest.mark.parametrize(
    ("steps_left", "num_steps", "ends"),
    [([6, 6], 5, False), ([6, 6], 6, True), ([1, 6], 1, True), ([2, 3], 1, False), ([4, 2], 3, True)],
)
def test_an_episode_ends_within_k_steps_when_some_clock_is_at_most_k(
    steps_left: list[int], num_steps: int, ends: bool
) -> None:
    assert episode_ends_within(np.array(steps_left, dtype=np.int64), num_steps) is ends


def test_the_clock_predicts_the_truncations_of_the_next_k_steps() -> None:
    """What GraphedRollout picks its graph by: the host clock, against the steps' own truncations."""
    env = TradingEnv(PANEL, "train", CONFIG, num_envs=3, seed=2)
    generator = torch.Generator().manual_seed(0)
    predicted, seen = [], []
    for chunk in range(8):
        if chunk == 3:  # clocks that differ between envs
            env.reset_envs(torch.tensor([True, False, False]))
        predicted.append(env.episode_ends_within(GRAPH_STEPS))
        truncated = [
            env.step(torch.rand(3, env.action_dim, generator=generator))[3] for _ in range(GRAPH_STEPS)
        ]
        seen.append(bool(torch.stack(truncated).any()))
    assert predicted == seen
    assert True in seen
    assert False in seen


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on the CPU CI machine)")
@pytest.mark.parametrize("compile_step", [False, True])
def test_cuda_graph_rollout_matches_eager_steps_bit_for_bit(compile_step: bool) -> None:
    """Replays of both graphs (advance-only, and autoreset across episode ends) equal eager steps."""
    cuda = torch.device("cuda")
    envs = [
        TradingEnv(PANEL, "train", CONFIG, num_envs=4, seed=1, device=cuda, compile_step=compile_step)
        for _ in range(2)
    ]
    graphed_env, eager_env = envs
    graph = GraphedRollout(graphed_env, num_steps=GRAPH_STEPS)
    kinds = []
    for replay in range(8):
        if replay == 4:  # clocks that differ between envs
            for env in envs:
                env.reset_envs(torch.tensor([False, True, False, False], device=cuda))
        graph.actions.copy_(torch.rand(GRAPH_STEPS, 4, graphed_env.action_dim, device=cuda))
        kind = graph.replay()
        kinds.append(kind)
        truncations = []
        for k in range(GRAPH_STEPS):
            _, reward, _, truncated, info = eager_env.step(graph.actions[k])
            assert torch.equal(graph.rewards[k], reward), (replay, kind, k)
            assert torch.equal(graph.truncated[k], truncated), (replay, kind, k)
            assert torch.equal(graph.cost_usd[k], info["cost_usd"]), (replay, kind, k)
            truncations.append(truncated)
        assert (kind == "step") == bool(torch.stack(truncations).any()), (replay, kind)
        for ours, theirs in zip(graphed_env.state, eager_env.state, strict=True):
            assert torch.equal(ours, theirs), (replay, kind)
    assert "advance" in kinds
    assert "step" in kinds
    assert graph.replays == {"advance": kinds.count("advance"), "step": kinds.count("step")}
