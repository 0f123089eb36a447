"""CLI conventions: --json on stdout, human text on stderr, --set, --no-report, choices, runs ls|compare."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny import expected_traders, tiny_bars, tiny_spec, write_tiny_dataset

from clirun import run_cli


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("conventions")
    dataset = write_tiny_dataset(root / "data", tiny_bars(seed=9))
    path = root / "tiny.toml"
    path.write_text(tiny_spec(dataset).with_(tournament={"pool_size": 2}).to_toml(), encoding="utf-8")
    return path


def test_run_json_set_no_report_then_report_backtest_and_runs(spec_file: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    common = ("--out", str(reports), "--no-report", "--json", "--set", "tournament.budget_env_steps=768")
    first = run_cli("run", str(spec_file), *common)
    assert first.exit_code == 0, first.stderr
    summary = json.loads(first.stdout)  # stdout is the JSON document and nothing else
    run_dir = Path(summary["run_dir"])
    assert summary["status"] == "done"
    assert summary["report_html"] is None
    assert not (run_dir / "report.html").exists()
    assert set(summary["traders"]) == set(expected_traders(summary["traders"]))
    assert "sharpe_ratio" in summary["traders"]["best"]
    assert json.loads((run_dir / "spec.json").read_text())["tournament"]["budget_env_steps"] == 768
    # human text went to stderr, untruncated: the widest table line is longer than a terminal's 80
    assert "ensemble_top2" in first.stderr
    assert max(len(line) for line in first.stderr.splitlines()) > 80

    rendered = run_cli("report", str(run_dir), "--json")
    assert rendered.exit_code == 0, rendered.stderr
    assert Path(json.loads(rendered.stdout)["report_html"]).is_file()

    csv_dir = tmp_path / "csv"
    rerun = run_cli("backtest", str(run_dir), "--segment", "validation", "--out", str(csv_dir), "--json")
    assert rerun.exit_code == 0, rerun.stderr
    assert json.loads(rerun.stdout)["segment"] == "validation"
    assert (csv_dir / "returns.csv").is_file()

    quiet = run_cli(
        "-q",
        "run",
        str(spec_file),
        *common[:-2],
        "--set",
        "seed=4",
        "--set",
        "tournament.budget_env_steps=768",
    )
    assert quiet.exit_code == 0, quiet.stderr
    assert quiet.stderr == ""
    second = Path(json.loads(quiet.stdout)["run_dir"])

    listed = run_cli("runs", "ls", str(reports), "--json")
    assert listed.exit_code == 0, listed.stderr
    assert sorted(row["run_id"] for row in json.loads(listed.stdout)) == sorted([run_dir.name, second.name])
    table = run_cli("runs", "ls", str(reports))
    assert run_dir.name in table.stdout  # full run ids: nothing cut to the terminal width
    compared = run_cli("runs", "compare", str(run_dir), str(second))
    assert compared.exit_code == 0, compared.stderr
    assert "settings that differ" in compared.stdout
    assert "seed" in compared.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("tournament.budget_env_step=5", "budget_env_step: unknown field"),
        ("env.fee_rate=-1", "env.fee_rate"),
        ("nonsense", "write section.key=value"),
    ],
)
def test_bad_set_is_one_line_naming_the_override(spec_file: Path, override: str, message: str) -> None:
    result = run_cli("run", str(spec_file), "--set", override)
    assert result.exit_code == 2
    assert "--set" in result.stderr
    assert message in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_enumerations_are_choices(spec_file: Path) -> None:
    result = run_cli("backtest", str(spec_file.parent), "--segment", "train")
    assert result.exit_code == 2
    assert "'train' is not one of 'validation', 'backtest'" in result.stderr
