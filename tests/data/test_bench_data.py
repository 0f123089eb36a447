"""``finpod bench data`` at a tiny size: the JSON report has every field, and the figures add up."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from clirun import run_cli
from finpod.bench import data_bench


def test_bench_data_json_reports_every_stage_and_the_panel() -> None:
    result = run_cli("bench", "data", "--symbols", "3", "--days", "4", "--seed", "1", "--json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["bars"] == 3 * 4 * 390
    assert [stage["name"] for stage in report["stages"]] == ["synth", "write", "read", "panel"]
    for stage in report["stages"]:
        assert stage["seconds"] > 0
        assert stage["bars_per_second"] == report["bars"] / stage["seconds"]
        assert stage["peak_rss_bytes"] >= stage["rss_before_bytes"] > 0
        assert stage["peak_rss_increase_bytes"] == stage["peak_rss_bytes"] - stage["rss_before_bytes"]
    assert report["panel_bars_per_second"] == report["stages"][-1]["bars_per_second"]
    assert report["panel_shape"] == [4 * 390, 3, 12]
    t, m, f = report["panel_shape"]
    float32_tensors_bytes = 4 * (5 * t * m + t * m * f)
    assert report["panel_bytes"] > float32_tensors_bytes
    expected_ratio = report["stages"][-1]["peak_rss_increase_bytes"] / report["panel_bytes"]
    assert report["panel_peak_increase_ratio"] == expected_ratio
    assert report["cuda_peak_bytes"] is None
    assert report["device"] == "cpu"
    assert report["memory_method"]


def test_bench_data_text_names_bars_per_second_and_memory() -> None:
    result = run_cli("bench", "data", "--symbols", "2", "--days", "3")
    assert result.exit_code == 0, result.stderr
    assert "bars/s" in result.stdout
    assert "peak RSS" in result.stdout
    assert "x the panel" in result.stdout


def test_bench_data_rejects_too_few_sessions() -> None:
    result = run_cli("bench", "data", "--symbols", "2", "--days", "2")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --symbols must be >= 1 and --days >= 3")
    assert result.stderr.count("\n") == 1


def test_bench_data_rejects_an_unknown_device() -> None:
    result = run_cli("bench", "data", "--symbols", "2", "--days", "3", "--device", "tpu")
    assert result.exit_code == 2
    assert "error: --device 'tpu'" in result.stderr


def test_peak_measurement_sees_an_allocation_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    allocation_bytes = 200 * 2**20
    for linux_counter in (True, False):
        if not linux_counter:
            monkeypatch.setattr(data_bench, "_linux_peak_reset", lambda: False)
        with data_bench.measure_peak() as memory:
            block = np.ones(allocation_bytes // 8)
            assert block.sum() > 0
        del block
        before, peak = memory
        assert peak - before >= 0.9 * allocation_bytes, linux_counter


def test_panel_build_time_waits_for_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the panel stage's clock stops only after the kernels finished."""
    calls: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "synchronize", calls.append)
    panel = SimpleNamespace(device=torch.device("cuda", 0))
    assert data_bench._finished(panel) is panel  # type: ignore[arg-type]
    assert calls == [torch.device("cuda", 0)]
    assert data_bench._finished(SimpleNamespace(device=torch.device("cpu"))) is not None  # type: ignore[arg-type]
    assert len(calls) == 1
