"""``tournament.backend = "population"`` end to end: the real pipeline, scored pods, run.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

import finpod
import finpod.pipeline.backend as backend_module
from finpod.backtest.chunked import chunk_plan
from finpod.data.panel import Panel
from finpod.env.trading_env import TradingEnv
from finpod.pipeline.backend import resolved_backend
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import load_bars, selection_panel, universe_symbols
from finpod.pipeline.training import (
    TRAIN_SEGMENT,
    ValidationScore,
    agent_factory,
    deterministic_policy,
)
from podracer import Leaderboard
from podracer.population import PopulationPolicy

SCORE_RTOL = 1e-5
"""A pod scored in the population's batched pass vs alone: batched matmuls round differently."""


def test_a_population_run_trains_selects_and_records_its_threads(
    tmp_path: Path, no_report: list[dict[str, Any]]
) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(0))
    spec = tiny_spec(dataset, budget_env_steps=3072).with_(
        tournament={"backend": "population", "pool_size": 3, "torch_threads_per_pod": 1}
    )
    result = finpod.run(spec, out=tmp_path / "reports")
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["torch_threads"]["training"] == 1
    assert "best" in result.backtest.traders
    events = [json.loads(line) for line in (result.run_dir / "tournament" / "events.jsonl").open()]
    rounds = [e for e in events if e["kind"] == "round_finished"]
    assert len({e["pod_id"] for e in rounds}) >= 3
    assert sum(e["data"]["round_env_steps"] for e in rounds) >= 3072 - 3 * 128

    # Each leaderboard score (from the batched validation pass) equals that snapshot scored alone.
    panel = _panel(spec, dataset)
    device = torch.device("cpu")
    context = RunContext.of(spec, panel, device)
    score = ValidationScore(panel, context.eval_config, device)
    board = Leaderboard.open(result.run_dir / "tournament" / "leaderboard")
    assert board.entries
    for rank, entry in enumerate(board.entries):
        agent = board.load_agent(rank, context.agent_factory)
        assert score(deterministic_policy(agent)) == pytest.approx(entry.score, rel=SCORE_RTOL, abs=1e-6)


def _panel(spec: finpod.Spec, dataset: Path) -> Panel:
    bars = load_bars(dataset)
    return selection_panel(spec, bars, universe_symbols(spec, bars), "cpu")


@pytest.mark.parametrize(("chunks", "warmup_bars"), [(1, 0), (4, 5)])
def test_score_many_equals_each_policy_scored_alone(tmp_path: Path, chunks: int, warmup_bars: int) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(1))
    spec = tiny_spec(dataset)
    panel = _panel(spec, dataset)
    device = torch.device("cpu")
    probe = TradingEnv(
        panel, TRAIN_SEGMENT, spec.env_config(random_start=True), 4, 0, device, entity_info=True
    )
    make = agent_factory(probe.shape, device)
    agents = [make(spec.agent_config(), seed) for seed in range(3)]
    for index, agent in enumerate(agents):  # different weights and statistics per pod
        for _ in range(index + 1):
            agent.train_round(probe)
    score = ValidationScore(panel, spec.env_config(random_start=False), device, chunks, warmup_bars)
    first, stop = panel.segment("validation")
    assert chunk_plan(stop - first, chunks, warmup_bars).num_chunks == chunks  # one env of P x K accounts
    policies = [deterministic_policy(agent) for agent in agents]
    alone = [score(policy) for policy in policies]
    together = score.score_many(policies, PopulationPolicy(agents))
    assert together == pytest.approx(alone, rel=SCORE_RTOL, abs=1e-6)
    assert len(set(alone)) == 3, "the pods scored alike: the test proves nothing"


def test_auto_is_the_population_on_a_gpu_and_worker_processes_on_a_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tiny_spec(tmp_path)
    assert spec.tournament.backend == "auto"
    assert resolved_backend(spec, torch.device("cpu")) == (
        "processes" if sys.platform.startswith("linux") else "local"
    )
    assert resolved_backend(spec, torch.device("cuda")) == "population"
    fused = spec.with_(tournament={"learners": 2})
    assert resolved_backend(fused, torch.device("cuda")) == "local"
    assert resolved_backend(fused, torch.device("cpu")) == "local"
    threaded = spec.with_(tournament={"torch_threads_per_pod": 2})
    assert resolved_backend(threaded, torch.device("cpu")) == "local"  # OpenMP pools are not forked
    monkeypatch.setattr(backend_module, "default_start_method", lambda threads: "spawn")  # macOS
    assert resolved_backend(spec, torch.device("cpu")) == "local"
    chosen = spec.with_(tournament={"backend": "population"})
    assert resolved_backend(chosen, torch.device("cpu")) == "population"


def test_a_gpu_population_is_one_batched_computation_whatever_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found on an H200 (16 cores): the CPU rule (cores over torch threads) split a pool of four
    into four one-pod populations in threads, 139k env steps/s against 400k+ for one of four."""
    spec = tiny_spec(tmp_path).with_(tournament={"backend": "population"})
    monkeypatch.setattr(backend_module.os, "cpu_count", lambda: 16)
    assert backend_module.population_workers(spec, torch.device("cuda")) == 1
    assert backend_module.population_workers(spec, torch.device("cpu")) == 16
    threaded = spec.with_(tournament={"torch_threads_per_pod": 4})
    assert backend_module.population_workers(threaded, torch.device("cpu")) == 4
    with backend_module.pod_backend(spec, torch.device("cuda")) as population:
        assert isinstance(population, backend_module.PopulationBackend)
        assert population.workers == 1
