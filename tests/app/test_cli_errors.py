"""User errors of ``finpod run``, ``finpod backtest`` and ``finpod report``: exit 2, one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from clirun import run_cli
from repo import REPO_ROOT


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "no/such/spec.toml"), "spec file not found"),
        (("backtest", "no/such/run"), "not a finpod run folder"),
        (("report", "no/such/run"), "not a finpod run folder"),
        (("backtest", str(REPO_ROOT), "--segment", "train"), "--segment"),
    ],
)
def test_user_errors_exit_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    result = run_cli(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert message in result.stderr
    assert result.stderr.strip().count("\n") == 0


def test_bad_spec_field_exits_2_naming_field_and_fix(tmp_path: Path) -> None:
    demo = (REPO_ROOT / "strategies" / "demo.toml").read_text()
    text = demo.replace("fee_rate = 0.0005", "fee_rate = -0.1")
    bad = tmp_path / "bad.toml"
    bad.write_text(text, encoding="utf-8")
    result = run_cli("run", str(bad), "--out", str(tmp_path / "reports"))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {bad}: env.fee_rate: must be greater than or equal to 0 (got -0.1); "
        "fix: set env.fee_rate (fee per trade as a fraction of traded notional), e.g. 0.002"
    )
    assert not (tmp_path / "reports").exists()


def test_error_text_in_brackets_is_printed_verbatim(tmp_path: Path) -> None:
    """The message is text, not rich markup: ``[first, last]`` must not vanish as a style tag."""
    text = (REPO_ROOT / "strategies" / "demo.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('train = ["2016-01-04"', 'train = ["2018-01-04"'), encoding="utf-8")
    result = run_cli("run", str(bad), "--out", str(tmp_path / "reports"))
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("fix: write [first, last]"), result.stderr


def test_resume_without_an_unfinished_run_is_a_user_error(tmp_path: Path) -> None:
    result = run_cli("run", str(REPO_ROOT / "strategies" / "demo.toml"), "--out", str(tmp_path), "--resume")
    assert result.exit_code == 2
    assert "no unfinished run of spec 'demo'" in result.stderr


def test_missing_dataset_exits_2_naming_the_fix(tmp_path: Path) -> None:
    text = (REPO_ROOT / "strategies" / "nasdaq100_daily_pooksoft.toml").read_text()
    spec_file = tmp_path / "pooksoft.toml"
    spec_file.write_text(text.replace('"../data/pooksoft_daily"', '"no_such_dataset"'))
    result = run_cli("run", str(spec_file), "--out", str(tmp_path / "reports"))
    assert result.exit_code == 2
    assert "data.path: dataset folder not found" in result.stderr
    assert "finpod data import" in result.stderr
    assert not (tmp_path / "reports").exists()


def test_backtest_rerun_of_a_run_still_training_is_refused(tmp_path: Path) -> None:
    """Peeking at the backtest segment before selection is over would be selection on test data."""
    from finpod.rundir import create_run_dir
    from finpod.spec import Spec

    run = create_run_dir(Spec.from_toml(REPO_ROOT / "strategies" / "demo.toml"), tmp_path, {"dataset": "x"})
    (run.tournament / "leaderboard").mkdir(parents=True)
    result = run_cli("backtest", str(run.root))
    assert result.exit_code == 2
    assert "still training, so its backtest segment stays unread" in result.stderr
    assert result.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("section", ["tournament", "env", "data.synthetic"])
def test_set_of_a_whole_section_to_a_value_is_one_line(section: str, tmp_path: Path) -> None:
    # `--set tournament=3` used to crash in Spec.with_ (an internal error); a section given a
    # value is the spec's own error, and its fix says to write a table.
    spec = REPO_ROOT / "strategies" / "demo.toml"
    result = run_cli("run", str(spec), "--out", str(tmp_path / "reports"), "--set", f"{section}=3")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: --set {section}=3: {spec}: {section}: must be a table (got 3); "
        f"fix: write [{section}] as a table of settings (see strategies/README.md)"
    )
    assert not (tmp_path / "reports").exists()


def test_run_of_a_folder_names_a_spec_inside_it(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text("", encoding="utf-8")
    result = run_cli("run", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {tmp_path}: a folder, not a spec file; fix: pass a .toml spec, e.g. {tmp_path / 'mine.toml'}"
    )
