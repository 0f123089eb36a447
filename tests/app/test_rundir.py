"""Run folders: ids, saved spec, status, and which run ``--resume`` picks."""

from __future__ import annotations

from pathlib import Path

import pytest
from durable import record_durable_writes

from finpod.errors import SpecError
from finpod.rundir import create_run_dir, find_resumable, load_spec_file, reports_root
from finpod.spec import Spec
from repo import REPO_ROOT

DEMO = REPO_ROOT / "strategies" / "demo.toml"


def test_run_ids_are_unique_and_resume_picks_the_newest_unfinished(tmp_path: Path) -> None:
    spec = Spec.from_toml(DEMO)
    first = create_run_dir(spec, tmp_path, {"dataset": "x"})
    second = create_run_dir(spec, tmp_path, {"dataset": "x"})
    assert first.root != second.root
    assert first.run_id.endswith(f"-demo-{spec.spec_hash()}")
    assert Spec.from_toml(first.spec_toml).resolved_dict() == spec.resolved_dict()
    assert find_resumable(spec, tmp_path).root == second.root
    second.set_status("done")
    assert find_resumable(spec, tmp_path).root == first.root
    first.set_status("done")
    with pytest.raises(SpecError, match="no unfinished run"):
        find_resumable(spec, tmp_path)
    other = spec.with_(seed=spec.seed + 1)
    create_run_dir(other, tmp_path, {"dataset": "x"})
    with pytest.raises(SpecError, match="no unfinished run"):
        find_resumable(spec, tmp_path)


def test_reports_root_is_the_current_folder_or_finpod_home_never_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FINPOD_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert reports_root(None) == tmp_path.resolve() / "reports"
    assert reports_root(Path("out")) == tmp_path.resolve() / "out"
    monkeypatch.setenv("FINPOD_HOME", str(tmp_path / "home"))
    assert reports_root(None) == tmp_path.resolve() / "home" / "reports"
    assert reports_root(Path("out")) == tmp_path.resolve() / "out"


def test_run_files_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spec.toml, spec.json and run.json go through the durable writer: a crash never truncates them."""
    from finpod import rundir

    written = record_durable_writes(monkeypatch, rundir, "write_text_atomic")
    run = create_run_dir(Spec.from_toml(DEMO), tmp_path, {"dataset": "x"})
    run.set_status("done")
    assert sorted(written) == ["run.json", "run.json", "spec.json", "spec.toml"]
    assert sorted(p.name for p in run.root.iterdir()) == ["run.json", "spec.json", "spec.toml"]


def test_a_saved_minute_spec_that_predates_fully_invested_loads_as_it_was_trained(tmp_path: Path) -> None:
    segments = {
        "train": ["2016-01-04", "2016-12-30"],
        "validation": ["2017-01-03", "2017-06-30"],
        "backtest": ["2017-07-03", "2017-12-29"],
    }
    minute = Spec.from_dict({"name": "m", "frequency": "1min", "segments": segments})
    assert minute.env.fully_invested, "the minute default"
    run = create_run_dir(minute, tmp_path, {"status": "done"})
    assert run.load_spec().env.fully_invested, "a run that saved the setting keeps it"
    saved = run.spec_toml.read_text(encoding="utf-8")
    assert "fully_invested = true" in saved
    run.spec_toml.write_text(saved.replace("fully_invested = true\n", ""), encoding="utf-8")
    older = run.load_spec()
    assert older.env.fully_invested is False, "trained before the setting existed: cash allowed"
    assert Spec.from_toml(run.spec_toml).env.fully_invested, "a spec file silent on it gets the default"
    resumed = load_spec_file(run.spec_toml)  # `finpod run <run>/spec.toml --resume` finds the run
    assert resumed.env.fully_invested is False
    assert resumed.spec_hash() == older.spec_hash()
    elsewhere = tmp_path / "copy" / "spec.toml"
    elsewhere.parent.mkdir()
    elsewhere.write_text(run.spec_toml.read_text(encoding="utf-8"), encoding="utf-8")
    assert load_spec_file(elsewhere).env.fully_invested, "outside a run folder: a spec file like any"
    daily_spec = minute.with_(frequency="1d", name="d")
    daily = create_run_dir(daily_spec, tmp_path, {"status": "done"})
    assert daily.load_spec().spec_hash() == daily_spec.spec_hash()
    assert daily.load_spec().env.fully_invested is False


def test_a_saved_spec_that_predates_the_archive_settings_loads_as_it_was_trained(tmp_path: Path) -> None:
    spec = Spec.from_toml(DEMO)
    assert (spec.tournament.archive_size, spec.tournament.archive_rule) == (32, "score"), "the defaults"
    for before, archive_size in (({"archive_size": 16}, 16), ({"archive_size": 0}, 0)):
        trained = spec.with_(tournament={**before, "archive_rule": "even"})
        run = create_run_dir(trained, tmp_path, {"status": "running"})
        saved = run.spec_toml.read_text(encoding="utf-8")
        assert 'archive_rule = "even"' in saved
        without_rule = saved.replace('archive_rule = "even"\n', "")
        if archive_size == 0:  # a run from before either setting
            without_rule = without_rule.replace("archive_size = 0\n", "")
        run.spec_toml.write_text(without_rule, encoding="utf-8")
        older = run.load_spec()
        assert (older.tournament.archive_size, older.tournament.archive_rule) == (archive_size, "even")
        assert older.spec_hash() == trained.spec_hash()
        resumed = load_spec_file(run.spec_toml)  # `finpod run <run>/spec.toml --resume` finds the run
        assert find_resumable(resumed, tmp_path).root == run.root
        run.set_status("done")


def test_a_saved_spec_that_predates_the_pick_default_deploys_best(tmp_path: Path) -> None:
    """Paper trading deployed ``best`` before the pick became the default: an older run's spec.toml
    without ``[paper] trader`` reads as best; one that saved it keeps what it saved."""
    spec = Spec.from_toml(DEMO)
    assert spec.paper.trader == "pick", "the default"
    run = create_run_dir(spec, tmp_path, {"status": "done"})
    saved = run.spec_toml.read_text(encoding="utf-8")
    assert 'trader = "pick"' in saved
    assert run.load_spec().paper.trader == "pick"
    run.spec_toml.write_text(saved.replace('trader = "pick"\n', ""), encoding="utf-8")
    older = run.load_spec()
    assert older.paper.trader == "best"
    assert older.spec_hash() == spec.spec_hash(), "a deployment setting: the run is the same run"


def test_make_env_on_a_run_s_saved_spec_trades_as_the_run_trained(tmp_path: Path) -> None:
    import finpod

    segments = {
        "train": ["2021-02-01", "2021-02-05"],
        "validation": ["2021-02-08", "2021-02-09"],
        "backtest": ["2021-02-10", "2021-02-11"],
    }
    synthetic = {"n_symbols": 2, "n_days": 10, "start_date": "2021-02-01"}
    minute = Spec.from_dict(
        {"name": "m", "frequency": "1min", "segments": segments, "data": {"synthetic": synthetic}}
    )
    run = create_run_dir(minute, tmp_path / "reports", {"status": "done"})
    saved = run.spec_toml.read_text(encoding="utf-8")
    run.spec_toml.write_text(saved.replace("fully_invested = true\n", ""), encoding="utf-8")
    env = finpod.make_env(run.spec_toml, num_envs=1, data_root=tmp_path / "data")
    assert env.env.config.fully_invested is False, "trained before the setting: cash allowed"
