"""Reconciliation: make the journal agree with the broker (the source of truth) before any new order.

Run at start and after every reconnect. Steps: every journaled order that could still fill is looked
up by its client id (an intent the broker never received becomes ``not_sent``; fills the journal
missed, e.g. after a kill between submit and acknowledgement, are recorded); on a journal's first
start the account's positions are adopted as its baseline; then the broker's open orders and
positions are compared with the journal. Whatever cannot be explained (an open order this trader did
not place, a position that differs: a manual trade) is a problem, and trading stops with a message
naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from finpod.paper.broker import Broker
from finpod.paper.journal import INTENT, NOT_SENT, Journal

POSITION_TOLERANCE_SHARES: Final[float] = 1e-6


@dataclass(frozen=True)
class Reconciliation:
    """What reconciliation found.

    Attributes:
        problems: one line per unexplained difference (empty: safe to trade).
        resolved: journaled orders whose state was updated from the broker.
        not_sent: intents the broker never received.
        baseline_adopted: this was the journal's first start and the account's positions were adopted.
    """

    problems: list[str] = field(default_factory=list)
    resolved: int = 0
    not_sent: int = 0
    baseline_adopted: bool = False

    @property
    def ok(self) -> bool:
        """No unexplained difference."""
        return not self.problems


RECHECKS: Final[int] = 2
"""Times reconciliation looks a still-open order's fills and the positions up again when they
disagree (a fill can land between the two reads)."""


def _position_differences(held: dict[str, float], mine: dict[str, float]) -> list[str]:
    """One line per symbol whose broker quantity differs from the journal's by more than the tolerance."""
    lines = []
    for symbol in sorted(set(held) | set(mine)):
        broker_qty, journal_qty = held.get(symbol, 0.0), mine.get(symbol, 0.0)
        if abs(broker_qty - journal_qty) > POSITION_TOLERANCE_SHARES:
            lines.append(
                f"{symbol}: the broker holds {broker_qty:g} shares, the journal expects {journal_qty:g} "
                "(a trade outside this trader?)"
            )
    return lines


def reconcile(broker: Broker, journal: Journal) -> Reconciliation:
    """Bring ``journal`` up to date with ``broker`` and list what does not agree.

    Raises:
        BrokerUnreachable, BrokerBusy: the broker could not be asked (nothing is decided then).
    """
    resolved = not_sent = 0
    problems: list[str] = []
    # first a call that must succeed: a wrong API URL answers 404 here, before a look-up's 404 could
    # be taken for "the broker never received it" and an order that did land marked never sent
    open_now = broker.open_orders()
    for row in journal.pending_orders():
        found = broker.order_by_client_id(row.client_order_id)
        if found is None:
            if row.status == INTENT:
                journal.mark(row.client_order_id, NOT_SENT, "the broker never received it")
                not_sent += 1
            else:
                problems.append(
                    f"order {row.client_order_id} ({row.side} {row.qty:g} {row.symbol}) was acknowledged "
                    "but the broker no longer knows it"
                )
            continue
        journal.acknowledge(found)
        resolved += 1
    ours = {o.client_order_id for o in journal.orders()}
    for order in open_now:
        if order.client_order_id not in ours:
            problems.append(
                f"open order {order.client_order_id} ({order.side} {order.qty:g} {order.symbol}) was not "
                "placed by this trader"
            )
    held = broker.positions()
    traded = journal.positions()  # before a baseline exists: the journal's own fills only
    baseline = {s: held.get(s, 0.0) - traded.get(s, 0.0) for s in set(held) | set(traded)}
    adopted = (
        journal.set_baseline({s: q for s, q in baseline.items() if abs(q) > POSITION_TOLERANCE_SHARES})
        if journal.meta("baseline_set") is None
        else False
    )
    if adopted:
        journal.event(
            "reconcile", "first start: the account's positions are adopted as the baseline", positions=held
        )
    differences = _position_differences(held, journal.positions())
    for _ in range(RECHECKS):
        if not differences or not journal.pending_orders():
            break
        # an order still open may have filled after its look-up above and before the positions
        # were read: look its fills up again, and the positions after them
        for row in journal.pending_orders():
            found = broker.order_by_client_id(row.client_order_id)
            if found is not None:
                journal.acknowledge(found)
        held = broker.positions()
        differences = _position_differences(held, journal.positions())
    problems.extend(differences)
    result = Reconciliation(problems, resolved, not_sent, adopted)
    if result.ok:
        journal.event("reconcile", f"ok: {resolved} order(s) updated, {not_sent} never sent", positions=held)
    else:
        journal.event("halt", "reconciliation failed: " + "; ".join(problems), problems=problems)
    return result
