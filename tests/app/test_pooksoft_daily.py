"""Must show: the real-data daily spec (NASDAQ-100 members, pooksoft bars) runs end to end in CI time.

The pooksoft files are imported with the sources engineer's importer into a temporary dataset, the
shipped spec is pointed at it with a tiny budget, and the report must show the traders and the
baselines over the backtest segment, which ends at the data's last session (2021-04-21).
"""

from __future__ import annotations

import json
from pathlib import Path

import empyrical as ep
import pandas as pd
import pytest
from rich.console import Console
from tiny import trajectory_name

from finpod.data.importers import import_paths
from finpod.pipeline.main import run
from finpod.spec import Spec
from repo import REPO_ROOT

MIN_MEMBERS_IN_DATA = 90
"""pooksoft holds 104 tickers that were NASDAQ-100 members at some time in 2016-2021."""
TINY = {
    "env": {"num_envs": 4, "horizon_bars": 32},
    "agent": {"rollout_steps": 16, "hidden_sizes": [32], "num_minibatches": 2, "update_epochs": 1},
    "tournament": {
        "pool_size": 2,
        "leaderboard_size": 2,
        "budget_env_steps": 256,
        "ensemble_k": 2,
        "archive_size": 8,
    },
    "device": "cpu",
}


@pytest.mark.shared_data
@pytest.mark.slow
def test_pooksoft_daily_spec_end_to_end(shared_data: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "pooksoft_daily"
    import_paths([shared_data / "daily" / "pooksoft" / "daily_adjusted"], dataset)
    spec = Spec.from_toml(REPO_ROOT / "strategies" / "nasdaq100_daily_pooksoft.toml")
    tiny = spec.with_(data={"path": str(dataset)}, **TINY)
    result = run(tiny, out=tmp_path / "reports", console=Console(quiet=True))

    backtest = result.backtest
    assert backtest.start == pd.Timestamp("2020-05-26", tz="UTC")
    assert backtest.end == pd.Timestamp("2021-04-21", tz="UTC")
    trajectory = trajectory_name(backtest.traders)
    assert list(backtest.traders) == ["best", "ensemble_top2", trajectory, "equal_weight", "linear", "cash"]
    assert any("market" in note for note in backtest.notes)
    best = backtest.traders["best"]
    assert len(best.returns) == len(backtest.traders["equal_weight"].returns) > 200
    held = set(best.positions_usd.columns) - {"cash"}
    assert len(held) >= MIN_MEMBERS_IN_DATA
    assert {"AAPL", "MSFT", "AMZN"} <= held

    metrics = json.loads((result.run_dir / "metrics.json").read_text())
    saved = pd.read_csv(result.run_dir / "returns.csv", index_col=0)
    html = result.report_html.read_text(encoding="utf-8")
    traders = metrics["segments"]["backtest"]["traders"]
    for name in ("best", "ensemble_top2", "equal_weight", "cash"):
        assert name in html
        figures = traders[name]["metrics"]
        assert figures["cumulative_return"] == pytest.approx(ep.cum_returns_final(saved[name].to_numpy()))
        assert figures["max_drawdown"] == pytest.approx(ep.max_drawdown(saved[name].to_numpy()))
    best_sharpe = ep.sharpe_ratio(saved["best"].to_numpy())
    assert traders["best"]["metrics"]["sharpe_ratio"] == pytest.approx(best_sharpe)
