"""A population's collection in blocks of static buffers (what a GPU records as CUDA graphs) equals
the plain step loop bit for bit: the same transitions, targets, metrics, env states, episode clocks
and random draws, across episode ends inside a block and a tail shorter than a block; on a CUDA
device the replayed graphs equal the eager loop. Real pieces: the minute-bar TradingEnv of several
pods joined into one, PPO agents with the flat MLP and the cross-sectional policy."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from podracer.population_collect import (
    COLLECT_BLOCK_STEPS,
    GRAPHED_COLLECT_VARIABLE,
    PodBatch,
    collect_population,
    graphed_collect_enabled,
)
from podracer.ppo import PPOAgent, PPOConfig
from podracer.stacked import StackedModel

CPU = torch.device("cpu")
CONFIG = EnvConfig(
    fee_rate=0.002, half_spread_bps=1.0, max_participation=0.1, rebalance_band=0.01, horizon_bars=40
)
"""40-bar episodes with random starts: with 8 envs a pod, episodes end inside most blocks."""
STEPS = 3 * COLLECT_BLOCK_STEPS + 5
"""An eager first block, two replayed blocks and a 5-step eager tail."""


@pytest.fixture(scope="module")
def minute_panel() -> Panel:
    """4 synthetic symbols, 4 minute sessions to train on."""
    return _minute_panel()


def _minute_panel() -> Panel:
    bars = synth_market(4, 4, "1min", seed=5, start="2019-01-02")
    first, last = bars["timestamp"].min().date(), bars["timestamp"].max().date()
    segments = {"train": (first, last)}
    return build_panel(
        bars, freq="1min", start=first, end=last, segments=segments, device=CPU, benchmark_symbol=None
    )


def _population(panel: Panel, device: torch.device, policy: str) -> tuple[list[PPOAgent], list[TradingEnv]]:
    entity = policy == "cross_sectional"
    base = PPOConfig(
        policy=policy,
        advantages="entity" if entity else "joint",
        hidden_sizes=(16, 16),
        rollout_steps=STEPS,
        num_minibatches=1,
        obs_noise=0.1 if entity else 0.0,  # the noise draws come from the pods' generators too
    )
    envs = [
        TradingEnv(panel, "train", CONFIG, 8, seed=10 + p, device=device, entity_info=entity)
        for p in range(3)
    ]
    agents = [
        PPOAgent(
            e.obs_dim,
            e.action_dim,
            e.action_low,
            e.action_high,
            dataclasses.replace(base, learning_rate=1e-3 * (p + 1)),
            device,
            p,
            layout=e.layout,
        )
        for p, e in enumerate(envs)
    ]
    for env in envs:
        env.reset(seed=0)
    return agents, envs


def _collect(
    panel: Panel, device: torch.device, policy: str, graphs: bool
) -> tuple[PodBatch, dict, list, list]:
    agents, envs = _population(panel, device, policy)
    batch, metrics, _ = collect_population(
        agents, envs, StackedModel([a.model for a in agents]), graphs=graphs
    )
    return batch, metrics, agents, envs


def _assert_same(panel: Panel, device: torch.device, policy: str) -> None:
    # the blocks first: nothing the plain loop initialises lazily helps their capture
    blocks, block_metrics, block_agents, block_envs = _collect(panel, device, policy, graphs=True)
    plain, plain_metrics, plain_agents, plain_envs = _collect(panel, device, policy, graphs=False)
    compared = 0
    for field in dataclasses.fields(PodBatch):
        ours, theirs = getattr(blocks, field.name), getattr(plain, field.name)
        assert (ours is None) == (theirs is None), field.name
        if ours is not None:
            assert torch.equal(ours, theirs), field.name
            compared += 1
    assert compared >= 6
    for name, value in plain_metrics.items():
        assert torch.equal(block_metrics[name], value), name
    assert float(plain_metrics["episodes_finished"].sum()) > 0, "no episode ended: the test proves less"
    for mine, theirs in zip(block_envs, plain_envs, strict=True):
        for a, b in zip(mine.state, theirs.state, strict=True):
            assert torch.equal(a, b)
        assert (mine._steps_left == theirs._steps_left).all()
    for mine, theirs in zip(block_agents, plain_agents, strict=True):
        assert torch.equal(mine.generator.get_state(), theirs.generator.get_state())
        torch.testing.assert_close(mine.obs_stats.mean, theirs.obs_stats.mean, rtol=0, atol=0)


@pytest.mark.parametrize("policy", ["mlp", "cross_sectional"])
def test_blocks_equal_the_plain_collection_loop(minute_panel: Panel, policy: str) -> None:
    _assert_same(minute_panel, CPU, policy)


def test_a_rollout_shorter_than_three_blocks_steps_eagerly(minute_panel: Panel) -> None:
    agents, envs = _population(minute_panel, CPU, "mlp")
    short = [dataclasses.replace(a.config, rollout_steps=2 * COLLECT_BLOCK_STEPS) for a in agents]
    for agent, config in zip(agents, short, strict=True):
        agent.config = config
    batch, _, _ = collect_population(agents, envs, StackedModel([a.model for a in agents]), graphs=True)
    assert batch.obs.shape[1] == 2 * COLLECT_BLOCK_STEPS * envs[0].num_envs


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the graph replays)")
@pytest.mark.parametrize("policy", ["mlp", "cross_sectional"])
def test_cuda_graph_replays_equal_the_eager_collection(
    minute_panel: Panel, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    replays = []
    replay = torch.cuda.CUDAGraph.replay

    def counted(graph: torch.cuda.CUDAGraph) -> None:
        replays.append(graph)
        replay(graph)

    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", counted)
    _assert_same(minute_panel.to(torch.device("cuda")), torch.device("cuda"), policy)
    assert len(replays) == STEPS // COLLECT_BLOCK_STEPS - 1  # the blocks after the eager first one


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the capture)")
def test_a_policy_that_syncs_with_the_host_fails_its_capture_with_the_fix() -> None:
    """In a child process: a failed capture leaves torch's generators unusable for the process."""
    child = subprocess.run(
        [sys.executable, "-c", "import test_graphed_collect as t; t.capture_a_syncing_policy()"],
        cwd=Path(__file__).parent,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert "refused with the fix" in child.stdout


def capture_a_syncing_policy() -> None:
    """A population whose sampling makes a host sync, collected with graphs on CUDA."""
    cuda = torch.device("cuda")
    agents, envs = _population(_minute_panel().to(cuda), cuda, "mlp")
    model = StackedModel([a.model for a in agents])
    sample = model.sample

    def syncing(dist: object, generators: object) -> torch.Tensor:
        raw = sample(dist, generators)  # type: ignore[arg-type]
        float(raw.sum())  # a host sync: illegal inside a capture
        return raw

    model.sample = syncing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match=GRAPHED_COLLECT_VARIABLE):
        collect_population(agents, envs, model, graphs=True)
    print("refused with the fix")


def test_graphed_collection_is_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GRAPHED_COLLECT_VARIABLE, raising=False)
    assert graphed_collect_enabled()
    monkeypatch.setenv(GRAPHED_COLLECT_VARIABLE, "0")
    assert not graphed_collect_enabled()
