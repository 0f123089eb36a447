"""Performance figures of one trader or baseline, computed with empyrical on daily returns.

Every figure is a plain ``float`` (or ``int``), JSON-safe: a value that is NaN or infinite (Sharpe of
the cash baseline, whose volatility is zero; alpha/beta with fewer than two sessions) is ``None``,
which ``metrics.json`` stores as ``null`` and the HTML report shows as an em dash.

Conventions: returns, volatility, drawdown, turnover and cost shares are fractions (``0.12`` is
12 %); ratios are annualised with :data:`SESSIONS_PER_YEAR` and a zero risk-free rate; drawdowns are
negative; money is USD. Turnover is the trading after the entry (:func:`turnover_after_entry`):
every segment starts in cash, and buying the first book is not turnover (counted, buy-and-hold
equal weight showed 200 % a year over a half-year segment).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import empyrical as ep
import numpy as np
import pandas as pd

from finpod.backtest.result import BacktestResult, TraderResult
from finpod.report.quiet import quiet_analytics

SESSIONS_PER_YEAR = 252
"""Trading sessions per year used to annualise daily figures (empyrical's ``daily`` convention)."""

MetricValue = float | int | None
Better = Literal["higher", "lower", "closer_to_zero", "none"]


@dataclass(frozen=True)
class MetricInfo:
    """How one metric is labelled, formatted and ranked in the report.

    Attributes:
        key: the key in ``metrics.json``.
        label: column header in the HTML report.
        unit: ``"fraction"`` (shown as %), ``"ratio"``, ``"usd"`` or ``"count"``.
        better: which direction is better, for highlighting the best value of a column.
    """

    key: str
    label: str
    unit: Literal["fraction", "ratio", "usd", "count"]
    better: Better


METRICS: tuple[MetricInfo, ...] = (
    MetricInfo("cumulative_return", "Cumulative return", "fraction", "higher"),
    MetricInfo("annual_return", "Annual return", "fraction", "higher"),
    MetricInfo("annual_volatility", "Annual volatility", "fraction", "none"),
    MetricInfo("sharpe_ratio", "Sharpe", "ratio", "higher"),
    MetricInfo("sortino_ratio", "Sortino", "ratio", "higher"),
    MetricInfo("max_drawdown", "Max drawdown", "fraction", "closer_to_zero"),
    MetricInfo("calmar_ratio", "Calmar", "ratio", "higher"),
    MetricInfo("alpha", "Alpha (annual)", "fraction", "higher"),
    MetricInfo("beta", "Beta", "ratio", "none"),
    MetricInfo("turnover_daily_mean", "Turnover / day (after entry)", "fraction", "none"),
    MetricInfo("turnover_annual", "Turnover / year (after entry)", "fraction", "none"),
    MetricInfo("costs_usd", "Costs paid", "usd", "lower"),
    MetricInfo("costs_fraction_of_initial_cash", "Costs / capital", "fraction", "lower"),
    MetricInfo("num_trades", "Trades", "count", "none"),
    MetricInfo("final_equity_usd", "Final equity", "usd", "higher"),
    MetricInfo("num_sessions", "Sessions", "count", "none"),
)
"""Every metric ``compute_metrics`` returns, in report column order."""


def json_safe(value: float | int | np.floating | np.integer) -> MetricValue:
    """Turn a numpy or Python number into a JSON-safe Python number (NaN and ±inf -> ``None``)."""
    if isinstance(value, int | np.integer):
        return int(value)
    as_float = float(value)
    return as_float if math.isfinite(as_float) else None


def turnover_after_entry(turnover: pd.Series) -> pd.Series:
    """The sessions of a daily turnover series (traded notional over the previous close's equity)
    after the entry, the first session that traded: a segment starts in cash, so that session buys
    the first book. Empty when the trader traded once or never.

    Args:
        turnover: daily turnover ``(sessions,)`` of one trader, as :class:`TraderResult` holds it.
    """
    traded = np.flatnonzero(turnover.to_numpy(float) > 0.0)
    return turnover.iloc[int(traded[0]) + 1 :] if traded.size else turnover.iloc[:0]


def compute_metrics(
    result: TraderResult, benchmark_returns: pd.Series | None, *, initial_cash_usd: float
) -> dict[str, MetricValue]:
    """Compute every figure of :data:`METRICS` for one trader over one segment.

    Args:
        result: the trader's daily returns, equity, costs, turnover and transactions.
        benchmark_returns: daily simple returns of the market (or equal-weight) benchmark, indexed
            like ``result.returns``; ``None`` leaves alpha and beta ``None``.
        initial_cash_usd: starting capital in USD (the denominator of the cost share).

    Returns:
        ``{metric key: value}`` in :data:`METRICS` order; values are JSON-safe (see module doc).
    """
    returns = result.returns.astype(float)
    with quiet_analytics():
        figures: dict[str, float | int] = {
            "cumulative_return": ep.cum_returns_final(returns),
            "annual_return": ep.annual_return(returns, annualization=SESSIONS_PER_YEAR),
            "annual_volatility": ep.annual_volatility(returns, annualization=SESSIONS_PER_YEAR),
            "sharpe_ratio": ep.sharpe_ratio(returns, annualization=SESSIONS_PER_YEAR),
            "sortino_ratio": ep.sortino_ratio(returns, annualization=SESSIONS_PER_YEAR),
            "max_drawdown": ep.max_drawdown(returns),
            "calmar_ratio": ep.calmar_ratio(returns, annualization=SESSIONS_PER_YEAR),
        }
        alpha, beta = math.nan, math.nan
        if benchmark_returns is not None:
            aligned_benchmark = benchmark_returns.astype(float).reindex(returns.index)
            alpha, beta = ep.alpha_beta(returns, aligned_benchmark, annualization=SESSIONS_PER_YEAR)
    rebalancing = turnover_after_entry(result.turnover)
    if len(result.turnover) == 0:
        turnover_daily_mean = math.nan
    else:  # a trader that bought once and held, or never traded, turned nothing over
        turnover_daily_mean = float(rebalancing.mean()) if len(rebalancing) else 0.0
    costs_usd = float(result.costs_usd.sum())
    figures |= {
        "alpha": alpha,
        "beta": beta,
        "turnover_daily_mean": turnover_daily_mean,
        "turnover_annual": turnover_daily_mean * SESSIONS_PER_YEAR,
        "costs_usd": costs_usd,
        "costs_fraction_of_initial_cash": costs_usd / initial_cash_usd,
        "num_trades": len(result.transactions),
        "final_equity_usd": float(result.equity_usd.iloc[-1]) if len(result.equity_usd) else math.nan,
        "num_sessions": len(returns),
    }
    return {info.key: json_safe(figures[info.key]) for info in METRICS}


def benchmark_returns_of(backtest: BacktestResult) -> pd.Series | None:
    """The benchmark's daily returns named by ``backtest.benchmark_name`` (``None`` if absent)."""
    benchmark = backtest.traders.get(backtest.benchmark_name)
    return None if benchmark is None else benchmark.returns


def segment_metrics(backtest: BacktestResult) -> dict[str, dict[str, MetricValue]]:
    """Metrics of every trader and baseline of a segment, keyed by name in ``backtest`` order."""
    benchmark = benchmark_returns_of(backtest)
    return {
        name: compute_metrics(result, benchmark, initial_cash_usd=backtest.initial_cash_usd)
        for name, result in backtest.traders.items()
    }


def metrics_table(backtest: BacktestResult) -> pd.DataFrame:
    """All traders and baselines of a segment as a table.

    Returns:
        DataFrame with one row per trader/baseline (index = name, traders first) and one column per
        metric key of :data:`METRICS`; ``None`` values become NaN.
    """
    rows = segment_metrics(backtest)
    table = pd.DataFrame.from_dict(rows, orient="index", columns=[info.key for info in METRICS])
    table.index.name = "trader"
    return table.astype(float)
