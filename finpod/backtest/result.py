"""What a backtest hands to the report: per-trader pyfolio-format series and totals.

Every series is indexed by trading session; daily returns come from the equity curve at each
session close. Index: tz-aware UTC ``DatetimeIndex`` normalised to midnight (pyfolio's convention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

TraderKind = Literal["trader", "baseline"]


@dataclass(frozen=True)
class TraderResult:
    """One trader's (or baseline's) pass over a backtest segment.

    Attributes:
        name: display name, e.g. ``"best"``, ``"ensemble_top3"``, ``"equal_weight"``, ``"market"``,
            ``"cash"``.
        kind: ``"trader"`` (a learned policy) or ``"baseline"``.
        returns: daily simple returns (fraction), one per session in the segment.
        equity_usd: portfolio value at each session close, USD.
        positions_usd: pyfolio positions: one row per session, one column per symbol plus ``cash``,
            values in USD at the session close.
        transactions: pyfolio transactions: index = fill timestamp (UTC), columns ``symbol``,
            ``amount`` (shares, signed: + buy, - sell) and ``price`` (USD per share, fill price).
        costs_usd: fees plus slippage paid per session, USD.
        turnover: traded notional per session divided by the previous session's closing equity
            (the initial capital for the first session), fraction.
    """

    name: str
    kind: TraderKind
    returns: pd.Series
    equity_usd: pd.Series
    positions_usd: pd.DataFrame
    transactions: pd.DataFrame
    costs_usd: pd.Series
    turnover: pd.Series


@dataclass(frozen=True)
class BacktestResult:
    """All traders and baselines over one segment.

    Attributes:
        segment: ``"validation"`` or ``"backtest"``.
        start, end: first and last session of the segment (UTC midnight timestamps).
        traders: results keyed by name, traders first, then baselines.
        benchmark_name: name of the result used as the market for alpha/beta (``"market"`` when the
            dataset has a market ETF, else ``"equal_weight"``).
        initial_cash_usd: starting capital of every trader and baseline.
        notes: caveats the report shows.
        steps_by_threads: env steps of the traders' pass at each torch thread count (run.json
            records it; the numbers do not depend on it).
    """

    segment: str
    start: pd.Timestamp
    end: pd.Timestamp
    traders: dict[str, TraderResult]
    benchmark_name: str
    initial_cash_usd: float
    notes: list[str] = field(default_factory=list)
    steps_by_threads: dict[int, int] = field(default_factory=dict)
