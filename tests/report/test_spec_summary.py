"""The report's settings table shows what a run traded under, minute defaults included."""

from __future__ import annotations

from finpod.report.summary import spec_summary
from finpod.spec import Spec

SEGMENTS = {
    "train": ["2016-01-04", "2016-12-30"],
    "validation": ["2017-01-03", "2017-06-30"],
    "backtest": ["2017-07-03", "2017-12-29"],
}


def _rows(frequency: str) -> dict[str, str]:
    spec = Spec.from_dict({"name": "s", "frequency": frequency, "segments": SEGMENTS})
    return dict(spec_summary(spec.resolved_dict()))


def test_the_settings_table_says_whether_the_book_may_hold_cash() -> None:
    assert _rows("1min")["Fully invested (cash weight ignored)"] == "True"
    assert _rows("1d")["Fully invested (cash weight ignored)"] == "False"
    assert _rows("1d")["Training episodes start in"] == "cash"


def test_a_run_written_before_the_setting_leaves_the_row_out() -> None:
    resolved = Spec.from_dict({"name": "s", "frequency": "1d", "segments": SEGMENTS}).resolved_dict()
    del resolved["env"]["fully_invested"]
    assert "Fully invested (cash weight ignored)" not in dict(spec_summary(resolved))


def test_the_settings_table_says_what_the_trajectory_trader_averages() -> None:
    rows = _rows("1d")
    assert rows["Archive (snapshots the trajectory trader averages)"] == "32"
    assert rows["Archive keeps (score: the best-validated; even: spread over the run)"] == "score"
