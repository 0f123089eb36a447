"""Idempotent order submission: write the intent, send once, and after any failure ask before resending.

The rule (no order is ever sent twice): an intent is committed to the journal before its POST; after
a timeout, a dropped connection, a 429 or a 5xx the order is looked up by its deterministic
``client_order_id`` before any new POST, and only an order the broker says it never had is sent
again. A broker that still cannot be reached after the attempts leaves the order ``intent`` in the
journal; reconciliation resolves it at the next start or reconnect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from finpod.paper.broker import Broker, BrokerBusy, BrokerOrder, BrokerUnreachable, OrderIntent, OrderRejected
from finpod.paper.journal import INTENT, Journal

logger = logging.getLogger("finpod.paper")
REJECTED: Final[str] = "rejected"


@dataclass(frozen=True)
class SubmitPolicy:
    """How hard to try one order.

    Attributes:
        attempts: requests (POSTs and look-ups together) before giving up for now.
        max_wait_s: longest pause honoured from a ``Retry-After`` header, seconds.
        unreachable_wait_s: pause after a timeout or dropped connection, seconds.
    """

    attempts: int = 6
    max_wait_s: float = 30.0
    unreachable_wait_s: float = 1.0


def place_order(
    broker: Broker,
    journal: Journal,
    intent: OrderIntent,
    *,
    policy: SubmitPolicy,
    sleep: Callable[[float], None] = time.sleep,
    journaled: bool = False,
) -> BrokerOrder | None:
    """Send ``intent`` at most once, whatever fails on the way.

    Args:
        broker: where to send it.
        journal: the durable journal (the intent is committed before the POST).
        intent: the order.
        policy: attempts and pauses.
        sleep: pause function (tests pass a fake clock).
        journaled: the caller wrote this intent moments ago with its decision
            (:meth:`~finpod.paper.journal.Journal.record_decision`) and nothing has sent it yet.

    Returns:
        The broker's order, or ``None`` when it was rejected, was final already, or stays unresolved
        (the journal says which).
    """
    cid = intent.client_order_id
    written = journal.order(cid) if journaled else None
    fresh = written.status == INTENT if written is not None else journal.record_intent(intent, dry_run=False)
    if not fresh:
        row = journal.order(cid)
        if row is not None and row.final:
            return None
    must_look_up = not fresh
    for _ in range(policy.attempts):
        try:
            if must_look_up:
                found = broker.order_by_client_id(cid)
                if found is not None:
                    journal.acknowledge(found)
                    journal.event(
                        "ack", f"{cid} found at the broker after a failed submit", client_order_id=cid
                    )
                    return found
                must_look_up = False
            order = broker.submit(intent)
        except BrokerUnreachable as err:
            journal.event("error", str(err), bar_ns=intent.bar_ns, client_order_id=cid)
            logger.warning("%s; looking the order up before any retry", err)
            must_look_up = True
            sleep(policy.unreachable_wait_s)
            continue
        except BrokerBusy as err:
            journal.event(
                "error", str(err), bar_ns=intent.bar_ns, client_order_id=cid, retry_after_s=err.retry_after_s
            )
            logger.warning("%s; waiting %.1f s", err, err.retry_after_s)
            must_look_up = True
            sleep(min(err.retry_after_s, policy.max_wait_s))
            continue
        except OrderRejected as err:
            journal.mark(cid, REJECTED, str(err))
            journal.event(
                "rejected", str(err), bar_ns=intent.bar_ns, client_order_id=cid, symbol=intent.symbol
            )
            logger.warning("order rejected: %s", err)
            return None
        journal.acknowledge(order)
        journal.event("ack", f"{cid} {order.status}", bar_ns=intent.bar_ns, client_order_id=cid)
        return order
    message = f"{cid}: broker unreachable after {policy.attempts} tries; left unresolved for reconciliation"
    journal.event("error", message, bar_ns=intent.bar_ns, client_order_id=cid)
    logger.error(message)
    return None


def refresh_orders(broker: Broker, journal: Journal) -> int:
    """Ask the broker about every journaled order that can still fill; returns newly filled orders.

    Raises:
        BrokerUnreachable, BrokerBusy: the broker could not be asked.
    """
    changed = 0
    for row in journal.pending_orders():
        if row.status == "intent":
            continue  # unresolved submits are settled by reconciliation, not here
        found = broker.order_by_client_id(row.client_order_id)
        if found is not None and journal.acknowledge(found) > 0:
            changed += 1
            message = f"{found.client_order_id} {found.status} {found.filled_qty:g} {found.symbol}"
            journal.event("fill", message)
            logger.info("fill: %s", message)
    return changed


def cancel_open_orders(broker: Broker, journal: Journal) -> int:
    """Cancel every open order this trader placed (the kill switch); returns how many were asked.

    An order that fills or ends before its cancel lands (the broker answers 422) is journaled and
    skipped: the other orders are still cancelled, and the refresh records its fill.

    Raises:
        BrokerUnreachable, BrokerBusy: the broker could not be asked.
    """
    cancelled = 0
    for order in broker.open_orders():
        if journal.order(order.client_order_id) is None:
            continue  # not ours: reconciliation reports it, the kill switch leaves it alone
        try:
            broker.cancel(order.broker_id)
        except OrderRejected as err:  # it filled or ended between the listing and the cancel (422)
            journal.event("cancel", f"{order.client_order_id} not cancelled: {err}")
            logger.warning("%s not cancelled: %s", order.client_order_id, err)
            continue
        message = f"{order.client_order_id} cancelled by the kill switch"
        journal.event("cancel", message)
        logger.warning("%s", message)
        cancelled += 1
    refresh_orders(broker, journal)
    return cancelled
