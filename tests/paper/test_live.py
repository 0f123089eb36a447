"""The live trader as a subprocess against the fake Alpaca broker, data API and stream."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from finpod.cli import app
from tests.fakes.alpaca_stream import FakeStreamServer
from tests.fakes.alpaca_trading import FakeTradingServer
from tests.paper.live_kit import KEY_ID, REPO, SECRET, SimMarket, wait_for


@pytest.fixture
def run_copy(tiny_run: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny run (each test gets its own paper journal)."""
    target = tmp_path / tiny_run.name
    shutil.copytree(tiny_run, target, ignore=shutil.ignore_patterns("paper"))
    return target


@pytest.fixture
def market(run_copy: Path) -> Iterator[SimMarket]:
    """The fake broker (1M USD), data API and daily-bar stream over the run's data."""
    with (
        FakeTradingServer(key_id=KEY_ID, secret_key=SECRET, cash_usd=1_000_000.0) as trading,
        FakeStreamServer(key_id=KEY_ID, secret_key=SECRET, kind="d") as stream,
    ):
        yield SimMarket(run_copy, trading, stream)


def _decisions(market: SimMarket, *, dry_run: bool = False) -> int:
    with market.journal(dry_run=dry_run) as journal:
        return len(journal.decisions())


def test_dry_run_decides_and_sends_nothing_then_status_reports(market: SimMarket, tmp_path: Path) -> None:
    log = tmp_path / "trader.log"
    proc = market.start("--dry-run", log=log)
    try:
        wait_for("the stream subscription", market.stream.wait_subscribed, proc=proc, log=log)
        for day in range(3):
            market.publish()
            wait_for(
                f"decision {day + 1}",
                lambda d=day: _decisions(market, dry_run=True) >= d + 1,
                proc=proc,
                log=log,
            )
        connections = market.stream.connections
        market.stream.drop()  # the stream drops; a session is published while it is down
        wait_for("the reconnection", lambda: _started(market, connections), proc=proc, log=log)
        market.publish(stream=False)
        market.publish()
        wait_for(
            "a decision after the gap", lambda: _decisions(market, dry_run=True) >= 4, proc=proc, log=log
        )
        with market.journal(dry_run=True) as journal:
            assert journal.events("reconnect"), "the gap was not noticed"
            assert journal.events("stale"), "the backfilled session was traded"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    assert not [r for r in market.trading.requests if r.method in ("POST", "DELETE")]  # nothing sent
    text = log.read_text()
    assert "DRY-RUN buy" in text
    assert KEY_ID not in text
    assert SECRET not in text
    out = subprocess.run(
        [sys.executable, "-m", "finpod", "paper", "status", str(market.run_dir), "--json", "--dry-run"],
        env=market.env(), cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    status = json.loads(out.stdout)
    assert status["dry_run"]
    assert status["decisions"] == 4
    assert status["orders_today"]
    assert all(o["dry_run"] and o["status"] == "dry_run" for o in status["orders_today"])
    assert status["limits_hit"].get("halt") == 1  # the SIGTERM kill switch
    assert status["last_bar"].startswith("2019-10-07")
    equity = status["equity"]
    assert equity["first_usd"] == pytest.approx(1_000_000.0)
    assert equity["sessions"] == 4
    assert equity["backtest"]["trader"] == "best"  # the run's metrics.json: what the backtest expected
    assert isinstance(equity["backtest"]["annual_return"], float)
    assert isinstance(equity["expected_return"], float)
    table = CliRunner().invoke(app, ["paper", "status", str(market.run_dir), "--dry-run"])
    assert table.exit_code == 0
    assert "(dry run): 4 decisions" in table.output
    assert "orders of 2019-10-07" in table.output


def _journal_positions(market: SimMarket) -> dict[str, float]:
    with market.journal() as journal:
        return journal.positions()


def _started(market: SimMarket, connections: int) -> bool:
    return market.stream.connections > connections and market.stream.wait_subscribed(0.01)


@pytest.mark.slow
def test_sigkill_ten_times_no_duplicate_order_positions_reconciled(market: SimMarket, tmp_path: Path) -> None:
    rng = random.Random(7)
    log = tmp_path / "trader.log"
    proc = market.start(log=log)
    wait_for("the first subscription", lambda: _started(market, 0), proc=proc, log=log)
    try:
        for kill in range(10):
            posts = len(market.trading.client_order_ids())
            between_submit_and_ack = kill % 3 == 0
            if between_submit_and_ack:
                market.trading.land_then_hang(4.0)  # the order lands, its answer never reaches the trader
            market.publish()
            if between_submit_and_ack:
                wait_for(
                    "an order POST",
                    lambda p=posts: len(market.trading.client_order_ids()) > p,
                    proc=proc,
                    log=log,
                )
                time.sleep(0.2)
            else:
                time.sleep(rng.uniform(0.0, 1.5))  # anywhere: deciding, sending, journaling, idle
            proc.kill()
            assert proc.wait(30) == -signal.SIGKILL
            market.trading._land_then_hang.clear()
            ids = market.trading.client_order_ids()
            assert len(ids) == len(set(ids)), "an order was sent twice"
            connections = market.stream.connections
            proc = market.start(log=log)
            wait_for(f"restart {kill + 1}", lambda c=connections: _started(market, c), proc=proc, log=log)
            assert _journal_positions(market) == pytest.approx(market.trading.positions_held())
        decided = _decisions(market)
        market.publish()
        wait_for(
            "a decision after the last restart", lambda: _decisions(market) > decided, proc=proc, log=log
        )
        wait_for(
            "its orders",
            lambda: _journal_positions(market) == pytest.approx(market.trading.positions_held()),
            proc=proc,
            log=log,
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    ids = market.trading.client_order_ids()
    assert len(ids) == len(set(ids))
    assert len(ids) > 0
    text = log.read_text()
    assert "reconciled (start)" in text
    assert KEY_ID not in text
    assert SECRET not in text


MINUTES = 20


def test_minute_dry_run_decides_each_minute_and_sends_nothing(minute_run: Path, tmp_path: Path) -> None:
    run = tmp_path / minute_run.name
    shutil.copytree(minute_run, run, ignore=shutil.ignore_patterns("paper"))
    log = tmp_path / "trader.log"
    with (
        FakeTradingServer(key_id=KEY_ID, secret_key=SECRET, cash_usd=1_000_000.0) as trading,
        FakeStreamServer(key_id=KEY_ID, secret_key=SECRET, kind="b") as stream,
    ):
        market = SimMarket(run, trading, stream)
        env = market.env()
        proc = market.start("--dry-run", log=log)
        try:
            wait_for("the stream subscription", stream.wait_subscribed, proc=proc, log=log)
            for minute in range(MINUTES):  # the first minutes of the 2019-11-29 half day
                market.publish()
                wait_for(
                    f"minute {minute + 1}",
                    lambda m=minute: _decisions(market, dry_run=True) >= m + 1,
                    proc=proc,
                    log=log,
                )
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            proc.kill()
        assert not [r for r in trading.requests if r.method in ("POST", "DELETE")]
        with market.journal(dry_run=True) as journal:
            decided = [pd.Timestamp(b, tz="UTC") for b, *_ in journal.decisions()]
            assert not journal.events("bar_refused")
            assert not journal.events("reconnect")
            assert not journal.events("stale")
    assert decided == list(pd.date_range("2019-11-29 14:30", periods=MINUTES, freq="min", tz="UTC"))
    assert "DRY-RUN" in log.read_text()
    out = subprocess.run(
        [sys.executable, "-m", "finpod", "paper", "status", str(run), "--json", "--dry-run"],
        env=env, cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    status = json.loads(out.stdout)
    assert status["decisions"] == MINUTES
    assert status["session"] == "2019-11-29"
    assert status["last_bar"] == "2019-11-29T14:49:00+00:00"
    assert status["orders_today"]
    assert all(o["status"] == "dry_run" for o in status["orders_today"])
