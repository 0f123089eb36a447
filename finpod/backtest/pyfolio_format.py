"""Turn a per-bar account ledger into pyfolio-format daily series (a :class:`TraderResult`).

A ledger holds one row per bar of a segment, the account valued at that bar's close after that bar's
fills. Daily figures are read at each session's last bar (the session close).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from finpod.backtest.result import TraderKind, TraderResult
from finpod.data.panel import Panel

MIN_TRANSACTION_USD = 0.01
"""Holding changes worth less than a cent are float32 rounding in the env, not transactions."""


@dataclass(frozen=True)
class Ledger:
    """An account over ``n`` consecutive bars of a panel, valued at each bar's close.

    Attributes:
        first_bar: panel bar index of row 0 (the segment's first bar).
        symbols: the ``M`` held instruments (the panel's assets, or the market ETF), column order.
        close_usd: float64 ``(n, M)`` close price of each instrument, USD per share.
        equity_usd: float64 ``(n,)`` cash plus holdings at the bar close, USD.
        cash_usd: float64 ``(n,)`` cash after the bar's fills, USD.
        shares: float64 ``(n, M)`` shares held after the bar's fills.
        fill_price_usd: float64 ``(n, M)`` price of the fills in that bar, USD per share (any value
            where nothing traded).
        cost_usd: float64 ``(n,)`` fees plus slippage charged in the bar, USD.
        traded_usd: float64 ``(n,)`` traded notional in the bar, USD.
    """

    first_bar: int
    symbols: tuple[str, ...]
    close_usd: np.ndarray
    equity_usd: np.ndarray
    cash_usd: np.ndarray
    shares: np.ndarray
    fill_price_usd: np.ndarray
    cost_usd: np.ndarray
    traded_usd: np.ndarray

    @property
    def num_bars(self) -> int:
        """``n``, the bars covered."""
        return int(self.equity_usd.shape[0])


def session_dates(panel: Panel, first_bar: int, stop_bar: int) -> tuple[pd.DatetimeIndex, np.ndarray]:
    """Sessions of the bars ``[first_bar, stop_bar)`` and the offset of each session's last bar.

    Returns:
        ``(dates, last)``: ``dates`` is the UTC-midnight date of each session (the UTC date of its
        first bar, pyfolio's convention); ``last`` (int64 ``(S,)``) is the offset, from
        ``first_bar``, of each session's last bar.
    """
    sessions = panel.session_ids[first_bar:stop_bar]
    change = np.flatnonzero(np.diff(sessions)) + 1
    firsts = np.concatenate([[0], change])
    lasts = np.concatenate([change - 1, [sessions.shape[0] - 1]])
    stamps = pd.to_datetime(panel.timestamps_ns[first_bar:stop_bar][firsts], utc=True)
    return pd.DatetimeIndex(stamps.normalize(), name="date"), lasts.astype(np.int64)


def daily_returns(panel: Panel, first_bar: int, equity_usd: np.ndarray, initial_cash_usd: float) -> pd.Series:
    """Session-close to session-close returns of a per-bar equity curve (the first against the cash).

    Args:
        panel: the panel the curve was traded on (sessions, timestamps).
        first_bar: panel bar index of the curve's row 0.
        equity_usd: float64 ``(n,)`` equity at each bar's close, USD.
        initial_cash_usd: capital before the first bar, USD.

    Returns:
        One return per session, indexed by date (pyfolio's convention, see :func:`session_dates`).
    """
    dates, last = session_dates(panel, first_bar, first_bar + equity_usd.shape[0])
    closes = equity_usd[last]
    previous = np.concatenate([[initial_cash_usd], closes[:-1]])
    return pd.Series(closes / previous - 1.0, index=dates)


def ledger_to_result(
    name: str, kind: TraderKind, panel: Panel, ledger: Ledger, initial_cash_usd: float
) -> TraderResult:
    """Daily returns, equity, positions, transactions, costs and turnover of one ledger.

    Args:
        name: display name of the trader or baseline.
        kind: ``"trader"`` or ``"baseline"``.
        panel: the panel the ledger was traded on (symbols, timestamps, sessions).
        ledger: the per-bar account.
        initial_cash_usd: capital before the first bar, USD (the first day's return is against it).
    """
    stop = ledger.first_bar + ledger.num_bars
    dates, last = session_dates(panel, ledger.first_bar, stop)
    equity = pd.Series(ledger.equity_usd[last], index=dates, name=name)
    returns = daily_returns(panel, ledger.first_bar, ledger.equity_usd, initial_cash_usd).rename(name)
    previous = np.concatenate([[initial_cash_usd], equity.to_numpy()[:-1]])

    positions = pd.DataFrame(
        ledger.shares[last] * ledger.close_usd[last], index=dates, columns=list(ledger.symbols)
    )
    positions["cash"] = ledger.cash_usd[last]

    session_of_row = np.searchsorted(last, np.arange(ledger.num_bars))
    costs = pd.Series(np.bincount(session_of_row, ledger.cost_usd, len(dates)), index=dates, name=name)
    traded = np.bincount(session_of_row, ledger.traded_usd, len(dates))
    turnover = pd.Series(traded / previous, index=dates, name=name)
    return TraderResult(
        name=name,
        kind=kind,
        returns=returns,
        equity_usd=equity,
        positions_usd=positions,
        transactions=_transactions(panel, ledger),
        costs_usd=costs,
        turnover=turnover,
    )


def _transactions(panel: Panel, ledger: Ledger) -> pd.DataFrame:
    """pyfolio transactions: one row per (bar, asset) whose holding changed by a cent or more."""
    before = np.vstack([np.zeros((1, ledger.shares.shape[1])), ledger.shares[:-1]])
    amount = ledger.shares - before
    rows, cols = np.nonzero(np.abs(amount * ledger.fill_price_usd) >= MIN_TRANSACTION_USD)
    stamps = pd.to_datetime(panel.timestamps_ns[ledger.first_bar + rows], utc=True)
    return pd.DataFrame(
        {
            "symbol": np.asarray(ledger.symbols, dtype=object)[cols],
            "amount": amount[rows, cols],
            "price": ledger.fill_price_usd[rows, cols],
        },
        index=pd.DatetimeIndex(stamps, name="date"),
    )
