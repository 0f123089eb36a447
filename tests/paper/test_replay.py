"""Parity: the live code path replayed on recorded bars equals the backtest, bar for bar."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from finpod.cli import app
from finpod.errors import SpecError
from finpod.paper.journal import Journal
from finpod.paper.replay import EQUITY_RTOL, FEATURE_TOLERANCE, WEIGHT_TOLERANCE, replay
from tests.app.tiny import SEGMENTS
from tests.paper.conftest import HALF_DAY_MINUTES, MINUTE_SEGMENTS

START, END = SEGMENTS["backtest"]


def test_best_replay_matches_backtest(tiny_run: Path) -> None:
    result = replay(tiny_run, START, END, "best")
    n = len(result.timestamps)
    assert n > 50
    assert result.replay_weights.shape == result.backtest_weights.shape == (n - 1, 4)
    assert result.feature_max_abs_diff <= FEATURE_TOLERANCE
    assert result.weight_max_abs_diff <= WEIGHT_TOLERANCE
    assert result.equity_max_rel_diff <= EQUITY_RTOL
    assert result.matches
    assert np.ptp(result.backtest_equity_usd) > 0  # the trader did trade
    with Journal.open(result.journal) as journal:
        assert len(journal.decisions()) == n - 1
        assert journal.fills(), "the replay's orders went through the journal"
        assert not journal.pending_orders()


def test_ensemble_replay_matches_backtest_through_the_cli(tiny_run: Path) -> None:
    args = [
        "paper",
        "replay",
        str(tiny_run),
        "--trader",
        "ensemble",
        "--start",
        START,
        "--end",
        END,
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["matches"]
    assert figures["bars"] > 50
    assert figures["weight_max_abs_diff"] <= WEIGHT_TOLERANCE
    assert figures["equity_max_rel_diff"] <= EQUITY_RTOL
    with Journal.open(Path(figures["journal"])) as journal:
        assert journal.decisions()[0][1] == "ensemble"


def test_trajectory_replay_matches_backtest(tiny_run: Path) -> None:
    result = replay(tiny_run, START, END, "trajectory")  # the average of the run's archived snapshots
    assert result.matches
    assert len(result.timestamps) > 50
    assert result.weight_max_abs_diff <= WEIGHT_TOLERANCE
    with Journal.open(result.journal) as journal:
        assert journal.decisions()[0][1] == "trajectory"


def test_replay_refuses_dates_outside_the_run(tiny_run: Path) -> None:
    with pytest.raises(SpecError, match="fix: pick dates inside it"):
        replay(tiny_run, "2024-01-02", "2024-02-01", "best")
    with pytest.raises(SpecError, match="inside the train segment"):
        replay(tiny_run, "2019-02-01", "2019-03-01", "best")


@pytest.mark.slow
@pytest.mark.parametrize("trader", ["best", "ensemble"])
def test_minute_replay_matches_backtest_on_a_half_day(minute_run: Path, trader: str) -> None:
    day = MINUTE_SEGMENTS["backtest"][0]
    result = replay(minute_run, day, day, trader)
    assert len(result.timestamps) == HALF_DAY_MINUTES
    assert result.replay_weights.shape == result.backtest_weights.shape == (HALF_DAY_MINUTES - 1, 3)
    assert result.feature_max_abs_diff <= FEATURE_TOLERANCE
    assert result.weight_max_abs_diff <= WEIGHT_TOLERANCE
    assert result.equity_max_rel_diff <= EQUITY_RTOL
    assert np.ptp(result.backtest_equity_usd) > 0  # the trader did trade
    with Journal.open(result.journal) as journal:
        assert len(journal.decisions()) == HALF_DAY_MINUTES - 1
        assert journal.decisions()[0][1] == trader
        assert journal.fills()
