"""Baselines and the ledger -> pyfolio conversion, checked against hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.backtest.baselines import cash_ledger, equal_weight_ledger, market_ledger
from finpod.backtest.pyfolio_format import ledger_to_result
from finpod.data.panel import Panel

CASH_USD = 1_000.0
FEE_RATE = 0.01


def test_cash_is_flat(tiny_panel: Panel) -> None:
    result = ledger_to_result(
        "cash", "baseline", tiny_panel, cash_ledger(tiny_panel, "backtest", CASH_USD), CASH_USD
    )
    assert (result.returns == 0.0).all()
    assert len(result.returns) == 4
    assert result.transactions.empty
    assert (result.positions_usd["cash"] == CASH_USD).all()


def test_equal_weight_buys_once_and_holds(tiny_panel: Panel) -> None:
    ledger = equal_weight_ledger(tiny_panel, "backtest", CASH_USD, FEE_RATE, half_spread_bps=0.0)
    result = ledger_to_result("equal_weight", "baseline", tiny_panel, ledger, CASH_USD)
    # Bought at bar 6's close: A=16, B=20; each gets CASH/(1+fee)/2 USD.
    per_asset_usd = CASH_USD / (1 + FEE_RATE) / 2
    shares_a, shares_b = per_asset_usd / 16.0, per_asset_usd / 20.0
    assert len(result.transactions) == 2
    np.testing.assert_allclose(result.transactions["amount"].to_numpy(), [shares_a, shares_b])
    last_close_a = 10.0 + 17
    expected_final = shares_a * last_close_a + shares_b * 20.0
    assert result.equity_usd.iloc[-1] == pytest.approx(expected_final)
    assert result.costs_usd.iloc[0] == pytest.approx(2 * per_asset_usd * FEE_RATE)
    assert result.costs_usd.iloc[1:].sum() == 0.0
    assert result.turnover.iloc[0] == pytest.approx(2 * per_asset_usd / CASH_USD)
    compounded = float(np.prod(1 + result.returns.to_numpy())) * CASH_USD
    assert compounded == pytest.approx(expected_final)
    positions = result.positions_usd
    assert list(positions.columns) == ["AAA", "BBB", "cash"]
    np.testing.assert_allclose(positions.sum(axis=1).to_numpy(), result.equity_usd.to_numpy())


@pytest.mark.parametrize("half_spread_bps", [0.0, 25.0])
def test_baselines_enter_at_the_first_close_like_the_traders(
    tiny_panel: Panel, half_spread_bps: float
) -> None:
    """A trader's first order is placed at the first bar's close, so no baseline may hold bar 0's move.

    Asset A rises from 15 (open) to 16 (close) in bar 6; an equal-weight basket bought at the open
    would already be up at that close.
    """
    ew = equal_weight_ledger(tiny_panel, "backtest", CASH_USD, FEE_RATE, half_spread_bps)
    market = market_ledger(tiny_panel, "backtest", CASH_USD, FEE_RATE, half_spread_bps)
    assert market is not None
    for ledger in (ew, market):
        assert ledger.equity_usd[0] + ledger.cost_usd[0] == pytest.approx(CASH_USD)
        assert ledger.cost_usd[0] > 0.0


def test_equal_weight_without_a_tradable_asset_is_an_error(tiny_panel: Panel) -> None:
    from dataclasses import replace

    from finpod.errors import DataError

    closed = replace(tiny_panel, tradable=torch.zeros_like(tiny_panel.tradable))
    with pytest.raises(DataError, match="no asset is tradable"):
        equal_weight_ledger(closed, "backtest", CASH_USD, FEE_RATE, half_spread_bps=0.0)


def test_daily_index_is_utc_midnight_sessions(tiny_panel: Panel) -> None:
    result = ledger_to_result(
        "cash", "baseline", tiny_panel, cash_ledger(tiny_panel, "backtest", CASH_USD), CASH_USD
    )
    index = result.returns.index
    assert isinstance(index, pd.DatetimeIndex)
    assert str(index.tz) == "UTC"
    assert (index == index.normalize()).all()
    assert list(index.strftime("%Y-%m-%d")) == ["2021-01-06", "2021-01-07", "2021-01-08", "2021-01-11"]


def test_market_holds_the_benchmark(tiny_panel: Panel) -> None:
    ledger = market_ledger(tiny_panel, "backtest", CASH_USD, FEE_RATE, half_spread_bps=0.0)
    assert ledger is not None
    result = ledger_to_result("market", "baseline", tiny_panel, ledger, CASH_USD)
    bench = tiny_panel.benchmark_close
    assert bench is not None
    units = CASH_USD / (1 + FEE_RATE) / float(bench[6])
    assert result.equity_usd.iloc[-1] == pytest.approx(units * float(bench[-1]), rel=1e-6)
    assert list(result.positions_usd.columns) == ["QQQ", "cash"]


def test_market_is_none_without_benchmark(tiny_panel: Panel) -> None:
    from dataclasses import replace

    no_bench = replace(tiny_panel, benchmark_close=None, benchmark_symbol=None)
    assert market_ledger(no_bench, "backtest", CASH_USD, FEE_RATE, half_spread_bps=0.0) is None
