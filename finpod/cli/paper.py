"""``finpod paper``: paper-trade a finished run through Alpaca, show its status, or replay it.

``finpod paper RUN_DIR [--trader best|ensemble|trajectory|pick] [--dry-run]`` trades until the kill
switch (the stop file ``RUN_DIR/paper/STOP``, SIGTERM or Ctrl-C); ``finpod paper status RUN_DIR
[--json]`` reads the journal; ``finpod paper replay RUN_DIR --start D --end D`` runs the live code
path on the run's bars and checks it against the backtest. ``--trader pick``, the spec's default
(``[paper] trader``), deploys the run's saved pick (best, or equal weight when best did not beat it
on validation).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.markup import escape
from rich.table import Table

from finpod.cli import output
from finpod.errors import SpecError

ACTIONS = ("status", "replay")
HELP = (
    "Paper-trade a run through Alpaca, read its journal, or replay it against its backtest.\n\n"
    "finpod paper RUN_DIR [--trader best|ensemble|trajectory|pick] [--dry-run]: trade until the kill "
    "switch (the file RUN_DIR/paper/STOP, SIGTERM or Ctrl-C); keys from APCA_API_KEY_ID and "
    "APCA_API_SECRET_KEY. pick: the run's saved pick (best, or equal weight when best did not beat it "
    "on validation).\n\n"
    "finpod paper status RUN_DIR [--json] [--dry-run]: positions, today's orders and fills, limits hit.\n\n"
    "finpod paper replay RUN_DIR --start D --end D [--json]: the live code path on the run's bars, "
    "checked bar for bar against the backtest."
)
EXIT_MISMATCH = 3
"""Exit status of a replay whose weights or equity differ from the backtest beyond the tolerance."""


def paper_command(
    first: Annotated[
        str, typer.Argument(metavar="RUN_DIR|status|replay", help="a run folder, or status / replay then one")
    ],
    second: Annotated[
        str | None, typer.Argument(metavar="[RUN_DIR]", help="the run after status / replay")
    ] = None,
    trader: Annotated[
        Literal["best", "ensemble", "trajectory", "pick"] | None,
        typer.Option(help="the trader; pick: the run's saved pick (default: the spec's paper.trader)"),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="journal decisions and orders, send none (status: read that journal)"),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="status, replay: one JSON document on stdout")
    ] = False,
    start: Annotated[str | None, typer.Option(help="replay: first date, YYYY-MM-DD")] = None,
    end: Annotated[str | None, typer.Option(help="replay: last date, YYYY-MM-DD")] = None,
    clock: Annotated[
        Literal["wall", "feed"], typer.Option(help="wall, or feed: time follows the bars (a simulated feed)")
    ] = "wall",
) -> None:
    """Paper-trade a run through Alpaca, read its journal, or replay it against its backtest."""
    action, run_dir = (first, second) if first in ACTIONS else ("trade", first)
    if run_dir is None:
        raise SpecError(
            f"finpod paper {action}: RUN_DIR missing; fix: finpod paper {action} reports/<run_id>"
        )
    if action != "trade" and second is None:
        raise SpecError(
            f"finpod paper {action}: RUN_DIR missing; fix: finpod paper {action} reports/<run_id>"
        )
    if action == "trade" and second is not None:
        raise SpecError(
            f"finpod paper: unexpected argument {second!r}; fix: finpod paper RUN_DIR [--dry-run]"
        )
    if action == "replay" and (not start or not end):
        raise SpecError(
            f"finpod paper replay: --start and --end are required; fix: {_replay_dates(Path(run_dir))}"
        )
    path = Path(run_dir)
    chosen = trader or _spec_trader(path)
    if action == "status":
        _status(path, chosen, as_json, dry_run)
    elif action == "replay":
        _replay(path, chosen, start or "", end or "", as_json)
    else:
        from finpod.paper.loop import run_paper

        sys.exit(run_paper(path, chosen, dry_run=dry_run, clock=clock))


def _replay_dates(run_dir: Path) -> str:
    """``--start D --end D`` over the run's backtest segment (a placeholder when the run is unreadable)."""
    from finpod.errors import FinpodError
    from finpod.rundir import RunDir

    try:
        first, last = RunDir(run_dir.expanduser().resolve()).load_spec().segments.backtest
    except (FinpodError, OSError):
        return "--start YYYY-MM-DD --end YYYY-MM-DD (dates inside the run's backtest segment)"
    return f"--start {first} --end {last} (the run's backtest segment)"


