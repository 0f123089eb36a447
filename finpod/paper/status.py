"""``finpod paper status RUN_DIR``: what a paper trader holds, did today, and how it compares.

Read from the journal only (no broker call, no key needed): positions, the latest session's orders
and fills, equity against the backtest's expectation (the run's ``metrics.json``: the backtest's
annual return, compounded over the sessions traded), limits hit and the last bar seen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pandas as pd

from finpod.errors import SpecError
from finpod.paper.decision import LABEL_META, PAPER_DIR, PICK, RESOLVED_META, TRADER_NAMES
from finpod.paper.journal import Journal
from finpod.paper.loop import journal_path
from finpod.report.artifacts import METRICS_FILE
from finpod.report.verdict import BENCHMARK_NAME
from finpod.rundir import RunDir

LIMIT_KINDS: Final[tuple[str, ...]] = (
    "limit",
    "halt",
    "stale",
    "closed",
    "rejected",
    "bar_refused",
    "reconnect",
)
SESSIONS_PER_YEAR: Final[int] = 252
RECENT_EVENTS: Final[int] = 10


def _ny_date(bar_ns: int) -> str:
    return pd.Timestamp(bar_ns, tz="UTC").tz_convert("America/New_York").strftime("%Y-%m-%d")


BUY_AND_HOLD_NOTE: Final[str] = (
    "the report's equal_weight row buys once and holds; the deployed equal weight re-targets 1/M "
    "every bar through the band, so the paces differ by the rebalancing"
)
"""Said beside the backtest pace of a ``pick`` that resolved to equal weight."""


def _backtest_expectation(run: RunDir, trader: str) -> dict[str, Any] | None:
    path = run.root / METRICS_FILE
    if not path.is_file():
        return None
    traders = (
        json.loads(path.read_text(encoding="utf-8"))
        .get("segments", {})
        .get("backtest", {})
        .get("traders", {})
    )
    names = [
        n for n in traders if n == trader or (trader in ("ensemble", "trajectory") and n.startswith(trader))
    ]
    if not names:
        return None
    metrics = traders[names[0]].get("metrics", {})
    return {
        "trader": names[0],
        "annual_return": metrics.get("annual_return"),
        "sharpe_ratio": metrics.get("sharpe_ratio"),
        "note": BUY_AND_HOLD_NOTE if names[0] == BENCHMARK_NAME else None,
    }


def paper_status(run_dir: Path, trader: str, *, dry_run: bool = False) -> dict[str, Any]:
    """The status of ``trader``'s paper trading (or its dry run) in ``run_dir``, JSON-ready.

    ``resolved`` and ``trader_label`` say what the trader resolved to at the journal's first start
    (``pick``: best or equal_weight, with the run's pick sentence); the backtest expectation is that
    trader's (for equal weight, the report's buy-and-hold row, with :data:`BUY_AND_HOLD_NOTE`).

    Raises:
        SpecError: not a run folder, an unknown trader, or no journal yet.
    """
    if trader not in TRADER_NAMES:
        raise SpecError(f"--trader: unknown trader {trader!r}; fix: use best, ensemble, trajectory or pick")
    run = RunDir(Path(run_dir).expanduser().resolve())
    run.read_info()
    path = journal_path(run.root / PAPER_DIR, trader, dry_run=dry_run)
    if not path.is_file():
        other = journal_path(run.root / PAPER_DIR, trader, dry_run=not dry_run)
        if other.is_file():
            hint = "drop --dry-run to read the real one" if dry_run else "add --dry-run to read the dry run's"
        else:
            hint = f"start `finpod paper {run.root}{' --dry-run' if dry_run else ''}`"
        kind = "dry-run journal" if dry_run else "paper journal"
        raise SpecError(f"{run.root}: no {kind} for trader {trader}; fix: {hint}")
    with Journal.open(path) as journal:
        decisions = journal.decisions()
        orders = journal.orders()
        fills = journal.fills()
        events = journal.events()
        positions = journal.positions()
        last_bar = journal.meta("last_bar_ns")
        resolved = journal.meta(RESOLVED_META) or (None if trader == PICK else trader)
        label = journal.meta(LABEL_META) or trader
    session = _ny_date(decisions[-1][0]) if decisions else None
    today = [o for o in orders if session is not None and _ny_date(o.bar_ns) == session]
    today_ids = {o.client_order_id for o in today}
    equity = [(pd.Timestamp(b, tz="UTC").isoformat(), e) for b, _, _, e, _ in decisions]
    sessions = sorted({_ny_date(b) for b, *_ in decisions})
    expectation = None if resolved is None else _backtest_expectation(run, resolved)
    expected_return = None
    if expectation is not None and expectation["annual_return"] is not None and sessions:
        expected_return = (1.0 + float(expectation["annual_return"])) ** (
            len(sessions) / SESSIONS_PER_YEAR
        ) - 1.0
    realised = equity[-1][1] / equity[0][1] - 1.0 if len(equity) >= 2 else None
    hits = [e for e in events if e.kind in LIMIT_KINDS]
    return {
        "run_id": run.run_id,
        "trader": trader,
        "resolved": resolved,
        "trader_label": label,
        "journal": str(path),
        "dry_run": any(e.kind == "dry_run" for e in events),
        "last_bar": None if last_bar is None else pd.Timestamp(int(last_bar), tz="UTC").isoformat(),
        "positions": positions,
        "decisions": len(decisions),
        "last_decision": None
        if not decisions
        else {
            "bar": pd.Timestamp(decisions[-1][0], tz="UTC").isoformat(),
            "weights": decisions[-1][2],
            "equity_usd": decisions[-1][3],
        },
        "session": session,
        "orders_today": [
            {
                "client_order_id": o.client_order_id,
                "symbol": o.symbol,
                "side": o.side,
                "qty": o.qty,
                "status": o.status,
                "filled_qty": o.filled_qty,
                "dry_run": o.dry_run,
            }
            for o in today
        ],
        "fills_today": [
            {"client_order_id": c, "symbol": s, "qty": q, "price_usd": p}
            for c, s, q, p, _ in fills
            if c in today_ids
        ],
        "equity": {
            "first_usd": equity[0][1] if equity else None,
            "last_usd": equity[-1][1] if equity else None,
            "return": realised,
            "sessions": len(sessions),
            "backtest": expectation,
            "expected_return": expected_return,
        },
        "limits_hit": {
            kind: sum(1 for e in hits if e.kind == kind)
            for kind in LIMIT_KINDS
            if any(e.kind == kind for e in hits)
        },
        "recent_events": [
            {"at": e.at, "kind": e.kind, "message": e.message} for e in events[-RECENT_EVENTS:]
        ],
    }
