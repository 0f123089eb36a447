"""The pure step compiles (torch.compile, CPU inductor) and replays in a CUDA graph (GPU only)."""

from __future__ import annotations

import pytest
import torch

from env.panels import random_panel
from finpod.env import EnvConfig, GraphedRollout, TradingEnv
from finpod.errors import SpecError

PANEL = random_panel(num_bars=60, num_assets=3, num_features=2, seed=8)
CONFIG = EnvConfig(horizon_bars=6, half_spread_bps=5.0, max_participation=0.5)
STEPS = 20


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on the CPU CI machine)")
def test_cuda_graph_rollout_matches_eager_steps() -> None:
    cuda = torch.device("cuda")
    graphed_env = TradingEnv(PANEL, "train", CONFIG, num_envs=4, seed=1, device=cuda)
    eager_env = TradingEnv(PANEL, "train", CONFIG, num_envs=4, seed=1, device=cuda)
    graph = GraphedRollout(graphed_env, num_steps=STEPS)
    graph.actions.copy_(torch.rand(STEPS, 4, graphed_env.action_dim, device=cuda))
    graph.replay()
    for k in range(STEPS):
        _, reward, _, truncated, info = eager_env.step(graph.actions[k])
        torch.testing.assert_close(graph.rewards[k], reward)
        assert torch.equal(graph.truncated[k], truncated)
        torch.testing.assert_close(graph.cost_usd[k], info["cost_usd"])
    for ours, theirs in zip(graphed_env.state, eager_env.state, strict=True):
        torch.testing.assert_close(ours, theirs)
