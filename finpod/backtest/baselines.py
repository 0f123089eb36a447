"""The baselines every report carries: equal-weight buy-and-hold, the market ETF, and cash.

Each buys once at the segment's first bar's CLOSE (the moment a trader places its first order; paying
the same fee and half-spread as the traders) and holds to the end, so no baseline holds the first
bar's open-to-close move that no trader can hold. They read prices straight from the panel, so they
are exact and need no env.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finpod.backtest.pyfolio_format import Ledger
from finpod.data.panel import Panel
from finpod.errors import DataError

BPS_PER_UNIT = 10_000.0


def cash_ledger(panel: Panel, segment: str, initial_cash_usd: float) -> Ledger:
    """Hold cash for the whole segment: equity is ``initial_cash_usd`` at every bar."""
    start, stop = panel.segment(segment)
    n, m = stop - start, panel.num_assets
    zeros = np.zeros(n)
    return Ledger(
        first_bar=start,
        symbols=panel.symbols,
        close_usd=panel.close[start:stop].double().cpu().numpy(),
        equity_usd=np.full(n, initial_cash_usd),
        cash_usd=np.full(n, initial_cash_usd),
        shares=np.zeros((n, m)),
        fill_price_usd=np.zeros((n, m)),
        cost_usd=zeros,
        traded_usd=zeros,
    )


def equal_weight_ledger(
    panel: Panel, segment: str, initial_cash_usd: float, fee_rate: float, half_spread_bps: float
) -> Ledger:
    """Buy equal USD amounts of every asset tradable at the segment's first bar, at its close; hold.

    Costs: ``fee_rate`` on the traded notional plus ``half_spread_bps`` paid on the buy price.

    Raises:
        DataError: no asset is tradable at the segment's first bar.
    """
    start, stop = panel.segment(segment)
    close_usd = panel.close[start].double().cpu().numpy()
    tradable = panel.tradable[start].cpu().numpy()
    if not tradable.any():
        first = pd.Timestamp(int(panel.timestamps_ns[start]), tz="UTC")
        raise DataError(
            f"{segment}: no asset is tradable at its first bar ({first}); fix: start the segment on a "
            "session where the universe has bars"
        )
    buy_price = close_usd * (1.0 + half_spread_bps / BPS_PER_UNIT)
    notional = initial_cash_usd / (1.0 + fee_rate) / tradable.sum()
    shares = np.where(tradable, notional / buy_price, 0.0)
    return _hold(panel, start, stop, shares, buy_price, initial_cash_usd, fee_rate)


def market_ledger(
    panel: Panel, segment: str, initial_cash_usd: float, fee_rate: float, half_spread_bps: float
) -> Ledger | None:
    """Buy the benchmark ETF at the first bar's close and hold; ``None`` when the panel has none.

    The ledger holds one instrument, the ETF (``panel.benchmark_symbol``).
    """
    if panel.benchmark_close is None or panel.benchmark_symbol is None:
        return None
    start, stop = panel.segment(segment)
    close = panel.benchmark_close[start:stop].double().cpu().numpy()
    buy_price = close[0] * (1.0 + half_spread_bps / BPS_PER_UNIT)
    notional = initial_cash_usd / (1.0 + fee_rate)
    units = notional / buy_price
    n = stop - start
    cost = np.zeros(n)
    cost[0] = initial_cash_usd - units * close[0]
    traded = np.zeros(n)
    traded[0] = notional
    return Ledger(
        first_bar=start,
        symbols=(panel.benchmark_symbol,),
        close_usd=close[:, None],
        equity_usd=units * close,
        cash_usd=np.zeros(n),
        shares=np.full((n, 1), units),
        fill_price_usd=np.full((n, 1), buy_price),
        cost_usd=cost,
        traded_usd=traded,
    )


def _hold(
    panel: Panel,
    start: int,
    stop: int,
    shares: np.ndarray,
    buy_price: np.ndarray,
    initial_cash_usd: float,
    fee_rate: float,
) -> Ledger:
    n = stop - start
    close = panel.close[start:stop].double().cpu().numpy()
    notional = float((shares * buy_price).sum())
    fee = notional * fee_rate
    cash_left = initial_cash_usd - notional - fee
    cost = np.zeros(n)
    cost[0] = fee + notional - float((shares * close[0]).sum())
    traded = np.zeros(n)
    traded[0] = notional
    held = np.broadcast_to(shares, (n, shares.shape[0])).copy()
    return Ledger(
        first_bar=start,
        symbols=panel.symbols,
        close_usd=close,
        equity_usd=cash_left + (held * close).sum(axis=1),
        cash_usd=np.full(n, cash_left),
        shares=held,
        fill_price_usd=np.broadcast_to(buy_price, held.shape).copy(),
        cost_usd=cost,
        traded_usd=traded,
    )
