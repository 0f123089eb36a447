"""``tournament.cuda_matmul_precision``: validated, recorded in run.json, applied on CUDA only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from rich.console import Console
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from finpod.errors import SpecError
from finpod.matmul_precision import cuda_matmul_precision
from finpod.pipeline import main as pipeline
from finpod.pipeline.training import precision_agent_factory
from finpod.spec import Spec
from podracer import PodAgent
from podracer.ppo import PPOConfig


def test_the_option_defaults_to_full_float32_and_refuses_other_values(tmp_path: Path) -> None:
    spec = tiny_spec(tmp_path)
    assert spec.tournament.cuda_matmul_precision == "highest"
    assert spec.with_(tournament={"cuda_matmul_precision": "high"}).spec_hash() != spec.spec_hash()
    with pytest.raises(SpecError, match=r"tournament\.cuda_matmul_precision.*'highest' or 'high'"):
        Spec.from_dict({**spec.model_dump(mode="json"), "tournament": {"cuda_matmul_precision": "medium"}})


def test_a_cuda_device_trains_at_the_precision_then_restores_it() -> None:
    cuda = torch.device("cuda")  # only the device's type is read: no GPU needed
    before = torch.get_float32_matmul_precision()
    with cuda_matmul_precision(cuda, "high"):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before
    built: list[str] = []

    def build(config: PPOConfig, seed: int) -> PodAgent:
        built.append(torch.get_float32_matmul_precision())
        return agent

    agent = cast(PodAgent, object())
    try:
        assert precision_agent_factory(build, cuda, "high")(PPOConfig(), 0) is agent
    finally:
        torch.set_float32_matmul_precision(before)
    assert built == ["high"]  # a pod's process (a Ray worker) sets it before building its agent


def test_a_cpu_run_records_the_option_and_never_touches_the_precision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_report: list[dict[str, Any]]
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch, "set_float32_matmul_precision", calls.append)
    spec = tiny_spec(write_tiny_dataset(tmp_path / "data", tiny_bars(seed=7)), budget_env_steps=256)
    spec = spec.with_(tournament={"cuda_matmul_precision": "high"})
    result = pipeline.run(spec, out=tmp_path / "reports", console=Console(quiet=True))
    info = json.loads((result.run_dir / "run.json").read_text())
    assert (info["device"], info["cuda_matmul_precision"], info["status"]) == ("cpu", "high", "done")
    assert calls == []
    assert torch.get_float32_matmul_precision() == "highest"
