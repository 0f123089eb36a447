"""Comparing run folders: a setting a run predates shows what the run trained with."""

from __future__ import annotations

import json
from pathlib import Path

import finpod
from finpod.rundir import RunDir, create_run_dir
from finpod.spec import Spec

SEGMENTS = {
    "train": ["2016-01-04", "2016-12-30"],
    "validation": ["2017-01-03", "2017-06-30"],
    "backtest": ["2017-07-03", "2017-12-29"],
}


def _finished(spec: Spec, reports: Path, sharpe: float) -> RunDir:
    run = create_run_dir(spec, reports, {"status": "done"})
    traders = {"best": {"metrics": {"sharpe_ratio": sharpe}}}
    metrics = {"segments": {"backtest": {"traders": traders}}}
    (run.root / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    return run


def _predate_fully_invested(run: RunDir) -> None:
    """Rewrite ``run``'s saved spec as a version before ``env.fully_invested`` wrote it."""
    saved = run.spec_toml.read_text(encoding="utf-8")
    run.spec_toml.write_text(saved.replace("fully_invested = true\n", ""), encoding="utf-8")
    raw = json.loads(run.spec_json.read_text(encoding="utf-8"))
    del raw["env"]["fully_invested"]
    run.spec_json.write_text(json.dumps(raw), encoding="utf-8")


def test_a_run_saved_before_a_setting_differs_only_where_it_trained_differently(tmp_path: Path) -> None:
    minute = Spec.from_dict({"name": "m", "frequency": "1min", "segments": SEGMENTS})
    old = _finished(minute, tmp_path, 1.0)
    _predate_fully_invested(old)  # trained with cash allowed, the only behaviour then
    with_cash = _finished(minute.with_(env={"fully_invested": False}), tmp_path, 2.0)
    invested = _finished(minute, tmp_path, 3.0)

    metrics, same = finpod.compare_runs([old.root, with_cash.root])
    assert list(same.index) == [], "the old run trained with cash allowed, as the new one states"
    assert metrics.loc[(with_cash.run_id, "best"), "sharpe_ratio"] == 2.0

    _, differs = finpod.compare_runs([old.root, invested.root])
    assert list(differs.index) == ["env.fully_invested"]
    assert list(differs.loc["env.fully_invested"]) == ["False", "True"]