def _spec_trader(run_dir: Path) -> str:
    from finpod.rundir import RunDir

    run = RunDir(run_dir.expanduser().resolve())
    run.read_info()
    return run.load_spec().paper.trader


def _status(run_dir: Path, trader: str, as_json: bool, dry_run: bool) -> None:
    from finpod.paper.status import paper_status

    status = paper_status(run_dir, trader, dry_run=dry_run)
    if as_json:
        output.print_json(status)
        return
    console = output.out_console()
    equity: dict[str, Any] = status["equity"]
    console.print(
        f"[bold]{status['run_id']}[/] trader {escape(status['trader_label'])}"
        f"{' (dry run)' if status['dry_run'] else ''}: "
        f"{status['decisions']} decisions, last bar {status['last_bar']}",
        soft_wrap=True,
    )
    if equity["last_usd"] is not None:
        expected = equity["expected_return"]
        console.print(
            f"equity {equity['last_usd']:,.2f} USD, return {equity['return'] or 0.0:+.3%} over "
            f"{equity['sessions']} session(s)"
            + ("" if expected is None else f"; the backtest's pace: {expected:+.3%}"),
            soft_wrap=True,
        )
        note = (equity.get("backtest") or {}).get("note")
        if expected is not None and note:
            console.print(f"note: {note}", soft_wrap=True, markup=False)
    table = Table("symbol", "shares", title="positions (journal)")
    for symbol, qty in sorted(status["positions"].items()):
        table.add_row(symbol, f"{qty:g}")
    console.print(table)
    orders = Table(
        "order", "side", "qty", "symbol", "status", "filled", title=f"orders of {status['session']}"
    )
    for o in status["orders_today"]:
        orders.add_row(
            o["client_order_id"], o["side"], f"{o['qty']:g}", o["symbol"], o["status"], f"{o['filled_qty']:g}"
        )
    console.print(orders)
    if status["limits_hit"]:
        console.print(
            "limits hit: " + ", ".join(f"{k} x{v}" for k, v in status["limits_hit"].items()), soft_wrap=True
        )


def _replay(run_dir: Path, trader: str, start: str, end: str, as_json: bool) -> None:
    from finpod.paper.replay import EQUITY_RTOL, FEATURE_TOLERANCE, WEIGHT_TOLERANCE, replay

    result = replay(run_dir, start, end, trader)
    figures = {
        "trader": trader,
        "resolved": result.resolved,
        "trader_label": result.label,
        "start": start,
        "end": end,
        "bars": len(result.timestamps),
        "weight_max_abs_diff": result.weight_max_abs_diff,
        "weight_tolerance": WEIGHT_TOLERANCE,
        "equity_max_rel_diff": result.equity_max_rel_diff,
        "equity_rtol": EQUITY_RTOL,
        "feature_max_abs_diff": result.feature_max_abs_diff,
        "feature_tolerance": FEATURE_TOLERANCE,
        "final_equity_usd": float(result.replay_equity_usd[-1]),
        "backtest_final_equity_usd": float(result.backtest_equity_usd[-1]),
        "matches": result.matches,
        "journal": str(result.journal),
    }
    if as_json:
        output.print_json(figures)
    else:
        output.out_console().print(
            f"replay {result.label} {start}..{end}: {figures['bars']} bars; target weights max |diff| "
            f"{result.weight_max_abs_diff:.3g} (tolerance {WEIGHT_TOLERANCE:g}), equity max relative diff "
            f"{result.equity_max_rel_diff:.3g} (tolerance {EQUITY_RTOL:g}), features max |diff| "
            f"{result.feature_max_abs_diff:.3g} sigmas; final equity {figures['final_equity_usd']:,.2f} USD "
            f"(backtest {figures['backtest_final_equity_usd']:,.2f}); journal {result.journal}"
            + ("\nparity: the replayed trader is the backtested one" if result.matches else ""),
            markup=False,
        )
    if not result.matches:
        output.err_console(quiet=False).print(
            "error: the replay differs from the backtest beyond the tolerance", markup=False
        )
        sys.exit(EXIT_MISMATCH)


def register(app: typer.Typer) -> None:
    """Add ``finpod paper`` to the top-level app."""
    app.command("paper", help=HELP)(paper_command)
