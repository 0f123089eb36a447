"""A learned trader that trailed equal weight while its costs dwarfed equal weight's gets a caveat
pointing at the no-trade band; one that beat equal weight after its costs does not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from rich.console import Console

from finpod.backtest.result import BacktestResult
from finpod.pipeline.summary import print_summary, summary_dict
from finpod.report.summary import (
    SESSIONS_PER_YEAR,
    annual_cost_fraction,
    cost_caveats,
    page_caveats,
    short_segment_caveats,
)
from tests.report.synthetic import make_backtest

DAILY_SHORTFALL = 0.0005
"""What a trailing trader's daily return gives up against equal weight's."""


def _with_costs(backtest: BacktestResult, name: str, scale: float) -> BacktestResult:
    result = backtest.traders[name]
    scaled = dataclasses.replace(result, costs_usd=result.costs_usd * scale)
    return dataclasses.replace(backtest, traders={**backtest.traders, name: scaled})


def _trailing(backtest: BacktestResult, *names: str) -> BacktestResult:
    """``names`` earn equal weight's returns less :data:`DAILY_SHORTFALL` (their costs unchanged)."""
    equal = backtest.traders["equal_weight"].returns
    traders = dict(backtest.traders)
    for name in names:
        traders[name] = dataclasses.replace(traders[name], returns=equal - DAILY_SHORTFALL)
    return dataclasses.replace(backtest, traders=traders)


def test_annual_costs_are_a_fraction_of_the_starting_capital_a_year() -> None:
    backtest = make_backtest(num_sessions=126)
    best = backtest.traders["best"]
    expected = best.costs_usd.sum() / backtest.initial_cash_usd * SESSIONS_PER_YEAR / 126
    assert annual_cost_fraction(backtest, "best") == pytest.approx(expected)


def test_the_caveat_names_the_costly_traders_that_trailed_equal_weight() -> None:
    # traders rebalance every 5 sessions at a 0.2 % fee; equal weight never does
    backtest = _trailing(make_backtest(), "best", "ensemble_top3")
    (caveat,) = cost_caveats(backtest)
    best = annual_cost_fraction(backtest, "best")
    equal = annual_cost_fraction(backtest, "equal_weight")
    assert best > 0.01
    assert best > 3 * equal
    assert f"best {best:.1%} of the starting capital a year (turnover" in caveat
    assert f"equal weight's {equal:.1%}" in caveat
    assert "ensemble_top3" in caveat
    assert "rebalance_band" in caveat
    assert "market" not in caveat  # baselines are never warned about
    assert "cash " not in caveat
    only_best = _trailing(make_backtest(), "best")
    assert "ensemble_top3" not in cost_caveats(only_best)[0], "it beat equal weight"


def test_no_caveat_when_costs_are_small_near_equal_weight_s_or_paid_for() -> None:
    backtest = _trailing(make_backtest(), "best", "ensemble_top3")
    cheap = _with_costs(_with_costs(backtest, "best", 0.1), "ensemble_top3", 0.1)
    assert cost_caveats(cheap) == []  # under 1 % a year
    assert cost_caveats(_with_costs(backtest, "equal_weight", 10.0)) == []  # under 3x equal weight's
    assert cost_caveats(make_backtest()) == [], "both traders beat equal weight after their costs"
    assert cost_caveats(dataclasses.replace(backtest, traders={"best": backtest.traders["best"]})) == []


def test_the_page_s_caveats_are_the_short_segments_then_the_costs() -> None:
    backtest = _trailing(make_backtest(), "best")
    validation = make_backtest("validation", "2019-11-26", 125, seed=5)
    assert page_caveats(backtest, validation) == [
        *short_segment_caveats(backtest, validation),
        *cost_caveats(backtest),
    ]
    assert len(page_caveats(backtest, validation)) == 3


def test_finpod_run_prints_the_caveat_and_its_json_carries_it(tmp_path: Path) -> None:
    backtest = _trailing(make_backtest(), "best")
    printed = Console(record=True, width=400)
    print_summary(printed, backtest, None, None, tmp_path)
    text = printed.export_text()
    (caveat,) = cost_caveats(backtest)
    assert f"caveat: {caveat}" in text
    everything = summary_dict(backtest, None, tmp_path)["caveats"]
    assert everything == page_caveats(backtest, None)  # the page's: short segments, then costs
    assert everything[-1] == caveat
    assert all(f"caveat: {line}" in text for line in everything)
