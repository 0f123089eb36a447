"""A learned trader whose costs dwarf equal weight's gets a caveat that points at the no-trade band."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.console import Console

from finpod.backtest.result import BacktestResult
from finpod.pipeline.summary import print_summary, summary_dict
from finpod.report import ReportPaths
from finpod.report.summary import SESSIONS_PER_YEAR, annual_cost_fraction, cost_caveats
from tests.report.synthetic import make_backtest


def _with_costs(backtest: BacktestResult, name: str, scale: float) -> BacktestResult:
    result = backtest.traders[name]
    scaled = dataclasses.replace(result, costs_usd=result.costs_usd * scale)
    return dataclasses.replace(backtest, traders={**backtest.traders, name: scaled})


def test_annual_costs_are_a_fraction_of_the_starting_capital_a_year() -> None:
    backtest = make_backtest(num_sessions=126)
    best = backtest.traders["best"]
    expected = best.costs_usd.sum() / backtest.initial_cash_usd * SESSIONS_PER_YEAR / 126
    assert annual_cost_fraction(backtest, "best") == pytest.approx(expected)


def test_the_caveat_names_the_costly_traders_with_their_costs_and_turnover() -> None:
    backtest = make_backtest()  # traders rebalance every 5 sessions at a 0.2 % fee; equal weight never
    (caveat,) = cost_caveats(backtest)
    best = annual_cost_fraction(backtest, "best")
    equal = annual_cost_fraction(backtest, "equal_weight")
    assert best > 0.01
    assert best > 3 * equal
    assert f"best {best:.1%} of the starting capital a year (turnover" in caveat
    assert f"equal weight's {equal:.1%}" in caveat
    assert "ensemble_top3" in caveat
    assert "rebalance_band" in caveat
    assert "market" not in caveat
    assert "cash " not in caveat


def test_no_caveat_when_costs_are_small_or_near_equal_weight_s() -> None:
    backtest = make_backtest()
    cheap = _with_costs(_with_costs(backtest, "best", 0.1), "ensemble_top3", 0.1)
    assert cost_caveats(cheap) == []  # under 1 % a year
    costly_baseline = _with_costs(backtest, "equal_weight", 10.0)
    assert cost_caveats(costly_baseline) == []  # under 3x equal weight's
    assert cost_caveats(dataclasses.replace(backtest, traders={"best": backtest.traders["best"]})) == []


def test_the_page_shows_the_caveat_at_the_top(report: ReportPaths) -> None:
    html = report.html.read_text(encoding="utf-8")
    caveats = html[html.index('id="caveats"') : html.index('id="spec"')]
    assert "Costs: fees and slippage took best" in caveats


def test_finpod_run_prints_the_caveat_and_its_json_carries_it(tmp_path: Path) -> None:
    backtest = make_backtest()
    printed = Console(record=True, width=400)
    print_summary(printed, backtest, None, None, tmp_path)
    (caveat,) = cost_caveats(backtest)
    assert f"caveat: {caveat}" in printed.export_text()
    assert summary_dict(backtest, None, tmp_path)["caveats"] == [caveat]
