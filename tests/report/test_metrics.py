"""metrics.json agrees with an independent empyrical computation on the saved daily returns."""

from __future__ import annotations

import json
import math

import empyrical as ep
import pandas as pd
import pytest

from finpod.report import ReportPaths, compute_metrics, metrics_table
from finpod.report.metrics import METRICS, json_safe, turnover_after_entry
from report.synthetic import INITIAL_CASH_USD, make_backtest

ANNUALISATION = 252


def _independent(returns: pd.Series, benchmark: pd.Series) -> dict[str, float]:
    """The figures straight from empyrical on returns read back from returns.csv."""
    alpha, beta = ep.alpha_beta(returns, benchmark, annualization=ANNUALISATION)
    return {
        "cumulative_return": ep.cum_returns_final(returns),
        "annual_return": ep.annual_return(returns, annualization=ANNUALISATION),
        "annual_volatility": ep.annual_volatility(returns, annualization=ANNUALISATION),
        "sharpe_ratio": ep.sharpe_ratio(returns, annualization=ANNUALISATION),
        "sortino_ratio": ep.sortino_ratio(returns, annualization=ANNUALISATION),
        "max_drawdown": ep.max_drawdown(returns),
        "calmar_ratio": ep.calmar_ratio(returns, annualization=ANNUALISATION),
        "alpha": alpha,
        "beta": beta,
    }


@pytest.mark.parametrize(("segment", "folder"), [("backtest", "."), ("validation", "validation")])
def test_metrics_json_matches_empyrical_on_saved_returns(
    report: ReportPaths, segment: str, folder: str
) -> None:
    saved = json.loads(report.metrics_json.read_text())["segments"][segment]
    returns = pd.read_csv(report.root / folder / "returns.csv", index_col="date", parse_dates=["date"])
    benchmark = returns[saved["benchmark_name"]]
    assert list(saved["traders"]) == list(returns.columns)
    for name in ("best", "ensemble_top3", "equal_weight", "market"):
        expected = _independent(returns[name], benchmark)
        for key, value in expected.items():
            assert saved["traders"][name]["metrics"][key] == pytest.approx(value, rel=1e-9, abs=1e-12), (
                name,
                key,
            )


def test_totals_match_the_saved_series(report: ReportPaths) -> None:
    saved = json.loads(report.metrics_json.read_text())["segments"]["backtest"]["traders"]
    costs = pd.read_csv(report.root / "costs.csv", index_col="date")
    turnover = pd.read_csv(report.root / "turnover.csv", index_col="date")
    equity = pd.read_csv(report.root / "equity.csv", index_col="date")
    transactions = pd.read_csv(report.transactions_csv)
    for name, entry in saved.items():
        metrics = entry["metrics"]
        assert metrics["costs_usd"] == pytest.approx(costs[name].sum())
        assert metrics["costs_fraction_of_initial_cash"] == pytest.approx(
            costs[name].sum() / INITIAL_CASH_USD
        )
        traded = turnover[name].to_numpy() > 0.0
        after_entry = turnover[name].iloc[int(traded.argmax()) + 1 :] if traded.any() else turnover[name]
        expected_turnover = after_entry.mean() if len(after_entry) else 0.0
        assert metrics["turnover_daily_mean"] == pytest.approx(expected_turnover)
        assert metrics["turnover_annual"] == pytest.approx(expected_turnover * ANNUALISATION)
        assert metrics["final_equity_usd"] == pytest.approx(equity[name].iloc[-1])
        assert metrics["num_trades"] == int((transactions["trader"] == name).sum())
        assert metrics["num_sessions"] == len(equity)
    assert saved["best"]["metrics"]["num_trades"] > 0
    assert saved["best"]["metrics"]["costs_usd"] > 0.0
    assert saved["best"]["metrics"]["turnover_annual"] > 0.0
    assert saved["equal_weight"]["metrics"]["turnover_annual"] == 0.0, "buying the first book is no turnover"
    assert saved["equal_weight"]["metrics"]["costs_usd"] > 0.0, "the entry still pays its costs"


def test_turnover_after_entry_drops_the_sessions_up_to_the_first_trade() -> None:
    dates = pd.date_range("2024-01-02", periods=5, freq="B")
    turnover = pd.Series([0.0, 1.0, 0.0, 0.2, 0.1], index=dates)
    assert list(turnover_after_entry(turnover)) == [0.0, 0.2, 0.1]
    assert turnover_after_entry(pd.Series([0.0, 0.0], index=dates[:2])).empty
    assert turnover_after_entry(pd.Series([1.0], index=dates[:1])).empty


def test_undefined_figures_are_null_and_json_is_strict(report: ReportPaths) -> None:
    def reject(constant: str) -> None:
        raise AssertionError(f"metrics.json holds the non-JSON constant {constant}")

    payload = json.loads(report.metrics_json.read_text(), parse_constant=reject)
    cash = payload["segments"]["backtest"]["traders"]["cash"]["metrics"]
    assert cash["sharpe_ratio"] is None
    assert cash["sortino_ratio"] is None
    assert cash["cumulative_return"] == 0.0


def test_benchmark_has_zero_alpha_and_unit_beta() -> None:
    backtest = make_backtest(num_sessions=60)
    market = backtest.traders["market"]
    metrics = compute_metrics(market, market.returns, initial_cash_usd=backtest.initial_cash_usd)
    assert metrics["beta"] == pytest.approx(1.0)
    assert metrics["alpha"] == pytest.approx(0.0, abs=1e-12)


def test_no_benchmark_leaves_alpha_and_beta_undefined() -> None:
    backtest = make_backtest(num_sessions=30)
    metrics = compute_metrics(backtest.traders["best"], None, initial_cash_usd=backtest.initial_cash_usd)
    assert metrics["alpha"] is None
    assert metrics["beta"] is None
    assert metrics["sharpe_ratio"] is not None


def test_metrics_table_has_one_row_per_trader_and_every_metric() -> None:
    backtest = make_backtest(num_sessions=40)
    table = metrics_table(backtest)
    assert list(table.index) == ["best", "ensemble_top3", "equal_weight", "market", "cash"]
    assert list(table.columns) == [info.key for info in METRICS]
    assert math.isnan(table.loc["cash", "sharpe_ratio"])


@pytest.mark.parametrize(
    ("value", "expected"), [(math.nan, None), (math.inf, None), (-math.inf, None), (1.5, 1.5)]
)
def test_json_safe(value: float, expected: float | None) -> None:
    assert json_safe(value) == expected
