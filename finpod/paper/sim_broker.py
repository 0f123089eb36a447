"""A broker that fills like the env: the parity replay's counterpart of Alpaca.

Orders sent while the trader observes bar ``t`` are filled when :meth:`SimBroker.fill` is called
with bar ``t + 1``: all of them at once through the env's :func:`~finpod.env.accounting.execute_orders`
(sells first, buys scaled to the cash, fee and half-spread charged in cash, volume caps and the
tradable mask from the env's own market table, :func:`~finpod.env.market.build_market`). What does
not fill is cancelled, as the env drops it. Money in float64.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import torch

from finpod.env.accounting import execute_orders
from finpod.env.config import EnvConfig
from finpod.env.market import BUY_CAP_ROW, FILL_ROW, SELL_CAP_ROW, Market
from finpod.paper.broker import Account, AssetInfo, BrokerOrder, OrderIntent, OrderRejected

HTTP_UNPROCESSABLE = 422


class SimBroker:
    """The :class:`~finpod.paper.broker.Broker` of a replay over ``market`` (one portfolio).

    Args:
        market: the env's market tables of the replayed panel.
        symbols: the ``M`` tickers, in column order.
        config: costs, band, whole shares, initial cash.
    """

    def __init__(self, market: Market, symbols: tuple[str, ...], config: EnvConfig) -> None:
        self.market = market
        self.symbols = symbols
        self.column = {s: i for i, s in enumerate(symbols)}
        self.config = config
        self.cash_usd = torch.tensor([config.initial_cash_usd], dtype=torch.float64)
        self.shares = torch.zeros((1, len(symbols)), dtype=torch.float64)
        self.cost_usd = 0.0
        self._orders: dict[str, BrokerOrder] = {}
        self._pending: list[str] = []
        self._ids = itertools.count(1)

    def submit(self, intent: OrderIntent) -> BrokerOrder:
        """Accept a market order; it fills at the next :meth:`fill`."""
        if intent.client_order_id in self._orders:
            raise OrderRejected("client_order_id must be unique", HTTP_UNPROCESSABLE)
        order = BrokerOrder(
            intent.client_order_id,
            f"sim-{next(self._ids)}",
            intent.symbol,
            intent.side,
            intent.qty,
            "accepted",
            0.0,
            0.0,
        )
        self._orders[intent.client_order_id] = order
        self._pending.append(intent.client_order_id)
        return order

    def fill(self, bar: int) -> None:
        """Fill every pending order in bar ``bar`` of the market (the bar after the decision)."""
        row = self.market.bars[bar].to(torch.float64)
        orders = torch.zeros_like(self.shares)
        for cid in self._pending:
            order = self._orders[cid]
            orders[0, self.column[order.symbol]] += order.qty if order.side == "buy" else -order.qty
        before = self.shares
        fills = execute_orders(
            orders,
            self.cash_usd,
            self.shares,
            row[FILL_ROW][None],
            buy_limit_shares=row[BUY_CAP_ROW][None],
            sell_limit_shares=row[SELL_CAP_ROW][None],
            config=self.config,
        )
        self.cash_usd, self.shares = fills.cash_usd, fills.shares
        self.cost_usd += float(fills.cost_usd[0])
        done = (fills.shares - before)[0].numpy()
        price = row[FILL_ROW].numpy()
        slip = self.config.half_spread_fraction
        for cid in self._pending:
            order = self._orders[cid]
            col = self.column[order.symbol]
            filled = min(abs(float(done[col])), order.qty)
            executed = price[col] * (1.0 + slip if order.side == "buy" else 1.0 - slip)
            status = "filled" if filled >= order.qty * (1 - 1e-12) else "canceled"
            self._orders[cid] = replace(
                order, status=status, filled_qty=filled, filled_avg_price_usd=float(executed)
            )
        self._pending = []

    def order_by_client_id(self, client_order_id: str) -> BrokerOrder | None:
        """The order, or ``None``."""
        return self._orders.get(client_order_id)

    def open_orders(self) -> list[BrokerOrder]:
        """Orders waiting for the next fill."""
        return [self._orders[c] for c in self._pending]

    def cancel(self, broker_id: str) -> None:
        """Drop a pending order."""
        for cid in list(self._pending):
            if self._orders[cid].broker_id == broker_id:
                self._pending.remove(cid)
                self._orders[cid] = replace(self._orders[cid], status="canceled")

    def positions(self) -> dict[str, float]:
        """Shares per symbol."""
        held = self.shares[0].numpy()
        return {s: float(held[i]) for i, s in enumerate(self.symbols) if held[i] != 0.0}

    def shares_array(self) -> np.ndarray:
        """``(M,)`` float64 holdings in column order (exact, no dict round trip)."""
        return self.shares[0].numpy().copy()

    def account(self) -> Account:
        """Cash; equity is valued by the caller at the bar's close."""
        cash = float(self.cash_usd[0])
        return Account(equity_usd=cash, cash_usd=cash, buying_power_usd=cash, trading_blocked=False)

    def asset(self, symbol: str) -> AssetInfo:
        """Every replayed symbol is tradable (the market table's caps say when it is not)."""
        return AssetInfo(symbol, True, True)
