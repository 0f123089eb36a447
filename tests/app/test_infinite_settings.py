"""A setting documented with ``inf`` (``env.max_participation = inf``: no volume cap) runs end to end."""

from __future__ import annotations

import json
from pathlib import Path

from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from clirun import run_cli


def test_max_participation_inf_runs_and_its_report_rebuilds(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=6))
    spec = tiny_spec(dataset, budget_env_steps=256).with_(env={"max_participation": float("inf")})
    spec_file = tmp_path / "inf.toml"
    spec_file.write_text(spec.to_toml(), encoding="utf-8")
    result = run_cli("-q", "run", str(spec_file), "--out", str(tmp_path / "reports"), "--no-report")
    assert result.exit_code == 0, result.stderr
    (run,) = (tmp_path / "reports").iterdir()
    inputs = json.loads((run / "report_inputs.json").read_text())
    assert inputs["spec"]["env"]["max_participation"] == "inf"
    rebuilt = run_cli("-q", "report", str(run))
    assert rebuilt.exit_code == 0, rebuilt.stderr
