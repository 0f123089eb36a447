"""A backtest shorter than the rolling windows: no empty panel, a fitted window or a note instead."""

from __future__ import annotations

import json
from pathlib import Path

from finpod.report import write_report
from finpod.report.plots import ROLLING_SHARPE_WINDOW_SESSIONS
from report.synthetic import make_backtest, make_entries, make_history


def test_short_backtest_fits_the_rolling_windows_and_never_draws_an_empty_panel(tmp_path: Path) -> None:
    sessions = 40  # shorter than pyfolio's 6-month windows and finpod's quarter
    paths = write_report(
        tmp_path,
        backtest=make_backtest(num_sessions=sessions),
        validation=None,
        spec={},
        leaderboard_history=make_history(3),
        leaderboard_entries=make_entries(),
        run_info={},
    )
    assert "pyfolio_rolling_volatility" in paths.tearsheets
    html = paths.html.read_text(encoding="utf-8")
    assert f"Rolling volatility, {sessions // 2}-session window" in html
    assert f"{sessions // 2}-session window" in html  # finpod's rolling Sharpe fits the same window
    assert sessions // 2 < ROLLING_SHARPE_WINDOW_SESSIONS
    assert "less than a year" in html
    note = json.loads(paths.metrics_json.read_text())["tearsheet_note"]
    if note is not None:  # whatever pyfolio could not draw is said on the page, not left empty
        assert note in html


def test_very_short_backtest_hides_rolling_panels_with_a_note(tmp_path: Path) -> None:
    paths = write_report(
        tmp_path,
        backtest=make_backtest(num_sessions=12),
        validation=None,
        spec={},
        leaderboard_history=make_history(3),
        leaderboard_entries=make_entries(),
        run_info={},
    )
    assert "pyfolio_rolling_volatility" not in paths.tearsheets
    note = json.loads(paths.metrics_json.read_text())["tearsheet_note"]
    assert "too few for a rolling window" in note
    assert "too few for a rolling window" in paths.html.read_text(encoding="utf-8")
