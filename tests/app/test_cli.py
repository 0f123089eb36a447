"""``finpod run``, ``finpod backtest`` and ``finpod report`` through the real CLI entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import ray
from engine._ray_cluster import LocalCluster
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from clirun import run_cli
from finpod.rundir import RunDir


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny run made by ``finpod run SPEC --out DIR``; returns its run folder."""
    root = tmp_path_factory.mktemp("cli")
    dataset = write_tiny_dataset(root / "data", tiny_bars(seed=7))
    spec_file = root / "tiny.toml"
    spec_file.write_text(tiny_spec(dataset).to_toml(), encoding="utf-8")
    result = run_cli("run", str(spec_file), "--out", str(root / "reports"))
    assert result.exit_code == 0, result.stderr
    (run_dir,) = (root / "reports").iterdir()
    assert f"report: {run_dir / 'report.html'}" in result.stdout
    for column in ("trader", "Sharpe", "max DD", "Calmar", "val. Sharpe"):
        assert column in result.stdout
    for trader in ("best", "ensemble_top2", "equal_weight", "market", "cash"):
        assert trader in result.stdout
    pick = json.loads((run_dir / "metrics.json").read_text())["pick"]
    assert pick["trader"] in ("best", "equal_weight")
    assert pick["sentence"] in result.stdout  # the run's pick, after the verdicts
    assert 'id="pick"' in (run_dir / "report.html").read_text()
    return run_dir


