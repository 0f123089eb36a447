"""The verdict's statistics: PSR, DSR (against the paper's worked example), bootstrap, report wiring."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from scipy import stats

from finpod.backtest.result import BacktestResult
from finpod.pipeline.summary import print_summary, summary_dict
from finpod.report import write_report
from finpod.report.verdict import (
    EVENTS_FILE,
    PICK_GATE_SE,
    deflated_sharpe_ratio,
    expected_maximum_sharpe,
    gate_pick,
    judge,
    mean_block_length,
    pick_verdict,
    probabilistic_sharpe_ratio,
    sharpe_difference_variance,
    shrunk_sharpe,
    stationary_bootstrap_indices,
    validation_trial_scores,
)
from finpod.report.writer import ReportPaths
from report.conftest import RUN_INFO, SPEC
from report.synthetic import make_backtest, make_entries, make_history


def _metrics_only(
    out: Path, backtest: BacktestResult, validation: BacktestResult | None, **extra: Any
) -> ReportPaths:
    """``write_report`` of the shared fixtures without the page (metrics.json and the CSVs)."""
    return write_report(
        out,
        backtest=backtest,
        validation=validation,
        spec=SPEC,
        leaderboard_history=make_history(),
        leaderboard_entries=make_entries(),
        run_info=RUN_INFO,
        render=False,
        **extra,
    )


PAPER_DAYS_PER_YEAR = 250
"""The paper annualises with 250 sessions a year (T = 1,250 daily observations = 5 years)."""


def test_dsr_reproduces_the_worked_example_of_bailey_and_lopez_de_prado() -> None:
    """Bailey, D. H. and López de Prado, M. (2014), "The Deflated Sharpe Ratio: Correcting for
    Selection Bias, Backtest Overfitting and Non-Normality", Journal of Portfolio Management 40(5),
    94-107, numerical example: N = 100 trials whose annualised Sharpe ratios have variance 1/2, a
    selected strategy with annualised SR 2.5 over T = 1,250 daily observations, skewness -3 and
    kurtosis 10. The paper finds the expected maximum SR0 = 0.1132 (daily) and DSR = 0.9004.
    """
    daily_sharpe = 2.5 / math.sqrt(PAPER_DAYS_PER_YEAR)
    daily_variance = 0.5 / PAPER_DAYS_PER_YEAR
    assert expected_maximum_sharpe(100, daily_variance) == pytest.approx(0.1132, abs=5e-5)
    dsr = deflated_sharpe_ratio(daily_sharpe, 1250, -3.0, 10.0, 100, daily_variance)
    assert dsr == pytest.approx(0.9004, abs=5e-5)


def test_psr_is_one_half_at_the_benchmark_and_matches_the_normal_case() -> None:
    assert probabilistic_sharpe_ratio(0.1, 0.1, 500, -1.0, 6.0) == pytest.approx(0.5)
    sharpe, num_obs = 0.08, 250
    expected = stats.norm.cdf(sharpe * math.sqrt(num_obs - 1) / math.sqrt(1 + sharpe**2 / 2))
    assert probabilistic_sharpe_ratio(sharpe, 0.0, num_obs, 0.0, 3.0) == pytest.approx(expected)
    # negative skew and fat tails widen the estimate's spread: less confidence in the same Sharpe
    assert probabilistic_sharpe_ratio(sharpe, 0.0, num_obs, -2.0, 12.0) < expected
    assert math.isnan(probabilistic_sharpe_ratio(math.nan, 0.0, num_obs, 0.0, 3.0))


def test_more_trials_raise_the_bar() -> None:
    assert expected_maximum_sharpe(1, 0.01) == 0.0
    bars = [expected_maximum_sharpe(n, 0.01) for n in (2, 10, 100, 1000)]
    assert bars == sorted(bars)
    assert expected_maximum_sharpe(100, 0.04) == pytest.approx(2 * expected_maximum_sharpe(100, 0.01))


def test_stationary_bootstrap_draws_blocks_of_the_mean_length() -> None:
    rng = np.random.default_rng(0)
    rows = stationary_bootstrap_indices(200, 500, 5.0, rng)
    assert rows.shape == (500, 200)
    assert rows.min() >= 0
    assert rows.max() < 200
    continues = (rows[:, 1:] - rows[:, :-1]) % 200 == 1
    assert 1.0 / (1.0 - continues.mean()) == pytest.approx(5.0, rel=0.1)
    again = stationary_bootstrap_indices(200, 500, 5.0, np.random.default_rng(0))
    assert np.array_equal(rows, again)
    assert mean_block_length(252) == pytest.approx(252 ** (1 / 3))


def _series(values: np.ndarray) -> pd.Series:
    return pd.Series(values, index=pd.date_range("2021-01-04", periods=len(values), freq="B", tz="UTC"))


def test_a_skilled_trader_beats_equal_weight_significantly() -> None:
    rng = np.random.default_rng(1)
    benchmark = rng.normal(0.0004, 0.01, 500)
    trader = benchmark + rng.normal(0.001, 0.002, 500)
    verdict = judge("best", _series(trader), _series(benchmark), [0.5, 0.7, 0.9, 1.1])
    assert verdict.beat
    assert verdict.significant
    low, high = verdict.sharpe_difference_ci
    assert low is not None
    assert high is not None
    assert 0.0 < low < verdict.sharpe_difference < high  # type: ignore[operator]
    assert verdict.psr is not None
    assert verdict.psr > 0.99
    assert verdict.dsr is not None
    assert verdict.dsr > 0.95
    assert verdict.num_trials == 4
    assert verdict.tracking_error == pytest.approx(np.std(trader - benchmark, ddof=1) * math.sqrt(252))
    assert verdict.sentence.startswith("best beat equal weight by +")
    assert "DSR" in verdict.sentence


def test_a_trader_holding_equal_weight_s_book_matches_it() -> None:
    rng = np.random.default_rng(4)
    benchmark = rng.normal(0.0004, 0.01, 300)
    verdict = judge("best", _series(benchmark.copy()), _series(benchmark), [0.5, 0.7])
    assert verdict.sentence.startswith("best matched equal weight (+0.00 Sharpe)"), verdict.sentence
    assert not verdict.beat


def test_a_lucky_pick_among_many_trials_is_deflated() -> None:
    rng = np.random.default_rng(2)
    benchmark = rng.normal(0.0004, 0.01, 250)
    trader = benchmark + rng.normal(0.0002, 0.003, 250)  # a small edge, or luck
    few = judge("best", _series(trader), _series(benchmark), [1.0, 1.2])
    many = judge("best", _series(trader), _series(benchmark), list(rng.normal(1.0, 1.0, 400)))
    assert few.psr == many.psr
    assert many.dsr is not None
    assert few.dsr is not None
    assert many.dsr < few.dsr
    assert many.dsr < 0.95


def test_no_skill_gives_an_interval_around_zero_and_no_dsr_without_trials() -> None:
    rng = np.random.default_rng(3)
    benchmark = rng.normal(0.0004, 0.01, 250)
    trader = benchmark + rng.normal(0.0, 0.003, 250)
    verdict = judge("best", _series(trader), _series(benchmark), [])
    low, high = verdict.sharpe_difference_ci
    assert low is not None
    assert high is not None
    assert low < 0.0 < high
    assert verdict.significant is False
    assert verdict.dsr is None
    assert verdict.num_trials == 0
    assert judge("best", _series(trader[:2]), _series(benchmark[:2]), []).sharpe_difference is None


def test_a_few_sessions_give_a_difference_but_no_interval() -> None:
    rng = np.random.default_rng(4)
    benchmark = rng.normal(0.0004, 0.01, 5)
    trader = benchmark + rng.normal(0.001, 0.003, 5)
    verdict = judge("best", _series(trader), _series(benchmark), [])
    assert verdict.sharpe_difference is not None
    assert verdict.sharpe_difference_ci == (None, None)
    assert verdict.significant is None
    assert "[95% CI n/a: under 20 sessions]" in verdict.sentence


def _write_events(run_dir: Path, scores: list[float]) -> None:
    path = run_dir / EVENTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"kind": "pod_started", "pod_id": 0, "data": {}})]
    lines += [json.dumps({"kind": "round_finished", "pod_id": 0, "data": {"score": s}}) for s in scores]
    lines.append('{"kind": "round_finished", "data": {"sco')  # a line cut by a kill
    path.write_text("\n".join(lines), encoding="utf-8")


def test_every_round_score_of_the_event_log_is_a_trial(tmp_path: Path) -> None:
    assert validation_trial_scores(tmp_path) == []
    _write_events(tmp_path, [0.1, -0.3, 1.2])
    assert validation_trial_scores(tmp_path) == [0.1, -0.3, 1.2]


def test_metrics_json_html_and_summary_carry_the_verdict(tmp_path: Path) -> None:
    scores = [float(s) for s in np.random.default_rng(4).normal(0.8, 0.5, 30)]
    _write_events(tmp_path, scores)
    backtest = make_backtest()
    paths = _metrics_only(tmp_path, backtest, None)
    verdict = json.loads(paths.metrics_json.read_text(encoding="utf-8"))["verdict"]
    assert verdict["benchmark"] == "equal_weight"
    assert verdict["num_trials"] == 30
    assert set(verdict["traders"]) == {"best", "ensemble_top3"}
    best = verdict["traders"]["best"]
    traders = backtest.traders
    expected = judge("best", traders["best"].returns, traders["equal_weight"].returns, scores)
    assert best == json.loads(json.dumps(expected.to_json()))
    assert best["sentence"].startswith("best ")
    assert summary_dict(backtest, None, tmp_path)["verdict"]["best"] == best


def test_the_second_verdict_is_against_the_linear_baseline(tmp_path: Path) -> None:
    plain = make_backtest()
    linear = dataclasses.replace(plain.traders["ensemble_top3"], name="linear", kind="baseline")
    traders = {name: result for name, result in plain.traders.items() if name != "ensemble_top3"}
    backtest = dataclasses.replace(plain, traders={**traders, "linear": linear})
    fit = {"ridge": {"coefficients": {"logret_1": -0.1}}, "trading": {"params": {"tilt": 1.0}}}
    paths = _metrics_only(tmp_path, backtest, None, linear_baseline=fit)
    metrics = json.loads(paths.metrics_json.read_text(encoding="utf-8"))
    versus = metrics["verdict_vs_linear"]
    assert versus["benchmark"] == "linear"
    assert set(versus["traders"]) == {"best"}  # baselines get no verdict
    sentence = versus["traders"]["best"]["sentence"]
    assert re.fullmatch(
        r"best vs linear: [+-]\d+\.\d\d Sharpe \[95% CI [+-]\d+\.\d\d, [+-]\d+\.\d\d\]", sentence
    )
    expected = judge("best", backtest.traders["best"].returns, linear.returns, [], benchmark_name="linear")
    assert versus["traders"]["best"]["sharpe_difference"] == pytest.approx(expected.sharpe_difference)
    assert metrics["linear_baseline"] == fit
    assert summary_dict(backtest, None, tmp_path)["verdict_vs_linear"]["best"]["sentence"] == sentence
    printed = Console(record=True, width=200)
    print_summary(printed, backtest, None, None, tmp_path)
    assert f"verdict: {sentence}" in printed.export_text()
    without = _metrics_only(tmp_path / "plain", plain, None)
    assert json.loads(without.metrics_json.read_text(encoding="utf-8"))["verdict_vs_linear"] is None


def test_the_sharpe_difference_variance_matches_paired_samples() -> None:
    """Memmel's variance against the spread of Sharpe differences over many paired one-year samples
    (a trader with a higher mean and a correlation of 0.8 with its benchmark)."""
    rng = np.random.default_rng(7)
    days, repeats, rho = 252, 4000, 0.8
    common = rng.normal(size=(repeats, days))
    own = rho * common + math.sqrt(1.0 - rho * rho) * rng.normal(size=(repeats, days))
    trader, benchmark = 0.01 * own + 0.0008, 0.01 * common + 0.0004
    annual = math.sqrt(252)
    differences = [
        (np.mean(t) / np.std(t, ddof=1) - np.mean(b) / np.std(b, ddof=1)) * annual
        for t, b in zip(trader, benchmark, strict=True)
    ]
    predicted = np.mean(
        [sharpe_difference_variance(t, b) for t, b in zip(trader[:200], benchmark[:200], strict=True)]
    )
    assert predicted == pytest.approx(np.var(differences), rel=0.1)
    assert sharpe_difference_variance(benchmark[0], benchmark[0]) == pytest.approx(0.0, abs=1e-9)
    assert math.isnan(sharpe_difference_variance(np.zeros(days), benchmark[0]))  # a flat trader


def test_the_shrunk_sharpe_prefers_the_better_measured_edge() -> None:
    """Two traders with the same measured Sharpe: the one whose book tracks the benchmark closely
    keeps more of its edge; a wide prior leaves the plain Sharpe, a narrow one the benchmark's."""
    rng = np.random.default_rng(3)
    days = 252
    benchmark = 0.01 * rng.normal(size=days) + 0.0004
    close = benchmark + 0.001 * rng.normal(size=days)
    loose = benchmark + 0.01 * rng.normal(size=days)
    annual = math.sqrt(252)

    def sharpe(returns: np.ndarray) -> float:
        return float(np.mean(returns) / np.std(returns, ddof=1) * annual)

    # give both the same measured Sharpe, above the benchmark's
    target = sharpe(benchmark) + 0.8
    close = close + (target - sharpe(close)) * np.std(close, ddof=1) / annual
    loose = loose + (target - sharpe(loose)) * np.std(loose, ddof=1) / annual
    assert sharpe(close) == pytest.approx(sharpe(loose), abs=1e-9)
    assert shrunk_sharpe(close, benchmark, 0.5) > shrunk_sharpe(loose, benchmark, 0.5)
    assert sharpe(benchmark) < shrunk_sharpe(loose, benchmark, 0.5) < sharpe(loose)
    assert shrunk_sharpe(loose, benchmark, 1e9) == pytest.approx(sharpe(loose))
    assert shrunk_sharpe(loose, benchmark, 1e-9) == pytest.approx(sharpe(benchmark))


