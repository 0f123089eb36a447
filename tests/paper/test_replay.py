"""Parity: the live code path replayed on recorded bars equals the backtest, bar for bar."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import finpod
from finpod.cli import app
from finpod.data.store import write_dataset
from finpod.data.synth import synth_market
from finpod.errors import SpecError
from finpod.paper.journal import Journal
from finpod.paper.replay import EQUITY_RTOL, FEATURE_TOLERANCE, WEIGHT_TOLERANCE, replay
from finpod.spec import Spec
from tests.app.tiny import SEGMENTS

START, END = SEGMENTS["backtest"]
MINUTE_SEGMENTS = {
    "train": ["2019-11-25", "2019-11-26"],
    "validation": ["2019-11-27", "2019-11-27"],
    "backtest": ["2019-11-29", "2019-11-29"],  # a half day: 210 minutes, the session ends at 13:00
}
HALF_DAY_MINUTES = 210


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


def test_replay_refuses_dates_outside_the_run(tiny_run: Path) -> None:
    with pytest.raises(SpecError, match="fix: pick dates inside it"):
        replay(tiny_run, "2024-01-02", "2024-02-01", "best")
    with pytest.raises(SpecError, match="inside the train segment"):
        replay(tiny_run, "2019-02-01", "2019-03-01", "best")


@pytest.fixture(scope="module")
def minute_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny minute run (3 synthetic symbols, 4 sessions; best and a top-2 ensemble)."""
    root = tmp_path_factory.mktemp("paper_minute_run")
    bars = synth_market(n_symbols=3, n_days=4, freq="1min", seed=4, start="2019-11-25")
    dataset = root / "data"
    write_dataset(bars, dataset, source="test", frequency="1min", adjustment="none", repairs={}, notes=[])
    spec = Spec.from_dict(
        {
            "name": "tiny-minute",
            "seed": 3,
            "device": "cpu",
            "frequency": "1min",
            "universe": "all",
            "benchmark_symbol": "SYN002",
            "data": {"source": "dataset", "path": str(dataset)},
            "segments": MINUTE_SEGMENTS,
            "env": {"num_envs": 4, "horizon_bars": 20, "fee_rate": 0.001},
            "agent": {"rollout_steps": 32, "hidden_sizes": [16], "num_minibatches": 2, "update_epochs": 2},
            "tournament": {
                "pool_size": 2,
                "leaderboard_size": 3,
                "budget_env_steps": 1536,
                "budget_seconds": 600.0,
                "ensemble_k": 2,
            },
        }
    )
    return Path(finpod.run(spec, out=root / "reports", quiet=True).run_dir)


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
