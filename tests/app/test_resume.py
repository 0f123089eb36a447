"""``--resume``: a run killed mid-tournament continues in the same folder and finishes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from finpod.data.store import read_manifest
from finpod.errors import SpecError
from finpod.pipeline import main as pipeline
from finpod.pipeline.progress import TrainingMonitor
from finpod.pipeline.reruns import rerun_segment
from finpod.pipeline.trader_inputs import TRADER_INPUTS_FILE
from finpod.rundir import DATASET_HASH_KEY
from finpod.spec import Spec
from podracer import TournamentEvent
from podracer.orchestrator import read_events

ROUNDS_BEFORE_KILL = 2
BUDGET_ENV_STEPS = 1536


class Killed(Exception):
    """Stands for the process dying in the middle of the tournament."""


def test_resume_finishes_an_interrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_report: list[dict[str, Any]]
) -> None:
    spec = tiny_spec(
        write_tiny_dataset(tmp_path / "data", tiny_bars(seed=7)), budget_env_steps=BUDGET_ENV_STEPS
    )
    out = tmp_path / "reports"
    rounds = {"seen": 0}
    original = TrainingMonitor.__call__

    def dying(self: TrainingMonitor, event: TournamentEvent) -> None:
        original(self, event)
        if event.kind == "round_finished":
            rounds["seen"] += 1
            if rounds["seen"] == ROUNDS_BEFORE_KILL:
                raise Killed

    monkeypatch.setattr(TrainingMonitor, "__call__", dying)
    with pytest.raises(Killed):
        pipeline.run(spec, out=out, console=Console(quiet=True))
    (run_dir,) = out.iterdir()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "training"
    assert not no_report

    monkeypatch.setattr(TrainingMonitor, "__call__", original)
    result = pipeline.run(spec, out=out, resume=True, console=Console(quiet=True))
    assert result.run_dir == run_dir
    assert [p.name for p in out.iterdir()] == [run_dir.name]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "done"
    assert [call["out_dir"] for call in no_report] == [run_dir]
    assert result.report_html == run_dir / "report.html"
    finished = [e for e in read_events(run_dir / "tournament") if e["kind"] == "round_finished"]
    assert len(finished) > ROUNDS_BEFORE_KILL
    state = json.loads((run_dir / "tournament" / "state.json").read_text())
    assert state["finished"] is True

    finished_run = rf"no unfinished run .*: its run {run_dir.name} has finished, .*fix: drop --resume"
    with pytest.raises(SpecError, match=finished_run):
        pipeline.run(spec, out=out, resume=True, console=Console(quiet=True))
    other = spec.with_(seed=4)
    with pytest.raises(SpecError, match=r"no unfinished run of spec 'tiny' \(hash \w+\) under .*; fix: drop"):
        pipeline.run(other, out=out, resume=True, console=Console(quiet=True))


def test_resume_refuses_a_run_trained_on_other_features(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed under an earlier finpod (raw returns, ``logret_h``) is not resumed on the
    cross-sectional ``xs_logret_h``: its pods would go on learning from other inputs."""
    spec = tiny_spec(
        write_tiny_dataset(tmp_path / "data", tiny_bars(seed=7)), budget_env_steps=BUDGET_ENV_STEPS
    )
    out = tmp_path / "reports"
    run_dir = _killed_run(spec, out, monkeypatch)
    saved = run_dir / TRADER_INPUTS_FILE
    inputs = torch.load(saved, weights_only=True)
    inputs["feature_names"] = [name.removeprefix("xs_") for name in inputs["feature_names"]]
    torch.save(inputs, saved)
    before = saved.read_bytes()
    with pytest.raises(SpecError, match=r"'logret_1' is now 'xs_logret_1'.*fix: train it again"):
        pipeline.run(spec, out=out, resume=True, console=Console(quiet=True))
    assert saved.read_bytes() == before  # refused before anything was written
    assert json.loads((run_dir / "run.json").read_text())["status"] == "training"


def _killed_run(spec: Spec, out: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run ``spec`` until its first judged round, as if the process died there; the run folder."""
    original = TrainingMonitor.__call__

    def dying(self: TrainingMonitor, event: TournamentEvent) -> None:
        original(self, event)
        if event.kind == "round_finished":
            raise Killed

    monkeypatch.setattr(TrainingMonitor, "__call__", dying)
    with pytest.raises(Killed):
        pipeline.run(spec, out=out, console=Console(quiet=True))
    monkeypatch.setattr(TrainingMonitor, "__call__", original)
    (run_dir,) = out.iterdir()
    return run_dir


def test_resume_refuses_a_dataset_written_again_with_other_bars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_report: list[dict[str, Any]]
) -> None:
    """The run's dataset folder written again (a new fetch or import at the same path): its pods
    would go on learning on another market, and a rerun would not reproduce the run's figures."""
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=7))
    spec = tiny_spec(dataset, budget_env_steps=BUDGET_ENV_STEPS)
    out = tmp_path / "reports"
    run_dir = _killed_run(spec, out, monkeypatch)
    info = json.loads((run_dir / "run.json").read_text())
    assert info[DATASET_HASH_KEY] == read_manifest(dataset).sha256
    before = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}

    shutil.rmtree(dataset)
    write_tiny_dataset(dataset, tiny_bars(seed=8))
    refused = r"bars changed since run .* cannot resume .*fix: restore the dataset"
    with pytest.raises(SpecError, match=refused):
        pipeline.run(spec, out=out, resume=True, console=Console(quiet=True))
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == before

    shutil.rmtree(dataset)
    write_tiny_dataset(dataset, tiny_bars(seed=7))  # the bars it trained on: it resumes and finishes
    result = pipeline.run(spec, out=out, resume=True, console=Console(quiet=True))
    assert result.run_dir == run_dir

    shutil.rmtree(dataset)
    write_tiny_dataset(dataset, tiny_bars(seed=8))
    with pytest.raises(SpecError, match=r"bars changed since run .* cannot rerun"):
        rerun_segment(run_dir, "validation")


def test_a_resume_on_another_backend_records_its_own_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_report: list[dict[str, Any]]
) -> None:
    """The backend is not part of the spec hash (a run started on one resumes on another):
    ``run.json`` then says what the resumed process trained with, and what the earlier one did."""
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=7))
    spec = tiny_spec(dataset, budget_env_steps=BUDGET_ENV_STEPS)
    out = tmp_path / "reports"
    run_dir = _killed_run(spec.with_(tournament={"backend": "local"}), out, monkeypatch)
    first = json.loads((run_dir / "run.json").read_text())
    assert first["backend"] == "local"

    resumed = spec.with_(tournament={"backend": "processes", "torch_threads_per_pod": 1})
    assert resumed.spec_hash() == spec.spec_hash()
    pipeline.run(resumed, out=out, resume=True, console=Console(quiet=True))
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "done"
    assert info["backend"] == "processes"
    assert info["torch_threads"]["training"] == 1
    assert "backtest_steps" in info["torch_threads"]
    assert info["started_at"] == first["started_at"]
    assert "resumed_at" in info
    (earlier,) = info["earlier_processes"]
    assert earlier["backend"] == "local"
    assert earlier["torch_threads"] == first["torch_threads"]
    assert earlier["started_at"] == first["started_at"]