def test_the_pick_is_the_selected_trader_only_when_it_beat_equal_weight_on_validation(tmp_path: Path) -> None:
    """``pick_verdict``: best when its validation Sharpe beats equal weight's (by ``gate_se``
    standard errors of the paired difference, 0 by default), else equal weight; in metrics.json,
    ``--json``, the summary and the page."""
    rng = np.random.default_rng(7)
    market = rng.normal(0.0003, 0.01, 250)
    skilled = market + rng.normal(0.0015, 0.003, 250)  # a real edge: several standard errors
    slight = market + rng.normal(0.0001, 0.003, 250)  # a small positive edge, under one standard error
    worse = market + rng.normal(-0.0004, 0.003, 250)  # lost to equal weight on validation
    strong = gate_pick(skilled, market)
    assert (strong.trader, strong.selected, strong.gate_se) == ("best", "best", PICK_GATE_SE)
    assert strong.edge_se is not None
    assert strong.edge_se > 2.0
    assert strong.standard_error == pytest.approx(math.sqrt(sharpe_difference_variance(skilled, market)))
    assert strong.sentence.startswith("pick: best (its validation edge over equal weight, +")
    small = gate_pick(slight, market)
    assert small.edge_se is not None
    assert 0.0 < small.edge_se < 1.0
    assert small.trader == "best"  # the default gate: any edge above 0
    gated = gate_pick(slight, market, gate_se=1.0)
    assert gated.trader == "equal_weight"
    assert "the pick needs at least 1" in gated.sentence
    lost = gate_pick(worse, market)
    assert lost.edge_sharpe is not None
    assert lost.edge_sharpe < 0.0
    assert lost.trader == "equal_weight"
    assert lost.sentence.startswith("pick: equal weight, not best (its validation edge over equal weight, -")
    assert "the pick needs above 0): deploy equal weight" in lost.sentence
    flat = gate_pick(np.zeros(250), market)  # a trader that never moved: no edge to measure
    assert (flat.trader, flat.edge_se) == ("equal_weight", None)
    assert "unmeasured" in flat.sentence

    backtest = make_backtest()
    dates = backtest.traders["best"].returns.index[:250]
    returns = {"best": skilled, "equal_weight": market}
    validation = dataclasses.replace(
        backtest,
        segment="validation",
        traders={
            name: dataclasses.replace(result, returns=pd.Series(returns.get(name, market), index=dates))
            for name, result in backtest.traders.items()
        },
    )
    verdict = pick_verdict(validation)
    assert verdict is not None
    assert verdict.trader == "best"
    assert pick_verdict(dataclasses.replace(validation, traders={})) is None
    paths = _metrics_only(tmp_path, backtest, validation)
    assert json.loads(paths.metrics_json.read_text(encoding="utf-8"))["pick"] == verdict.to_json()
    printed = Console(record=True, width=300)
    print_summary(printed, backtest, validation, None, tmp_path)
    assert verdict.sentence in printed.export_text()
    assert summary_dict(backtest, validation, tmp_path)["pick"] == verdict.to_json()
    assert summary_dict(backtest, None, tmp_path)["pick"] is None
