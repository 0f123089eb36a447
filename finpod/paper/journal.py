"""The paper trader's durable journal: one SQLite file (WAL, ``synchronous=FULL``) per run and trader.

Every write is its own committed transaction, so a SIGKILL at any instant leaves the file at the
last committed write and nothing half-written. What it holds:

* ``orders``: every order intent, written BEFORE it is sent, then the broker's acknowledgements
  (status, broker id, filled quantity, average price);
* ``fills``: each increment of an order's filled quantity (shares, price), in order;
* ``baseline``: positions the account held when the journal was created (adopted, not traded);
* ``decisions``: target weights per decision bar, with equity and cash then;
* ``events``: everything else, append-only (reconciliation, limits hit, errors, halts, equity).

The journal's positions are ``baseline + signed fills``; :mod:`finpod.paper.reconcile` compares
them with the broker's.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from finpod.errors import SpecError
from finpod.paper.broker import FINAL_STATUSES, BrokerOrder, OrderIntent

SCHEMA: Final[str] = """
CREATE TABLE IF NOT EXISTS orders (
    client_order_id TEXT PRIMARY KEY, bar_ns INTEGER NOT NULL, symbol TEXT NOT NULL,
    side TEXT NOT NULL, qty REAL NOT NULL, price_usd REAL NOT NULL, status TEXT NOT NULL,
    broker_id TEXT, filled_qty REAL NOT NULL DEFAULT 0, filled_avg_price_usd REAL NOT NULL DEFAULT 0,
    dry_run INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, message TEXT
);
CREATE TABLE IF NOT EXISTS fills (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, client_order_id TEXT NOT NULL, symbol TEXT NOT NULL,
    qty REAL NOT NULL, price_usd REAL NOT NULL, at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS baseline (symbol TEXT PRIMARY KEY, qty REAL NOT NULL);
CREATE TABLE IF NOT EXISTS decisions (
    bar_ns INTEGER PRIMARY KEY, trader TEXT NOT NULL, weights TEXT NOT NULL,
    equity_usd REAL NOT NULL, cash_usd REAL NOT NULL, at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, kind TEXT NOT NULL,
    bar_ns INTEGER, message TEXT NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
INTENT: Final[str] = "intent"
"""Status of an order written to the journal and not yet acknowledged by the broker."""
NOT_SENT: Final[str] = "not_sent"
"""Status of an intent that was never sent (the broker never had it, or the kill switch stopped it)."""
DRY_RUN: Final[str] = "dry_run"
"""Status of an order a ``--dry-run`` computed and never sent."""
QTY_EPSILON: Final[float] = 1e-9


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class JournalOrder:
    """An order row of the journal (see :class:`~finpod.paper.broker.BrokerOrder` for fields)."""

    client_order_id: str
    bar_ns: int
    symbol: str
    side: str
    qty: float
    price_usd: float
    status: str
    broker_id: str | None
    filled_qty: float
    filled_avg_price_usd: float
    dry_run: bool
    created_at: str
    message: str | None

    @property
    def final(self) -> bool:
        """Nothing more can fill (a dry-run order never could)."""
        return self.dry_run or self.status in FINAL_STATUSES


@dataclass(frozen=True)
class Event:
    """One row of ``events``."""

    seq: int
    at: str
    kind: str
    bar_ns: int | None
    message: str
    data: dict[str, Any]


class Journal:
    """The journal file; open with :meth:`open`, close with :meth:`close` (or a ``with`` block)."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path) -> Journal:
        """Open (creating) the journal at ``path`` in WAL mode with full fsync.

        Raises:
            SpecError: the file is not a journal (corrupt or another database).
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as err:
            conn.close()
            raise SpecError(
                f"{path}: not a paper-trading journal ({err}); move it away to start a new one"
            ) from None
        return cls(conn, path)

    def close(self) -> None:
        """Close the file (every write is already committed)."""
        self._conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ orders

    def record_intent(self, intent: OrderIntent, *, dry_run: bool) -> bool:
        """Write an order before it is sent; ``False`` when that id is already journaled."""
        return self._insert_intent(intent, dry_run=dry_run, now=_now())

    def _insert_intent(self, intent: OrderIntent, *, dry_run: bool, now: str) -> bool:
        cursor = self._conn.execute(
            "INSERT OR IGNORE INTO orders (client_order_id, bar_ns, symbol, side, qty, price_usd, status,"
            " dry_run, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                intent.client_order_id,
                intent.bar_ns,
                intent.symbol,
                intent.side,
                intent.qty,
                intent.price_usd,
                DRY_RUN if dry_run else INTENT,
                int(dry_run),
                now,
                now,
            ),
        )
        return cursor.rowcount == 1

    def acknowledge(self, order: BrokerOrder) -> float:
        """Record the broker's view of one of our orders; returns the newly filled shares (>= 0).

        A rise of the filled quantity becomes a ``fills`` row (its price is the increment of
        ``filled_qty x filled_avg_price``), in the same transaction as the order's new state.
        """
        row = self.order(order.client_order_id)
        if row is None:
            raise SpecError(
                f"journal: broker order {order.client_order_id} is not in the journal; "
                "it was not sent by this trader"
            )
        now = _now()
        new_fill = order.filled_qty - row.filled_qty
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            if new_fill > QTY_EPSILON:
                paid = (
                    order.filled_qty * order.filled_avg_price_usd - row.filled_qty * row.filled_avg_price_usd
                )
                signed = new_fill if row.side == "buy" else -new_fill
                self._conn.execute(
                    "INSERT INTO fills (client_order_id, symbol, qty, price_usd, at) VALUES (?, ?, ?, ?, ?)",
                    (order.client_order_id, row.symbol, signed, paid / new_fill, now),
                )
            self._conn.execute(
                "UPDATE orders SET status = ?, broker_id = ?, filled_qty = ?, filled_avg_price_usd = ?,"
                " updated_at = ? WHERE client_order_id = ?",
                (
                    order.status,
                    order.broker_id,
                    max(order.filled_qty, row.filled_qty),
                    order.filled_avg_price_usd,
                    now,
                    order.client_order_id,
                ),
            )
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return max(new_fill, 0.0)

    def mark(self, client_order_id: str, status: str, message: str) -> None:
        """Set an order's status with a reason (``rejected``, ``not_sent``...)."""
        self._conn.execute(
            "UPDATE orders SET status = ?, message = ?, updated_at = ? WHERE client_order_id = ?",
            (status, message, _now(), client_order_id),
        )

    def order(self, client_order_id: str) -> JournalOrder | None:
        """One order row."""
        rows = self._orders("WHERE client_order_id = ?", (client_order_id,))
        return rows[0] if rows else None

    def orders(self, *, since_ns: int | None = None) -> list[JournalOrder]:
        """Every order (of decision bars at or after ``since_ns``), oldest first."""
        if since_ns is None:
            return self._orders("", ())
        return self._orders("WHERE bar_ns >= ?", (since_ns,))

    def pending_orders(self) -> list[JournalOrder]:
        """Sent (or maybe sent) orders that can still fill."""
        return [o for o in self._orders("WHERE dry_run = 0", ()) if not o.final]

    def _orders(self, where: str, args: tuple[Any, ...]) -> list[JournalOrder]:
        rows = self._conn.execute(
            "SELECT client_order_id, bar_ns, symbol, side, qty, price_usd, status, broker_id, filled_qty,"
            f" filled_avg_price_usd, dry_run, created_at, message FROM orders {where}"
            " ORDER BY created_at, client_order_id",
            args,
        ).fetchall()
        return [
            JournalOrder(
                client_order_id=r[0],
                bar_ns=int(r[1]),
                symbol=r[2],
                side=r[3],
                qty=float(r[4]),
                price_usd=float(r[5]),
                status=r[6],
                broker_id=r[7],
                filled_qty=float(r[8]),
                filled_avg_price_usd=float(r[9]),
                dry_run=bool(r[10]),
                created_at=r[11],
                message=r[12],
            )
            for r in rows
        ]

    def sent_times(self, since_iso: str) -> int:
        """How many real (not dry-run) orders were written at or after ``since_iso``."""
        row = self._conn.execute(
            "SELECT COUNT(*) FROM orders WHERE dry_run = 0 AND created_at >= ?", (since_iso,)
        ).fetchone()
        return int(row[0])

    # ------------------------------------------------------------------ positions

    def set_baseline(self, positions: dict[str, float]) -> bool:
        """Adopt ``positions`` as held before trading began; only once (``False`` after)."""
        if self.meta("baseline_set") is not None:
            return False
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.executemany(
                "INSERT INTO baseline (symbol, qty) VALUES (?, ?)", sorted(positions.items())
            )
            self._conn.execute("INSERT INTO meta (key, value) VALUES ('baseline_set', ?)", (_now(),))
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return True

    def positions(self) -> dict[str, float]:
        """Baseline plus signed fills, per symbol (zeros dropped)."""
        rows = self._conn.execute(
            "SELECT symbol, SUM(qty) FROM (SELECT symbol, qty FROM baseline UNION ALL"
            " SELECT symbol, qty FROM fills) GROUP BY symbol"
        ).fetchall()
        return {s: float(q) for s, q in rows if abs(q) > QTY_EPSILON}

    def fills(self) -> list[tuple[str, str, float, float, str]]:
        """``(client_order_id, symbol, signed qty, price, at)`` of every fill, in order."""
        return list(
            self._conn.execute("SELECT client_order_id, symbol, qty, price_usd, at FROM fills ORDER BY seq")
        )

    # ------------------------------------------------------------------ decisions, events, meta

    def record_decision(
        self,
        bar_ns: int,
        trader: str,
        weights: dict[str, float],
        equity_usd: float,
        cash_usd: float,
        *,
        intents: Sequence[OrderIntent] = (),
        dry_run: bool = False,
    ) -> bool:
        """Write a decision bar's target weights and all its order intents in one transaction.

        A kill after this write leaves every order of the decision in the journal (``intent``, or
        ``dry_run``): reconciliation settles each one, none is lost between the decision and its
        POSTs. Returns ``False`` when that bar was decided before (nothing is written then).
        """
        now = _now()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._conn.execute(
                "INSERT OR IGNORE INTO decisions (bar_ns, trader, weights, equity_usd, cash_usd, at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (bar_ns, trader, json.dumps(weights), equity_usd, cash_usd, now),
            )
            fresh = cursor.rowcount == 1
            if fresh:
                for intent in intents:
                    self._insert_intent(intent, dry_run=dry_run, now=now)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return fresh

    def decisions(self) -> list[tuple[int, str, dict[str, float], float, float]]:
        """``(bar_ns, trader, weights, equity, cash)`` per decision bar, in bar order."""
        rows = self._conn.execute(
            "SELECT bar_ns, trader, weights, equity_usd, cash_usd FROM decisions ORDER BY bar_ns"
        ).fetchall()
        return [(int(b), t, json.loads(w), float(e), float(c)) for b, t, w, e, c in rows]

    def last_decision_bar(self) -> int | None:
        """The latest decided bar, UTC ns."""
        row = self._conn.execute("SELECT MAX(bar_ns) FROM decisions").fetchone()
        return None if row[0] is None else int(row[0])

    def event(self, kind: str, message: str, *, bar_ns: int | None = None, **data: Any) -> None:
        """Append an event (``kind``: reconcile, limit, error, halt, equity, stale, bar...)."""
        self._conn.execute(
            "INSERT INTO events (at, kind, bar_ns, message, data) VALUES (?, ?, ?, ?, ?)",
            (_now(), kind, bar_ns, message, json.dumps(data, default=str)),
        )

    def events(self, kind: str | None = None) -> list[Event]:
        """Events (of one kind), oldest first."""
        sql = "SELECT seq, at, kind, bar_ns, message, data FROM events"
        rows = self._conn.execute(
            sql + (" WHERE kind = ?" if kind else "") + " ORDER BY seq", (kind,) if kind else ()
        ).fetchall()
        return [Event(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]

    def meta(self, key: str) -> str | None:
        """A stored setting."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Store a setting."""
        self._conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
