"""Baselines run through the traders' env, checked against hand-computed numbers and a trader."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.backtest.baselines import cash_ledger, equal_weight_ledger, market_ledger
from finpod.backtest.pyfolio_format import ledger_to_result
from finpod.backtest.runner import run_backtest
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.errors import DataError

CASH_USD = 1_000.0
FEE_RATE = 0.01
CPU = torch.device("cpu")
OPEN_GAP_USD = 0.5
"""Asset A opens this much above its previous close: a fill at the next open is not at the seen close."""
FIRST, NEXT = 6, 7
"""The backtest's first bar (the baselines decide at its close) and the bar their orders fill in."""


def _config(**overrides: float) -> EnvConfig:
    settings: dict = {"initial_cash_usd": CASH_USD, "fee_rate": FEE_RATE, "max_participation": float("inf")}
    return EnvConfig(**{**settings, **overrides})


@pytest.fixture
def gapped_panel(tiny_panel: Panel) -> Panel:
    """``tiny_panel`` where A opens above its previous close and the benchmark has opens and volume."""
    opens = tiny_panel.open.clone()
    opens[1:, 0] += OPEN_GAP_USD
    bench = tiny_panel.benchmark_close
    assert bench is not None
    bench_open = torch.cat([bench[:1], bench[:-1] * 1.01])
    return dataclasses.replace(
        tiny_panel,
        open=opens,
        high=torch.maximum(opens, tiny_panel.close),
        benchmark_open=bench_open,
        benchmark_volume=torch.full_like(bench, 1e6),
    )


def test_cash_is_flat(tiny_panel: Panel) -> None:
    ledger = cash_ledger(tiny_panel, "backtest", _config(), CPU)
    result = ledger_to_result("cash", "baseline", tiny_panel, ledger, CASH_USD)
    assert (result.returns == 0.0).all()
    assert len(result.returns) == 4
    assert result.transactions.empty
    assert (result.positions_usd["cash"] == CASH_USD).all()


@pytest.mark.parametrize("half_spread_bps", [0.0, 25.0])
def test_equal_weight_buys_at_the_next_open_once_and_holds(
    gapped_panel: Panel, half_spread_bps: float
) -> None:
    ledger = equal_weight_ledger(gapped_panel, "backtest", _config(half_spread_bps=half_spread_bps), CPU)
    result = ledger_to_result("equal_weight", "baseline", gapped_panel, ledger, CASH_USD)
    # Decides at bar 6's close (A = 16), fills at bar 7's open: A = 16.5, B = 20, each with half the
    # cash net of the fee, at the price plus the half-spread.
    slip = 1.0 + half_spread_bps / 10_000.0
    per_asset_usd = CASH_USD / ((1 + FEE_RATE) * slip) / 2
    open_a = float(gapped_panel.open[NEXT, 0])
    assert open_a == 16.0 + OPEN_GAP_USD
    shares_a, shares_b = per_asset_usd / open_a, per_asset_usd / 20.0
    assert ledger.equity_usd[0] == CASH_USD  # nothing happens at the bar it decides on
    np.testing.assert_allclose(ledger.shares[1], [shares_a, shares_b], rtol=1e-12)
    assert (ledger.shares[2:] == ledger.shares[1]).all()
    assert len(result.transactions) == 2
    np.testing.assert_allclose(result.transactions["amount"].to_numpy(), [shares_a, shares_b])
    np.testing.assert_allclose(result.transactions["price"].to_numpy(), [open_a * slip, 20.0 * slip])
    expected_final = shares_a * 27.0 + shares_b * 20.0
    assert result.equity_usd.iloc[-1] == pytest.approx(expected_final, rel=1e-12)
    assert result.costs_usd.iloc[0] == pytest.approx(CASH_USD - (shares_a * open_a + shares_b * 20.0))
    assert result.costs_usd.iloc[1:].sum() == 0.0
    compounded = float(np.prod(1 + result.returns.to_numpy())) * CASH_USD
    assert compounded == pytest.approx(expected_final)
    positions = result.positions_usd
    assert list(positions.columns) == ["AAA", "BBB", "cash"]
    np.testing.assert_allclose(positions.sum(axis=1).to_numpy(), result.equity_usd.to_numpy())


@pytest.mark.parametrize("fill", ["next_open", "next_close"])
def test_a_baseline_run_through_the_env_equals_its_report_line(gapped_panel: Panel, fill: str) -> None:
    """An equal-weight trader whose band stops it rebalancing after the entry IS the baseline.

    The trader goes through the traders' path (policy -> env -> ledger -> report line); the baseline
    through its own; same fills, costs and band give the same line, to float64 rounding.
    """
    config = _config(half_spread_bps=10.0, rebalance_band=0.2, fill=fill)  # type: ignore[arg-type]
    equal = torch.tensor([[0.0, 0.5, 0.5]])
    all_cash = torch.tensor([[1.0, 0.0, 0.0]])
    policies = {"ew_trader": lambda obs: equal, "cash_trader": lambda obs: all_cash}
    result = run_backtest(gapped_panel, "backtest", config, policies, CPU)  # type: ignore[arg-type]
    for trader, baseline in (("ew_trader", "equal_weight"), ("cash_trader", "cash")):
        ours, theirs = result.traders[trader], result.traders[baseline]
        pd.testing.assert_series_equal(ours.equity_usd, theirs.equity_usd, check_names=False, rtol=1e-13)
        pd.testing.assert_series_equal(ours.costs_usd, theirs.costs_usd, check_names=False, rtol=1e-13)
        pd.testing.assert_series_equal(ours.turnover, theirs.turnover, check_names=False, rtol=1e-13)
    assert result.traders["ew_trader"].transactions.shape[0] == 2


