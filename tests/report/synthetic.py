"""Realistic synthetic backtest results for report tests: 2 traders and 3 baselines.

Prices follow a seeded geometric random walk; each trader rebalances to random long-only target
weights every few sessions, pays a proportional fee, and its positions, transactions, costs,
turnover, equity and returns are mutually consistent (returns come from the equity curve).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finpod.backtest.result import BacktestResult, TraderResult

INITIAL_CASH_USD = 1_000_000.0
FEE_RATE = 0.002
SYMBOLS = ("AAPL", "MSFT", "AMZN", "GOOG", "META", "NVDA", "TSLA", "ADBE", "NFLX", "PEP", "COST", "AVGO")
REBALANCE_EVERY_SESSIONS = 5
DRIFTS_PER_SESSION = np.linspace(-4e-4, 8e-4, len(SYMBOLS))


def sessions(start: str, count: int) -> pd.DatetimeIndex:
    """``count`` weekday sessions from ``start``, UTC midnight (pyfolio's index convention)."""
    return pd.bdate_range(start, periods=count, tz="UTC")


def _prices(index: pd.DatetimeIndex, rng: np.random.Generator) -> pd.DataFrame:
    """Close prices, USD: a market factor plus idiosyncratic noise per symbol."""
    market = rng.normal(4e-4, 0.011, size=(len(index), 1))
    idio = rng.normal(DRIFTS_PER_SESSION, 0.014, size=(len(index), len(SYMBOLS)))
    log_paths = np.cumsum(market * rng.uniform(0.7, 1.3, size=len(SYMBOLS)) + idio, axis=0)
    start_usd = rng.uniform(40.0, 400.0, size=len(SYMBOLS))
    return pd.DataFrame(start_usd * np.exp(log_paths), index=index, columns=list(SYMBOLS))


def _simulate(
    name: str, kind: str, prices: pd.DataFrame, targets: np.ndarray, rebalance: bool
) -> TraderResult:
    """Run target weights (sessions x symbols, row sums <= 1) through a fee-paying long-only book."""
    index = prices.index
    cash, shares = INITIAL_CASH_USD, np.zeros(len(SYMBOLS))
    equity, positions, costs, turnover, fills = [], [], [], [], []
    for day, session in enumerate(index):
        price = prices.iloc[day].to_numpy()
        opening_equity = cash + float(shares @ price)
        traded_usd, cost_usd = 0.0, 0.0
        if day == 0 or (rebalance and day % REBALANCE_EVERY_SESSIONS == 0):
            target_shares = targets[day] * opening_equity * (1.0 - FEE_RATE) / price
            delta = target_shares - shares
            traded_usd = float(np.abs(delta) @ price)
            cost_usd = FEE_RATE * traded_usd
            cash -= float(delta @ price) + cost_usd
            shares = target_shares
            fill_time = session + pd.Timedelta(hours=14, minutes=31)
            fills += [
                (fill_time, SYMBOLS[i], float(delta[i]), float(price[i])) for i in np.flatnonzero(delta)
            ]
        equity.append(cash + float(shares @ price))
        positions.append([*(shares * price), cash])
        costs.append(cost_usd)
        turnover.append(traded_usd / opening_equity)
    equity_usd = pd.Series(equity, index=index)
    returns = equity_usd.pct_change()
    returns.iloc[0] = equity_usd.iloc[0] / INITIAL_CASH_USD - 1.0
    transactions = pd.DataFrame(fills, columns=["timestamp", "symbol", "amount", "price"]).set_index(
        "timestamp"
    )
    return TraderResult(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        returns=returns,
        equity_usd=equity_usd,
        positions_usd=pd.DataFrame(positions, index=index, columns=[*SYMBOLS, "cash"]),
        transactions=transactions,
        costs_usd=pd.Series(costs, index=index),
        turnover=pd.Series(turnover, index=index),
    )


def make_backtest(
    segment: str = "backtest", start: str = "2020-05-26", num_sessions: int = 250, seed: int = 8
) -> BacktestResult:
    """A consistent :class:`BacktestResult` with traders ``best``, ``ensemble_top3`` and baselines
    ``equal_weight``, ``market`` and ``cash``."""
    rng = np.random.default_rng(seed)
    index = sessions(start, num_sessions)
    prices = _prices(index, rng)
    market_prices = pd.DataFrame({"QQQ": prices.mean(axis=1)}, index=index)
    traders: dict[str, TraderResult] = {}
    for name in ("best", "ensemble_top3"):
        tilt = np.append(np.exp(DRIFTS_PER_SESSION * 2_000.0 * rng.uniform(0.5, 1.0)), 1.5)
        raw = rng.dirichlet(40.0 * tilt / tilt.sum(), size=num_sessions)
        traders[name] = _simulate(name, "trader", prices, raw[:, : len(SYMBOLS)], rebalance=True)
    equal = np.full((num_sessions, len(SYMBOLS)), 1.0 / len(SYMBOLS))
    traders["equal_weight"] = _simulate("equal_weight", "baseline", prices, equal, rebalance=False)
    market = _simulate(
        "market",
        "baseline",
        market_prices.reindex(columns=list(SYMBOLS), fill_value=np.nan).fillna(1.0),
        np.zeros((num_sessions, len(SYMBOLS))),
        rebalance=False,
    )
    market_returns = market_prices["QQQ"].pct_change().fillna(0.0)
    traders["market"] = TraderResult(
        name="market",
        kind="baseline",
        returns=market_returns,
        equity_usd=INITIAL_CASH_USD * (1.0 + market_returns).cumprod(),
        positions_usd=pd.DataFrame({"QQQ": INITIAL_CASH_USD * (1.0 + market_returns).cumprod(), "cash": 0.0}),
        transactions=market.transactions.iloc[:0],
        costs_usd=pd.Series(0.0, index=index),
        turnover=pd.Series(0.0, index=index),
    )
    zeros = pd.Series(0.0, index=index)
    traders["cash"] = TraderResult(
        name="cash",
        kind="baseline",
        returns=zeros,
        equity_usd=zeros + INITIAL_CASH_USD,
        positions_usd=pd.DataFrame({"cash": zeros + INITIAL_CASH_USD}),
        transactions=market.transactions.iloc[:0],
        costs_usd=zeros,
        turnover=zeros,
    )
    return BacktestResult(
        segment=segment,
        start=index[0],
        end=index[-1],
        traders=traders,
        benchmark_name="market",
        initial_cash_usd=INITIAL_CASH_USD,
        notes=[f"synthetic {segment} segment for tests"],
    )


def make_history(num_records: int = 12) -> list[dict[str, object]]:
    """Leaderboard snapshots in the shape the main job passes: improving best score."""
    rng = np.random.default_rng(3)
    records, best = [], -0.5
    for step in range(num_records):
        scores = sorted((rng.normal(best, 0.2, size=min(step + 1, 5))).tolist(), reverse=True)
        best = max(best, scores[0])
        records.append(
            {
                "elapsed_s": 20.0 * (step + 1),
                "env_steps": 50_000 * (step + 1),
                "best_score": best,
                "scores": scores,
            }
        )
    return records


def make_entries() -> list[dict[str, object]]:
    """Final leaderboard entries, best first."""
    return [
        {
            "rank": 1,
            "pod_id": "pod-07",
            "generation": 3,
            "parent_id": "pod-02",
            "score": 1.42,
            "policy_version": 41,
            "env_steps": 1_312_000,
            "seed": 7,
            "created_at": "2026-01-01T00:10:00+00:00",
            "agent_config": {
                "type": "podracer.ppo:PPOConfig",
                "fields": {"learning_rate": 0.00031, "gamma": 0.99, "hidden_sizes": [64, 64]},
            },
        },
        {"rank": 2, "pod_id": "pod-02", "generation": 2, "parent_id": "pod-00", "score": 1.18},
        {"rank": 3, "pod_id": "pod-05", "generation": 0, "parent_id": None, "score": 0.97},
    ]
