"""The Python API of the README: load a dataset, build a spec in code, run, read pandas objects."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from tiny import SYMBOLS, expected_traders, tiny_bars, tiny_spec, write_tiny_dataset

import finpod
from finpod.trader import load_policy


def test_api_run_metrics_returns_and_reload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=11))
    bars, manifest = finpod.load_dataset(dataset)
    assert set(bars["symbol"]) == set(SYMBOLS)
    assert manifest.frequency == "1d"

    spec = tiny_spec(dataset).with_(env={"fee_rate": 0.002})
    assert isinstance(spec, finpod.Spec)
    result = finpod.run(spec, out=tmp_path / "reports")
    # A script's stdout is not a terminal: the summary table is plain and never cut to 80 columns.
    printed = capsys.readouterr().out
    assert "ensemble_top2" in printed
    assert "\x1b[" not in printed
    assert "…" not in printed
    table = [line for line in printed.splitlines() if "equal_weight" in line]
    assert table
    assert max(len(line) for line in table) > 80

    metrics = result.metrics
    assert isinstance(metrics, pd.DataFrame)
    assert list(metrics.index) == expected_traders(metrics.index)
    assert {"sharpe_ratio", "max_drawdown", "calmar_ratio", "annual_return"} <= set(metrics.columns)
    best = result.backtest.traders["best"]
    assert isinstance(best.returns, pd.Series)
    assert best.returns.index[0] == pd.Timestamp("2019-10-01", tz="UTC")
    equity = (1 + best.returns).cumprod() * result.backtest.initial_cash_usd
    pd.testing.assert_series_equal(equity, best.equity_usd, check_names=False, rtol=1e-9)
    assert result.leaderboard[0]["rank"] == 1
    assert result.leaderboard[0]["score"] >= result.leaderboard[-1]["score"]

    assert result.report_html.is_file()
    saved = json.loads((result.run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert saved["run_info"]["status"] == "done"  # the page describes the finished run
    assert "status: <b>done</b>" in result.report_html.read_text(encoding="utf-8")

    again = finpod.load_run(result.run_dir)
    assert list(again.backtest.traders) == list(result.backtest.traders)
    for segment in ("backtest", "validation"):
        ours, theirs = getattr(result, segment), getattr(again, segment)
        assert (theirs.start, theirs.end) == (ours.start, ours.end)
        assert str(theirs.start.tz) == "UTC"
    for name, trader in result.backtest.traders.items():
        pd.testing.assert_series_equal(
            trader.returns,
            again.backtest.traders[name].returns,
            check_names=False,
            check_freq=False,
            check_index_type=False,
        )
        assert (trader.returns.index == again.backtest.traders[name].returns.index).all()
    pd.testing.assert_frame_equal(result.validation_metrics, again.validation_metrics)
    pick = result.pick  # the run's pick, from the validation segment, as metrics.json has it
    assert pick is not None
    assert saved["pick"] == pick.to_json()
    reloaded = again.pick  # from the saved CSVs
    assert reloaded is not None
    assert reloaded.trader == pick.trader
    assert reloaded.edge_sharpe == pytest.approx(pick.edge_sharpe)


def test_the_public_names_and_a_plain_backtest_package() -> None:
    import types

    import finpod.backtest.result
    from finpod import api, replay

    assert set(finpod.__all__) >= set(api.__all__)
    assert all(getattr(finpod, name) is getattr(api, name) for name in api.__all__)
    assert finpod.backtest_run is replay.backtest_run
    assert type(finpod.backtest) is types.ModuleType  # a package, not also a function
    assert not callable(finpod.backtest)


@pytest.mark.parametrize("device", ["tpu", "mps", "cuda:99", "cpu:x"])
def test_a_device_torch_cannot_run_a_trader_on_is_one_line(tmp_path: Path, device: str) -> None:
    """``backtest_run(..., device=)`` and ``policy(device=)``: a name torch does not know, a kind
    finpod does not run on, or a GPU that is not there is a :class:`SpecError` with the fix, given
    before any file is read."""
    with pytest.raises(finpod.SpecError, match=rf"device '{re.escape(device)}': .*; fix: use"):
        finpod.backtest_run(tmp_path, device=device)
    with pytest.raises(finpod.SpecError, match=rf"device '{re.escape(device)}': .*; fix: use"):
        load_policy(tmp_path, "best", ensemble_k=2, action_mode="weights", device=device)
