"""The report folder: self-contained HTML, rebuild from saved files, short and empty inputs, bad inputs."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pydantic
import pytest

from finpod.errors import DataError
from finpod.report import ReportPaths, rebuild_report, write_report
from report.conftest import RUN_INFO, SPEC
from report.synthetic import make_backtest, make_entries, make_history

SAVED_FILES = (
    "metrics.json",
    "returns.csv",
    "equity.csv",
    "costs.csv",
    "turnover.csv",
    "positions.csv",
    "transactions.csv",
    "report_inputs.json",
)


def test_report_html_is_self_contained(report: ReportPaths) -> None:
    html = report.html.read_text(encoding="utf-8")
    sources = re.findall(r'src="([^"]*)"', html)
    assert len(sources) == len(report.plots) + len(report.tearsheets)
    assert all(source.startswith("data:image/png;base64,") for source in sources)
    assert not re.search(r"(href|src)=\"(https?:)?//", html)
    assert "<script" not in html
    assert "<link" not in html
    assert 'id="metrics-table"' in html
    assert RUN_INFO["run_id"] in html


def test_report_lists_every_file(report: ReportPaths) -> None:
    assert set(report.plots) == {
        "equity",
        "equity_log",
        "drawdown",
        "rolling_sharpe",
        "monthly_returns",
        "holdings",
        "leaderboard",
        "excess_return",
    }
    for path in [
        *report.plots.values(),
        report.html,
        report.metrics_json,
        report.returns_csv,
        report.positions_csv,
        report.transactions_csv,
    ]:
        assert path.stat().st_size > 0, path
    expected_sheets = {
        "pyfolio_annual_returns",
        "pyfolio_monthly_distribution",
        "pyfolio_return_quantiles",
        "pyfolio_rolling_volatility",
        "pyfolio_rolling_beta",
        "pyfolio_exposures",
        "pyfolio_concentration",
        "pyfolio_holdings",
        "pyfolio_gross_leverage",
        "pyfolio_turnover",
        "pyfolio_daily_volume",
        "pyfolio_turnover_histogram",
        "pyfolio_round_trip_lifetimes",
    }
    assert set(report.tearsheets) == expected_sheets
    for path in report.tearsheets.values():
        assert path.read_bytes().startswith(b"\x89PNG")
    assert not set(report.tearsheets) & set(report.plots)  # each panel once
    assert json.loads(report.metrics_json.read_text())["tearsheet_note"] is None
    assert report.validation_dir is not None
    assert (report.validation_dir / "returns.csv").is_file()


def test_rebuild_reproduces_the_saved_files(report: ReportPaths, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    copy.mkdir()
    for name in SAVED_FILES:
        (copy / name).write_bytes((report.root / name).read_bytes())
    (copy / "validation").mkdir()
    for source in report.validation_dir.iterdir():  # type: ignore[union-attr]
        (copy / "validation" / source.name).write_bytes(source.read_bytes())
    rebuilt = rebuild_report(copy)
    for name in SAVED_FILES:
        assert (copy / name).read_bytes() == (report.root / name).read_bytes(), name
    for name, path in rebuilt.plots.items():
        assert path.read_bytes() == report.plots[name].read_bytes(), name
    assert rebuilt.html.read_text(encoding="utf-8") == report.html.read_text(encoding="utf-8")


def test_short_segment_without_history_or_validation(tmp_path: Path) -> None:
    paths = write_report(
        tmp_path,
        backtest=make_backtest(num_sessions=15),
        validation=None,
        spec=SPEC,
        leaderboard_history=[],
        leaderboard_entries=[],
        run_info=RUN_INFO,
    )
    html = paths.html.read_text(encoding="utf-8")
    assert "rolling Sharpe is not drawn" in html
    assert "No leaderboard entries were recorded" in html
    assert 'id="comparison-table"' not in html
    assert paths.validation_dir is None
    assert set(json.loads(paths.metrics_json.read_text())["segments"]) == {"backtest"}


def test_single_session_notes_the_missing_tear_sheet(tmp_path: Path) -> None:
    paths = write_report(
        tmp_path,
        backtest=make_backtest(num_sessions=1),
        validation=None,
        spec={},
        leaderboard_history=make_history(2),
        leaderboard_entries=make_entries(),
        run_info={},
    )
    note = json.loads(paths.metrics_json.read_text())["tearsheet_note"]
    assert paths.tearsheets == {}
    assert "tear sheets skipped" in note
    assert note in paths.html.read_text(encoding="utf-8")


def test_nothing_is_printed_and_no_warning_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyfolio's IPython display calls and empyrical/pyfolio/pandas deprecations stay inside the report."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters_before = list(warnings.filters)
        write_report(
            tmp_path,
            backtest=make_backtest(num_sessions=30),
            validation=None,
            spec=SPEC,
            leaderboard_history=[],
            leaderboard_entries=[],
            run_info=RUN_INFO,
        )
        filters_after = list(warnings.filters)
    assert capsys.readouterr().out == ""
    assert [str(warning.message) for warning in caught] == []
    assert filters_after == filters_before  # silenced locally, never globally


def test_leaderboard_entry_missing_a_key_is_named(tmp_path: Path) -> None:
    entries = [{"rank": 1, "generation": 0, "parent_id": None, "score": 1.0}]
    with pytest.raises(pydantic.ValidationError, match="pod_id"):
        write_report(
            tmp_path,
            backtest=make_backtest(num_sessions=5),
            validation=None,
            spec={},
            leaderboard_history=[],
            leaderboard_entries=entries,
            run_info={},
        )


def test_rebuild_of_a_folder_without_a_report_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"metrics\.json: missing"):
        rebuild_report(tmp_path)


def test_rebuild_refuses_another_schema_version(report: ReportPaths, tmp_path: Path) -> None:
    payload = json.loads(report.metrics_json.read_text())
    payload["schema_version"] = 99
    (tmp_path / "metrics.json").write_text(json.dumps(payload))
    with pytest.raises(DataError, match="schema_version 99"):
        rebuild_report(tmp_path)


def test_rebuild_names_a_missing_csv(report: ReportPaths, tmp_path: Path) -> None:
    for name in ("metrics.json", "report_inputs.json"):
        (tmp_path / name).write_bytes((report.root / name).read_bytes())
    with pytest.raises(DataError, match=r"returns\.csv: missing report data file"):
        rebuild_report(tmp_path)
