"""One decision: a bar's features and the broker's portfolio in, journaled orders out.

The same :class:`PaperSession` runs live (Alpaca, with the limits) and in the parity replay (the
simulated broker, limits off): observation (env layout) -> trader -> target weights -> orders by the
env's rules (:mod:`finpod.paper.sizing`) -> the journal -> idempotent submission
(:mod:`finpod.paper.orders`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from finpod.env.config import EnvConfig
from finpod.paper.broker import HTTP_NOT_FOUND, Broker, OrderIntent, OrderRejected, Side
from finpod.paper.decision import Trader, bar_stamp, observation, session_position
from finpod.paper.ids import client_order_id
from finpod.paper.journal import NOT_SENT, Journal
from finpod.paper.limits import Guard, Session, daily_loss
from finpod.paper.orders import SubmitPolicy, place_order
from finpod.paper.sizing import OrderLimits, OrderPlan, plan_orders

logger = logging.getLogger("finpod.paper")


@dataclass(frozen=True)
class BarView:
    """One aligned bar of every symbol, at its close.

    Attributes:
        bar_ns: bar start, UTC ns.
        session_open_ns, session_close_ns: its session's regular hours (UTC ns).
        close: ``(M,)`` aligned closes (USD).
        tradable: ``(M,)`` bool, the symbol had a real bar (and is in the universe).
        features: float32 ``(M, F)`` the bar's features.
    """

    bar_ns: int
    session_open_ns: int
    session_close_ns: int
    close: np.ndarray
    tradable: np.ndarray
    features: torch.Tensor


@dataclass(frozen=True)
class Decision:
    """What one bar decided: the plan, and the orders sent (or journaled in a dry run)."""

    bar_ns: int
    plan: OrderPlan
    intents: list[OrderIntent]
    equity_usd: float


class PaperSession:
    """Decides on bars and sends orders for one run and trader.

    Args:
        run_id: the run folder's name (part of every client order id).
        trader: the deployed trader.
        symbols: the ``M`` tickers in column order.
        freq: ``"1min"`` or ``"1d"``.
        config: the env settings (costs, band, whole shares).
        limits: order-shape limits (weight and notional caps).
        broker: where orders go.
        journal: the durable journal.
        dry_run: journal the orders, send none.
        guard: the live limits (``None`` in a replay).
        submit_policy: retry pauses for one order.
        sleep: pause function.
    """

    def __init__(
        self,
        *,
        run_id: str,
        trader: Trader,
        symbols: tuple[str, ...],
        freq: str,
        config: EnvConfig,
        limits: OrderLimits,
        broker: Broker,
        journal: Journal,
        dry_run: bool,
        guard: Guard | None = None,
        submit_policy: SubmitPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.run_id, self.trader, self.symbols, self.freq = run_id, trader, symbols, freq
        self.config, self.limits, self.broker, self.journal = config, limits, broker, journal
        self.dry_run, self.guard = dry_run, guard
        self.submit_policy = submit_policy or SubmitPolicy()
        self.sleep = sleep
        self.halted: str | None = None
        self._loss_session: int | None = None
        """Session whose daily loss limit halted trading (a new session lifts that halt)."""
        self._assets: tuple[int, np.ndarray, np.ndarray] | None = None

    def portfolio(self) -> tuple[float, float, np.ndarray]:
        """``(cash, buying power, shares (M,))`` from the broker (a dry run: the journal's positions)."""
        account = self.broker.account()
        held = self.journal.positions() if self.dry_run else self.broker.positions()
        shares = np.array([held.get(s, 0.0) for s in self.symbols], dtype=np.float64)
        return account.cash_usd, account.buying_power_usd, shares

    def decide(self, bar: BarView, price_now: np.ndarray, *, now_ns: int) -> Decision | None:
        """Decide on ``bar`` and send its orders; ``None`` when nothing was decided (and why is journaled).

        Args:
            bar: the bar that just closed.
            price_now: ``(M,)`` the price orders are sized at (live: the latest price; the replay:
                the env's fill price, the next bar's open).
            now_ns: the clock (UTC ns).
        """
        if self.journal.last_decision_bar() is not None and bar.bar_ns <= int(
            self.journal.last_decision_bar() or 0
        ):
            return None  # decided before a restart, or a bar that came twice or out of order
        if self.halted and self._loss_session is not None and bar.session_open_ns != self._loss_session:
            self.journal.event("limit", "new session: the daily loss halt is lifted", bar_ns=bar.bar_ns)
            self.halted, self._loss_session = None, None
        if self.halted:
            return None
        if self.guard is not None:
            day = Session(bar_stamp(bar.session_open_ns)[:10], bar.session_open_ns, bar.session_close_ns)
            blocked = self.guard.before_decision(day, bar.bar_ns, self.freq, now_ns)
            if blocked is not None:
                kind, reason = blocked
                self.journal.event(kind, reason, bar_ns=bar.bar_ns)
                logger.warning("%s", reason)
                if kind == "halt":
                    self.halted = reason
                return None
        working = self._working_orders() if self.guard is not None and not self.dry_run else None
        cash, buying_power, shares = self.portfolio()
        equity = cash + float(shares @ np.asarray(bar.close, dtype=np.float64))
        if working is not None and working.any():
            # orders of earlier bars still working at the broker: decide on the portfolio they leave,
            # or the same move is ordered again every bar until they fill (a double trade)
            shares = shares + working
            cash -= float(working @ np.asarray(price_now, dtype=np.float64))
            names = ", ".join(f"{q:+g} {s}" for s, q in zip(self.symbols, working, strict=True) if q)
            self.journal.event(
                "pending",
                f"orders of earlier bars still open ({names}): decided as if they fill",
                bar_ns=bar.bar_ns,
            )
            logger.info("orders of earlier bars still open (%s): decided as if they fill", names)
        progress = session_position(bar.bar_ns, bar.session_open_ns, bar.session_close_ns, self.freq)
        obs = observation(bar.features, progress, shares, bar.close, cash)
        weights = self.trader.target_weights(obs).to(torch.float64).numpy()
        tradable = np.asarray(bar.tradable, dtype=bool).copy()
        at_broker = np.ones(len(self.symbols), dtype=bool)
        whole = np.zeros(len(self.symbols), dtype=bool)
        if self.guard is not None:
            stop = self._daily_loss(bar, equity)
            if stop is not None:
                weights = np.zeros_like(weights)
                weights[0] = 1.0
                if stop == "halt":
                    self.journal.record_decision(
                        bar.bar_ns, self.trader.name, self._named(weights), equity, cash
                    )
                    return None
            at_broker, whole = self._tradable_now(bar.session_open_ns)
            tradable &= at_broker
            if buying_power < cash:
                reason = (
                    f"buying power {buying_power:.2f} USD is below the cash {cash:.2f} USD: "
                    "buys are sized to the buying power"
                )
                self.journal.event("limit", reason, bar_ns=bar.bar_ns, limit="buying_power")
                logger.warning("%s", reason)
                cash = buying_power
        plan = plan_orders(weights, cash, shares, price_now, tradable, self.config, self.limits)
        plan.delta_shares[~at_broker] = 0.0  # a halted symbol cannot be sold either
        plan.delta_shares[whole] = np.trunc(plan.delta_shares[whole])  # the broker refuses fractions
        intents = self._intents(bar.bar_ns, plan, price_now)
        held_back: list[OrderIntent] = []
        if self.guard is not None and not self.dry_run:
            room = self.guard.rate.room(now_ns)
            intents, held_back = intents[:room], intents[room:]
        # the decision and every order it sends, in one transaction: a kill after it loses none
        self.journal.record_decision(
            bar.bar_ns, self.trader.name, self._named(plan.weights), equity, cash,
            intents=intents, dry_run=self.dry_run,
        )  # fmt: skip
        for kind, cols in (("weight_cap", plan.weight_capped), ("notional_cap", plan.notional_capped)):
            if cols:
                names = ", ".join(self.symbols[c] for c in cols)
                self.journal.event("limit", f"{kind}: cut {names}", bar_ns=bar.bar_ns, limit=kind)
        if held_back:
            reason = f"max_orders_per_minute: {len(held_back)} order(s) held back"
            self.journal.event("limit", reason, bar_ns=bar.bar_ns, limit="max_orders_per_minute")
            logger.warning("%s", reason)
        for i, intent in enumerate(intents):
            logger.info(
                "%s %s %s %.6g %s at ~%.4f", bar_stamp(bar.bar_ns), "DRY-RUN" if self.dry_run else "order",
                intent.side, intent.qty, intent.symbol, intent.price_usd,
            )  # fmt: skip
            if self.dry_run:
                continue
            if self.guard is not None:
                killed = self.guard.kill.reason()
                if killed:
                    self._not_sent(intents[i:], killed, bar.bar_ns)
                    break
                self.guard.rate.note(now_ns)
            place_order(
                self.broker, self.journal, intent, policy=self.submit_policy, sleep=self.sleep, journaled=True
            )
        return Decision(bar.bar_ns, plan, intents, equity)

    def _working_orders(self) -> np.ndarray:
        """``(M,)`` signed shares this trader's open orders have still to fill (buy > 0).

        Read before the positions: a fill landing between the two reads is then counted twice
        (held and still to fill), which under-trades by it once, never trades it twice.
        """
        column = {s: i for i, s in enumerate(self.symbols)}
        working = np.zeros(len(self.symbols), dtype=np.float64)
        for order in self.broker.open_orders():
            if order.symbol not in column or self.journal.order(order.client_order_id) is None:
                continue  # not ours: reconciliation reports it
            left = max(order.qty - order.filled_qty, 0.0)
            working[column[order.symbol]] += left if order.side == "buy" else -left
        return working

    def _not_sent(self, intents: list[OrderIntent], killed: str, bar_ns: int) -> None:
        """The kill switch tripped mid-decision: the rest of its orders are never sent."""
        self.halted = killed
        for intent in intents:
            self.journal.mark(intent.client_order_id, NOT_SENT, f"not sent: {killed}")
        message = f"{killed}: {len(intents)} order(s) of this bar not sent"
        self.journal.event("halt", message, bar_ns=bar_ns)
        logger.warning("%s", message)

    def _named(self, weights: np.ndarray) -> dict[str, float]:
        return {
            "cash": float(weights[0]),
            **{s: float(w) for s, w in zip(self.symbols, weights[1:], strict=True)},
        }

    def _intents(self, bar_ns: int, plan: OrderPlan, price: np.ndarray) -> list[OrderIntent]:
        """Sells first (they free the cash the buys use), then buys, in column order."""
        out: list[OrderIntent] = []
        for want in ("sell", "buy"):
            for col in np.flatnonzero(plan.delta_shares < 0 if want == "sell" else plan.delta_shares > 0):
                side: Side = "sell" if want == "sell" else "buy"
                symbol = self.symbols[int(col)]
                cid = client_order_id(self.run_id, self.trader.name, bar_ns, symbol, side)
                qty = float(abs(plan.delta_shares[col]))
                out.append(OrderIntent(cid, bar_ns, symbol, side, qty, float(price[col])))
        return out

    def _daily_loss(self, bar: BarView, equity: float) -> str | None:
        """``"halt"`` or ``"flatten"`` once the session's loss reaches the limit, else ``None``."""
        assert self.guard is not None
        key = f"day_start_equity:{bar.session_open_ns}"
        start = self.journal.meta(key)
        if start is None:
            self.journal.set_meta(key, repr(equity))
            return None
        loss = daily_loss(float(start), equity)
        settings = self.guard.settings
        if loss < settings.daily_loss_limit:
            return None
        reason = (
            f"daily loss limit: equity {equity:.2f} is {loss:.2%} below the session's first "
            f"{float(start):.2f} (limit {settings.daily_loss_limit:.2%}): {settings.on_daily_loss}"
        )
        self.journal.event("limit", reason, bar_ns=bar.bar_ns, limit="daily_loss_limit")
        logger.warning("%s", reason)
        self.halted, self._loss_session = reason, bar.session_open_ns
        return settings.on_daily_loss

    def _tradable_now(self, session_open_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """``(M,)`` whether the broker lets each symbol trade (halted, delisted: no), and ``(M,)``
        whether it takes whole shares only (not fractionable); asked once a session."""
        if self._assets is not None and self._assets[0] == session_open_ns:
            return self._assets[1], self._assets[2]
        ok = np.ones(len(self.symbols), dtype=bool)
        whole = np.zeros(len(self.symbols), dtype=bool)
        for i, symbol in enumerate(self.symbols):
            try:
                asset = self.broker.asset(symbol)
                tradable = asset.tradable
            except OrderRejected as err:  # 404: the broker no longer lists it (delisted, renamed)
                if err.status_code != HTTP_NOT_FOUND:
                    raise
                tradable = False
            else:
                if tradable and not asset.fractionable and not self.config.whole_shares:
                    whole[i] = True
                    self.journal.event(
                        "limit",
                        f"{symbol} is not fractionable at the broker: whole shares only",
                        symbol=symbol,
                    )
            if not tradable:
                ok[i] = False
                self.journal.event(
                    "limit", f"{symbol} is not tradable at the broker: no order", symbol=symbol
                )
                logger.warning("%s is not tradable at the broker: no order", symbol)
        self._assets = (session_open_ns, ok, whole)
        return ok, whole