def test_the_volume_cap_binds_the_baseline_entry(gapped_panel: Panel) -> None:
    capped = dataclasses.replace(gapped_panel, volume=torch.full_like(gapped_panel.volume, 100.0))
    ledger = equal_weight_ledger(capped, "backtest", _config(max_participation=0.1), CPU)
    np.testing.assert_allclose(ledger.shares[1], [10.0, 10.0])  # 10 % of 100 shares, not ~30 and ~25
    assert ledger.cash_usd[-1] > CASH_USD / 2  # it keeps what it could not invest as cash


def test_equal_weight_without_a_tradable_asset_is_an_error(tiny_panel: Panel) -> None:
    closed = dataclasses.replace(tiny_panel, tradable=torch.zeros_like(tiny_panel.tradable))
    with pytest.raises(DataError, match="no asset is tradable"):
        equal_weight_ledger(closed, "backtest", _config(), CPU)


def test_daily_index_is_utc_midnight_sessions(tiny_panel: Panel) -> None:
    result = ledger_to_result(
        "cash", "baseline", tiny_panel, cash_ledger(tiny_panel, "backtest", _config(), CPU), CASH_USD
    )
    index = result.returns.index
    assert isinstance(index, pd.DatetimeIndex)
    assert str(index.tz) == "UTC"
    assert (index == index.normalize()).all()
    assert list(index.strftime("%Y-%m-%d")) == ["2021-01-06", "2021-01-07", "2021-01-08", "2021-01-11"]


def test_market_buys_the_benchmark_at_its_next_open_and_holds(gapped_panel: Panel) -> None:
    ledger = market_ledger(gapped_panel, "backtest", _config(), CPU)
    assert ledger is not None
    result = ledger_to_result("market", "baseline", gapped_panel, ledger, CASH_USD)
    bench, bench_open = gapped_panel.benchmark_close, gapped_panel.benchmark_open
    assert bench is not None
    assert bench_open is not None
    units = CASH_USD / (1 + FEE_RATE) / float(bench_open[NEXT])
    assert float(bench_open[NEXT]) != float(bench[FIRST])
    assert result.equity_usd.iloc[-1] == pytest.approx(units * float(bench[-1]), rel=1e-12)
    assert list(result.positions_usd.columns) == ["QQQ", "cash"]


def test_market_without_benchmark_opens_fills_at_the_next_close(tiny_panel: Panel) -> None:
    ledger = market_ledger(tiny_panel, "backtest", _config(), CPU)
    assert ledger is not None
    bench = tiny_panel.benchmark_close
    assert bench is not None
    np.testing.assert_allclose(
        ledger.shares[1, 0], CASH_USD / (1 + FEE_RATE) / float(bench[NEXT]), rtol=1e-12
    )


def test_market_is_none_without_benchmark(tiny_panel: Panel) -> None:
    no_bench = dataclasses.replace(tiny_panel, benchmark_close=None, benchmark_symbol=None)
    assert market_ledger(no_bench, "backtest", _config(), CPU) is None


def test_a_policy_baseline_steps_in_its_own_pass_and_leaves_the_traders_alone(gapped_panel: Panel) -> None:
    """The linear baseline's slot: a policy traded through the same env, listed after equal weight."""
    config = _config(half_spread_bps=10.0)
    tilted = torch.tensor([[0.0, 0.7, 0.3]])
    policies = {"best": lambda obs: tilted}
    alone = run_backtest(gapped_panel, "backtest", config, policies, CPU)  # type: ignore[arg-type]
    with_linear = run_backtest(
        gapped_panel,
        "backtest",
        config,
        policies,  # type: ignore[arg-type]
        CPU,
        baselines={"linear": lambda obs: tilted},  # type: ignore[dict-item]
    )
    assert list(with_linear.traders) == ["best", "equal_weight", "linear", "market", "cash"]
    assert with_linear.traders["linear"].kind == "baseline"
    pd.testing.assert_series_equal(alone.traders["best"].equity_usd, with_linear.traders["best"].equity_usd)
    pd.testing.assert_series_equal(
        with_linear.traders["linear"].equity_usd, with_linear.traders["best"].equity_usd, check_names=False
    )


def test_traders_and_policy_baselines_in_one_pass_give_the_same_ledgers(gapped_panel: Panel) -> None:
    """What a CUDA device does (one pass for both: a pass costs the same per bar whatever its
    accounts there) equals two passes, account by account."""
    config = _config(half_spread_bps=10.0)
    policies = {"best": lambda obs: torch.tensor([[0.0, 0.7, 0.3]]).expand(obs.shape[0], -1)}
    baselines = {"linear": lambda obs: torch.tensor([[0.2, 0.2, 0.6]]).expand(obs.shape[0], -1)}
    apart = run_backtest(gapped_panel, "backtest", config, policies, CPU, baselines=baselines, one_pass=False)  # type: ignore[arg-type]
    together = run_backtest(
        gapped_panel, "backtest", config, policies, CPU, baselines=baselines, one_pass=True
    )  # type: ignore[arg-type]
    assert list(together.traders) == list(apart.traders)
    for name, result in apart.traders.items():
        mine = together.traders[name]
        pd.testing.assert_series_equal(mine.equity_usd, result.equity_usd, check_exact=True)
        pd.testing.assert_series_equal(mine.returns, result.returns, check_exact=True)
        pd.testing.assert_frame_equal(mine.positions_usd, result.positions_usd, check_exact=True)
        pd.testing.assert_frame_equal(mine.transactions, result.transactions, check_exact=True)
        assert mine.kind == result.kind
    assert not together.traders["best"].equity_usd.equals(together.traders["linear"].equity_usd)