def test_run_folder_holds_spec_tournament_tensorboard_and_report(finished_run: Path) -> None:
    info = json.loads((finished_run / "run.json").read_text())
    assert info["status"] == "done"
    assert 1 <= info["alignment_threads"] <= 8  # recorded: the panels' arrays do not depend on it
    steps = info["torch_threads"]["backtest_steps"]  # the traders' pass: steps at each thread count
    assert set(steps) == {"validation", "backtest"}
    for segment, by_threads in steps.items():
        equity_rows = len(
            (finished_run / ("validation" if segment == "validation" else ""))
            .joinpath("equity.csv")
            .read_text()
            .splitlines()
        )
        assert all(int(count) >= 1 for count in by_threads), segment
        assert sum(by_threads.values()) == equity_rows - 2, segment  # header, and the first bar is cash
    assert finished_run.name.endswith(f"-tiny-{info['spec_hash']}")
    assert (finished_run / "spec.toml").is_file()
    assert json.loads((finished_run / "spec.json").read_text())["name"] == "tiny"
    assert (finished_run / "tournament" / "leaderboard" / "index.json").is_file()
    events = EventAccumulator(str(finished_run / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"tournament/best_validation_score", "tournament/env_steps_per_s", "pods/validation_score"} <= tags
    assert (finished_run / "report.html").is_file()
    assert (finished_run / "metrics.json").is_file()
    for folder in (finished_run, finished_run / "validation"):
        for name in ("returns", "equity", "costs", "turnover", "positions", "transactions"):
            assert (folder / f"{name}.csv").is_file()


def test_a_run_on_a_ray_cluster_writes_what_a_local_run_writes(
    finished_run: Path, ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    spec_file = finished_run.parent.parent / "tiny.toml"
    result = run_cli(
        "run", str(spec_file), "--out", str(tmp_path), "--backend", "ray", "--address", ray_cluster.address
    )
    assert result.exit_code == 0, result.stderr
    (ray_run,) = tmp_path.iterdir()
    assert ray_run.name.split("-", 2)[2] == finished_run.name.split("-", 2)[2]  # same spec hash
    assert _listing(ray_run) == _listing(finished_run)
    for name in ("metrics.json", "report_inputs.json", "tournament/leaderboard/index.json"):
        assert _shape(json.loads((ray_run / name).read_text())) == _shape(
            json.loads((finished_run / name).read_text())
        ), name
    for column in ("trader", "Sharpe", "max DD", "Calmar", "val. Sharpe", "ensemble_top2", "market"):
        assert column in result.stdout
    assert json.loads((ray_run / "spec.json").read_text())["tournament"]["backend"] == "ray"
    ray.init(address=ray_cluster.address, log_to_driver=False)  # the GCS remembers every actor
    try:
        workers = [a for a in ray._private.state.actors().values() if a["ActorClassName"] == "PodWorker"]
    finally:
        ray.shutdown()
    assert workers
    assert {w["Address"]["IPAddress"] for w in workers} == {"127.0.0.1"}


def test_a_run_of_populations_on_ray_workers_writes_what_a_local_run_writes(
    finished_run: Path, ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """``pods_per_worker = 2``: each Ray actor trains two pods in lockstep (0.5 CPU a pod: one actor a
    node of the test cluster)."""
    spec_file = finished_run.parent.parent / "tiny.toml"
    result = run_cli(
        "run",
        str(spec_file),
        "--out",
        str(tmp_path),
        "--backend",
        "ray",
        "--address",
        ray_cluster.address,
        "--set",
        "tournament.pods_per_worker=2",
        "--set",
        "tournament.cpus_per_pod=0.5",
    )
    assert result.exit_code == 0, result.stderr
    (ray_run,) = tmp_path.iterdir()
    assert ray_run.name.split("-", 2)[2] == finished_run.name.split("-", 2)[2]  # placement: same spec hash
    assert _listing(ray_run) == _listing(finished_run)
    info = json.loads((ray_run / "run.json").read_text())
    assert info["torch_threads"]["training"] == 1  # the actor's reservation: 2 pods x 0.5 CPU
    ray.init(address=ray_cluster.address, log_to_driver=False)
    try:
        found = ray._private.state.actors().values()
        actors = [a for a in found if a["ActorClassName"] == "PopulationWorker"]
    finally:
        ray.shutdown()
    assert actors


def _listing(run_dir: Path) -> set[str]:
    """A run folder's files, snapshot digests and event-file names blanked out (reruns left out)."""
    names = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()}
    return {
        re.sub(
            r"round-\d+-pod-\d+-[0-9a-f]+\.pt$",
            "round.pt",
            re.sub(r"pod-\d+-v\d+-[0-9a-f]+\.pt$", "pod.pt", re.sub(r"tfevents.*", "tfevents", name)),
        )
        for name in names
        if not name.startswith("rerun")
    }


def _shape(value: object) -> object:
    """The keys of nested dicts and the element shape of lists, without the values."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return "value"


def test_backtest_rerun_reproduces_the_saved_returns(finished_run: Path) -> None:
    result = run_cli("backtest", str(finished_run), "--segment", "backtest")
    assert result.exit_code == 0, result.stderr
    assert "backtest 2019-10-01 .. 2019-12-31" in result.stdout
    returns = pd.read_csv(finished_run / "rerun" / "backtest" / "returns.csv", index_col=0)
    assert {"best", "ensemble_top2", "equal_weight", "linear", "market", "cash"} <= set(returns.columns)
    original = pd.read_csv(finished_run / "returns.csv", index_col=0)
    pd.testing.assert_frame_equal(returns, original)
    again = run_cli("backtest", str(finished_run), "--segment", "validation")
    assert again.exit_code == 0, again.stderr
    assert "validation 2019-07-01 .. 2019-09-30" in again.stdout
    validation = pd.read_csv(finished_run / "rerun" / "validation" / "returns.csv", index_col=0)
    original = pd.read_csv(finished_run / "validation" / "returns.csv", index_col=0)
    pd.testing.assert_frame_equal(validation, original)


def test_report_rebuilds(finished_run: Path) -> None:
    html = finished_run / "report.html"
    html.unlink()
    result = run_cli("report", str(finished_run))
    assert result.exit_code == 0, result.stderr
    assert html.is_file()
    assert str(html) in result.stdout
    RunDir(finished_run).verify_integrity()  # the rebuild wrote the very parts the run recorded
