"""``--trader pick``: the run's saved pick (best or equal weight) deployed, pinned, replayed."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from finpod.cli import app
from finpod.errors import SpecError
from finpod.oracle import equal_weight_policy
from finpod.paper.alpaca_broker import AlpacaBroker
from finpod.paper.decision import (
    LABEL_META,
    RESOLVED_META,
    Pick,
    Trader,
    load_live,
    load_run,
    observation,
    pin_trader,
)
from finpod.paper.ids import client_order_id
from finpod.paper.journal import Journal
from finpod.paper.orders import SubmitPolicy
from finpod.paper.replay import EQUITY_RTOL, replay
from finpod.paper.session import BarView, PaperSession
from finpod.paper.sizing import OrderLimits
from finpod.paper.status import BUY_AND_HOLD_NOTE
from finpod.report.verdict import BENCHMARK_NAME, gate_pick
from finpod.spec.sections import PaperSpec
from tests.app.tiny import SEGMENTS
from tests.fakes.alpaca_stream import FakeStreamServer
from tests.fakes.alpaca_trading import FakeTradingServer
from tests.paper.live_kit import KEY_ID, REPO, SECRET, SimMarket, wait_for

START, END = SEGMENTS["backtest"]
BAR_NS = 1_570_046_400_000_000_000  # 2019-10-02 20:00 UTC, a daily bar's start (any bar will do)


def _metrics(run: Path) -> dict[str, Any]:
    return dict(json.loads((run / "metrics.json").read_text(encoding="utf-8")))


def _set_pick(run: Path, pick: dict[str, Any] | None, *, drop: bool = False) -> None:
    """Rewrite the run's saved pick (``drop``: remove the key, as a run from before picks)."""
    metrics = _metrics(run)
    if drop:
        del metrics["pick"]
    else:
        metrics["pick"] = pick
    (run / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")


def _equal_weight_pick() -> dict[str, Any]:
    """A real verdict that picks equal weight: best trailed it on (made-up) validation returns."""
    rng = np.random.default_rng(3)
    benchmark = rng.normal(0.001, 0.01, 60)
    verdict = gate_pick(benchmark - 0.002 + rng.normal(0.0, 0.002, 60), benchmark).to_json()
    assert verdict["trader"] == BENCHMARK_NAME
    return verdict


def _copy(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / run.name
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("paper"))
    return target


@pytest.fixture
def equal_weight_run(tiny_run: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny run whose saved pick is equal weight."""
    run = _copy(tiny_run, tmp_path)
    _set_pick(run, _equal_weight_pick())
    return run


@pytest.fixture
def paper_logs() -> Iterator[None]:
    """Restore the loggers :func:`finpod.paper.run_paper` reconfigures (its handler writes to the
    stderr of the CliRunner call, closed after it)."""
    saved = {
        name: (list(log.handlers), log.level, log.propagate)
        for name in ("finpod.paper", "alpaca")
        for log in [logging.getLogger(name)]
    }
    yield
    for name, (handlers, level, propagate) in saved.items():
        log = logging.getLogger(name)
        log.handlers[:], log.level, log.propagate = handlers, level, propagate


def _observations(num_assets: int, num_features: int, count: int) -> list[torch.Tensor]:
    """Env observation rows ``(1, D)`` for random features and portfolios."""
    rng = np.random.default_rng(5)
    rows = []
    for _ in range(count):
        features = torch.from_numpy(rng.normal(0.0, 1.0, (num_assets, num_features)).astype(np.float32))
        close = rng.uniform(20.0, 80.0, num_assets)
        shares = rng.uniform(0.0, 2_000.0, num_assets)
        rows.append(observation(features, 0.0, shares, close, float(rng.uniform(0.0, 100_000.0))))
    return rows


def test_the_pick_is_the_default_trader_and_best_can_be_asked_for() -> None:
    assert PaperSpec().trader == "pick"
    assert PaperSpec(trader="best").trader == "best"


def test_pick_of_best_decides_exactly_as_best(tiny_run: Path) -> None:
    saved = _metrics(tiny_run)["pick"]
    assert saved["trader"] == "best"  # the tiny run's best beat equal weight on validation
    pick, best = load_live(tiny_run, "pick"), load_live(tiny_run, "best")
    assert (pick.trader.name, pick.trader.resolved) == ("pick", "best")
    assert pick.trader.label == f"pick = best ({saved['sentence']})"
    assert pick.trader.label.startswith("pick = best (pick: best (its validation edge over equal weight")
    rows = _observations(len(pick.symbols), len(pick.stats.names), 16)
    mine = torch.stack([pick.trader.target_weights(obs) for obs in rows])
    theirs = torch.stack([best.trader.target_weights(obs) for obs in rows])
    assert torch.equal(mine, theirs)
    assert float((mine - mine[0]).abs().max()) > 1e-3  # the policy reacts to the observation


def test_pick_of_best_replays_best_backtest_figures(tiny_run: Path) -> None:
    result = replay(tiny_run, START, END, "pick")
    assert (result.trader, result.resolved) == ("pick", "best")
    assert result.matches
    best = _metrics(tiny_run)["segments"]["backtest"]["traders"]["best"]["metrics"]
    assert result.backtest_equity_usd[-1] == pytest.approx(best["final_equity_usd"], rel=1e-12)
    assert result.replay_equity_usd[-1] == pytest.approx(best["final_equity_usd"], rel=EQUITY_RTOL)
    with Journal.open(result.journal) as journal:
        assert {name for _, name, *_ in journal.decisions()} == {"pick"}
        assert journal.meta(RESOLVED_META) == "best"


def test_pick_of_equal_weight_sends_equal_target_weights(
    equal_weight_run: Path, server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    live = load_live(equal_weight_run, "pick")
    assert (live.trader.name, live.trader.resolved) == ("pick", BENCHMARK_NAME)
    assert "deploy equal weight" in live.trader.label
    assert live.symbols == ("AAA", "BBB", "CCC")
    for obs in _observations(3, len(live.stats.names), 4):
        assert torch.equal(live.trader.target_weights(obs), torch.tensor([0.0, 1 / 3, 1 / 3, 1 / 3]))
    server.set_price("CCC", 40.0)
    close = np.array([50.0, 20.0, 40.0])
    session = PaperSession(
        run_id=live.run.run_id, trader=live.trader, symbols=live.symbols, freq="1d", config=live.config,
        limits=OrderLimits(), broker=broker, journal=journal, dry_run=False,
        submit_policy=SubmitPolicy(attempts=1),
    )  # fmt: skip
    bar = BarView(
        BAR_NS, BAR_NS, BAR_NS, close, np.ones(3, dtype=bool), torch.zeros(3, len(live.stats.names))
    )
    decision = session.decide(bar, close, now_ns=BAR_NS)
    assert decision is not None
    np.testing.assert_allclose(decision.plan.weights, [0.0, 1 / 3, 1 / 3, 1 / 3], atol=1e-7)
    assert [(i.symbol, i.side) for i in decision.intents] == [("AAA", "buy"), ("BBB", "buy"), ("CCC", "buy")]
    expected_ids = [client_order_id(live.run.run_id, "pick", BAR_NS, s, "buy") for s in live.symbols]
    assert server.client_order_ids() == expected_ids
    held = server.positions_held()
    notional = np.array([held[s] * p for s, p in zip(live.symbols, close, strict=True)])
    np.testing.assert_allclose(notional, notional[0], rtol=1e-5)  # equal money in each (qty: 6 digits)
    assert 0.99 * 100_000.0 < notional.sum() < 100_000.0  # all of it, less the fee and half-spread
    assert journal.decisions()[0][1] == "pick"


def test_pick_of_equal_weight_replays_with_parity_through_the_cli(equal_weight_run: Path) -> None:
    args = ["paper", "replay", str(equal_weight_run), "--trader", "pick", "--start", START, "--end", END]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["matches"]
    assert (figures["trader"], figures["resolved"]) == ("pick", BENCHMARK_NAME)
    assert figures["trader_label"].startswith("pick = equal_weight (pick: equal weight, not best (")
    assert figures["weight_max_abs_diff"] == 0.0
    loaded = load_run(equal_weight_run, "pick", full_panel=True)
    from finpod.backtest.runner import run_policy

    ledger = run_policy(loaded.panel, "backtest", loaded.config, equal_weight_policy(3), loaded.device)
    assert figures["backtest_final_equity_usd"] == pytest.approx(float(ledger.equity_usd[-1]), rel=1e-12)
    with Journal.open(Path(figures["journal"])) as journal:
        decided = journal.decisions()
        assert journal.meta(RESOLVED_META) == BENCHMARK_NAME
    assert len(decided) == figures["bars"] - 1
    assert {name for _, name, *_ in decided} == {"pick"}
    for _, _, weights, _, _ in decided:
        assert weights == pytest.approx({"cash": 0.0, "AAA": 1 / 3, "BBB": 1 / 3, "CCC": 1 / 3}, abs=1e-7)


@pytest.mark.parametrize("drop", [False, True], ids=["pick-null", "no-pick-key"])
def test_a_run_without_a_saved_pick_is_one_line_with_the_fix(
    tiny_run: Path, tmp_path: Path, paper_logs: None, drop: bool
) -> None:
    run = _copy(tiny_run, tmp_path)
    _set_pick(run, None, drop=drop)
    fix = f"fix: use --trader best, or rebuild its metrics with `finpod report {run}`"
    for load in (lambda: load_live(run, "pick"), lambda: load_run(run, "pick", full_panel=False)):
        with pytest.raises(SpecError, match="no pick saved") as err:
            load()
        assert fix in str(err.value)
        assert "\n" not in str(err.value)
    assert load_live(run, "best").trader.resolved == "best"  # the fix works
    keys = {"APCA_API_KEY_ID": KEY_ID, "APCA_API_SECRET_KEY": SECRET}
    result = CliRunner().invoke(app, ["paper", str(run), "--trader", "pick", "--dry-run"], env=keys)
    assert result.exit_code != 0
    assert isinstance(result.exception, SpecError)
    assert "no pick saved" in str(result.exception)
    assert not (run / "paper").exists()  # it stopped before a journal was opened


def test_pin_records_the_resolution_then_refuses_another(journal: Journal) -> None:
    policy = equal_weight_policy(3)
    as_equal = Trader("pick", policy, pick=Pick(BENCHMARK_NAME, "pick: equal weight, not best (...)"))
    as_best = Trader("pick", policy, pick=Pick("best", "pick: best (...)"))
    pin_trader(journal, as_equal)
    assert journal.meta(RESOLVED_META) == BENCHMARK_NAME
    assert journal.meta(LABEL_META) == "pick = equal_weight (pick: equal weight, not best (...))"
    pin_trader(journal, as_equal)  # a restart that resolves the same
    with pytest.raises(
        SpecError, match="started as pick = equal_weight, but the run's saved pick now says best"
    ):
        pin_trader(journal, as_best)
    assert journal.meta(RESOLVED_META) == BENCHMARK_NAME


def _decisions(market: SimMarket) -> int:
    with market.journal("pick") as journal:
        return len(journal.decisions())


def _settled(market: SimMarket) -> bool:
    with market.journal("pick") as journal:
        return bool(journal.decisions()) and not journal.pending_orders()


def test_equal_weight_pick_trades_live_and_a_restart_resolving_otherwise_is_refused(
    equal_weight_run: Path, tmp_path: Path
) -> None:
    log = tmp_path / "trader.log"
    with (
        FakeTradingServer(key_id=KEY_ID, secret_key=SECRET) as trading,
        FakeStreamServer(key_id=KEY_ID, secret_key=SECRET, kind="d") as stream,
    ):
        market = SimMarket(equal_weight_run, trading, stream)
        proc = market.start("--trader", "pick", log=log)
        try:
            wait_for("the stream subscription", stream.wait_subscribed, proc=proc, log=log)
            day = market.publish()
            wait_for("a decision", lambda: _decisions(market) >= 1, proc=proc, log=log)
            wait_for("its orders", lambda: _settled(market), proc=proc, log=log)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            proc.kill()
        posts, connections = trading.client_order_ids(), stream.connections
        held = trading.positions_held()
        assert sorted(held) == ["AAA", "BBB", "CCC"]
        price = day.set_index("symbol")["close"]
        notional = [held[s] * float(price[s]) for s in ("AAA", "BBB", "CCC")]
        # the same money in each asset (the paper limits cut all three alike)
        assert notional == pytest.approx([notional[0]] * 3, rel=1e-5)
        assert all(trading.orders[c]["side"] == "buy" for c in posts)
        with market.journal("pick") as journal:
            assert journal.meta(RESOLVED_META) == BENCHMARK_NAME
            (_, name, weights, _, _), *_ = journal.decisions()
            assert name == "pick"
            assert weights["AAA"] == weights["BBB"] == weights["CCC"] > 0.0
            assert (
                "paper trader pick = equal_weight (pick: equal weight" in journal.events("start")[0].message
            )
        assert "trader pick = equal_weight (pick: equal weight, not best" in log.read_text()

        _set_pick(equal_weight_run, _metrics(equal_weight_run)["pick"] | {"trader": "best"})
        again = subprocess.run(
            [sys.executable, "-m", "finpod", "paper", str(equal_weight_run), "--clock", "feed",
             "--trader", "pick"],
            env=market.env(), cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        text = again.stdout + again.stderr
        assert again.returncode == 2, text
        assert text.count("error:") == 1
        assert "started as pick = equal_weight, but the run's saved pick now says best" in text
        assert "nothing was traded; fix: restore the metrics.json it started with" in text
        assert trading.client_order_ids() == posts  # no order, no reconciliation, no stream
        assert stream.connections == connections

    status = CliRunner().invoke(app, ["paper", "status", str(equal_weight_run), "--trader", "pick", "--json"])
    assert status.exit_code == 0, status.output
    figures = json.loads(status.stdout)
    assert (figures["trader"], figures["resolved"]) == ("pick", BENCHMARK_NAME)
    assert figures["trader_label"].startswith("pick = equal_weight (pick: equal weight, not best (")
    assert figures["decisions"] == 1
    assert figures["equity"]["backtest"]["trader"] == BENCHMARK_NAME  # the report's equal-weight row
    assert figures["equity"]["backtest"]["note"] == BUY_AND_HOLD_NOTE  # ... which buys and holds
    table = CliRunner().invoke(app, ["paper", "status", str(equal_weight_run), "--trader", "pick"])
    assert table.exit_code == 0, table.output
    assert "trader pick = equal_weight (pick: equal weight, not best" in " ".join(table.output.split())
    assert "the report's equal_weight row buys once and holds" in " ".join(table.output.split())
