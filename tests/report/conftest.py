"""One realistic report written once per test session (figure generation dominates test time)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from finpod.report import ReportPaths, write_report
from report.synthetic import make_backtest, make_entries, make_history

SPEC: dict[str, Any] = {
    "name": "synthetic",
    "frequency": "1d",
    "universe": "all",
    "segments": {
        "train": ["2016-01-04", "2019-11-25"],
        "validation": ["2019-11-26", "2020-05-25"],
        "backtest": ["2020-05-26", "2021-05-26"],
    },
    "env": {"initial_cash_usd": 1_000_000.0, "fee_rate": 0.002, "half_spread_bps": 1.0},
}
RUN_INFO: dict[str, Any] = {"run_id": "20260101-000000-synthetic-0123abcd", "device": "cpu"}


@pytest.fixture(scope="session")
def report(tmp_path_factory: pytest.TempPathFactory) -> ReportPaths:
    """A full report: 250 backtest sessions, 125 validation sessions, 2 traders, 3 baselines."""
    out_dir: Path = tmp_path_factory.mktemp("report")
    return write_report(
        out_dir,
        backtest=make_backtest(),
        validation=make_backtest("validation", "2019-11-26", 125, seed=5),
        spec=SPEC,
        leaderboard_history=make_history(),
        leaderboard_entries=make_entries(),
        run_info=RUN_INFO,
    )


def require_chromium(what: str) -> None:
    """Skip where no Chromium exists (a user's machine); in CI (``CI`` set) a missing browser fails."""
    from finpod.report.browser import find_chromium

    if find_chromium() is not None:
        return
    message = f"no Chromium on PATH (install Debian's `chromium` to run the {what} test)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; .ci/run installs it, so CI must have it")
    pytest.skip(message)
