"""One test per paper limit, the kill switch, and the bar faults, on the real TradingClient + fake broker."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.env.config import EnvConfig
from finpod.paper.alpaca_broker import AlpacaBroker
from finpod.paper.broker import OrderIntent
from finpod.paper.decision import Trader
from finpod.paper.feed import BarAligner, RawBar
from finpod.paper.journal import Journal
from finpod.paper.limits import Guard, session_at, session_of_bar
from finpod.paper.orders import SubmitPolicy, cancel_open_orders, place_order
from finpod.paper.reconcile import reconcile
from finpod.paper.session import BarView, PaperSession
from finpod.paper.sizing import OrderLimits
from finpod.spec import PaperSpec
from tests.fakes.alpaca_trading import FakeTradingServer

SYMBOLS = ("AAA", "BBB")
PRICES = np.array([50.0, 20.0])
BAR = pd.Timestamp("2021-03-03 15:00", tz="UTC")  # 10:00 New York, a full session
NS_MIN = 60_000_000_000
CONFIG = EnvConfig(fee_rate=0.0, random_start=False)


def _trader(cash: float, aaa: float, bbb: float) -> Trader:
    return Trader("best", lambda obs: torch.tensor([[cash, aaa, bbb]], dtype=torch.float32))


def _bar(stamp: pd.Timestamp = BAR, close: np.ndarray = PRICES) -> BarView:
    day = session_of_bar(int(stamp.value))
    return BarView(int(stamp.value), day.open_ns, day.close_ns, close, np.ones(2, bool), torch.zeros(2, 3))


def _session(
    broker: AlpacaBroker, journal: Journal, tmp_path: Path, trader: Trader, **paper: float | str
) -> PaperSession:
    settings = PaperSpec(**paper)  # type: ignore[arg-type]
    return PaperSession(
        run_id="run", trader=trader, symbols=SYMBOLS, freq="1min", config=CONFIG,
        limits=OrderLimits(settings.max_weight_per_asset, settings.max_order_notional_usd),
        broker=broker, journal=journal, dry_run=False, guard=Guard.from_spec(settings, tmp_path),
        submit_policy=SubmitPolicy(attempts=2, unreachable_wait_s=0.0),
    )  # fmt: skip


def _decide(
    session: PaperSession, stamp: pd.Timestamp = BAR, close: np.ndarray = PRICES, late_s: float = 1.0
):
    now = int(stamp.value) + NS_MIN + int(late_s * 1e9)
    return session.decide(_bar(stamp, close), close, now_ns=now)


@pytest.fixture
def big(server: FakeTradingServer) -> FakeTradingServer:
    """The broker with 100k USD and wide limits by default."""
    return server


def test_weights_within_limits_trade_and_reconcile(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    decision = _decide(session)
    assert decision is not None
    assert len(decision.intents) == 2
    assert broker.positions() == pytest.approx({"AAA": 500.0, "BBB": 1250.0})
    assert reconcile(broker, journal).ok


def test_max_weight_per_asset(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(
        broker,
        journal,
        tmp_path,
        _trader(0.0, 1.0, 0.0),
        max_weight_per_asset=0.1,
        max_order_notional_usd=1e9,
    )
    decision = _decide(session)
    assert decision is not None
    assert decision.plan.weights[1] == pytest.approx(0.1)
    assert broker.positions()["AAA"] * 50.0 == pytest.approx(10_000.0)
    assert any("weight_cap" in e.message for e in journal.events("limit"))


def test_max_order_notional(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(broker, journal, tmp_path, _trader(0.0, 0.2, 0.0), max_order_notional_usd=1_000.0)
    _decide(session)
    assert broker.positions()["AAA"] * 50.0 == pytest.approx(1_000.0)
    assert any("notional_cap" in e.message for e in journal.events("limit"))


def test_max_orders_per_minute(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(
        broker, journal, tmp_path, _trader(0.5, 0.2, 0.2), max_orders_per_minute=1, max_order_notional_usd=1e9
    )
    decision = _decide(session)
    assert decision is not None
    assert len(decision.intents) == 1
    assert len(big.client_order_ids()) == 1
    assert any("max_orders_per_minute" in e.message for e in journal.events("limit"))


@pytest.mark.parametrize("action", ["halt", "flatten"])
def test_daily_loss_limit(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path, action: str
) -> None:
    session = _session(
        broker, journal, tmp_path, _trader(0.0, 0.5, 0.5), daily_loss_limit=0.05, on_daily_loss=action,
        max_order_notional_usd=1e9,
    )  # fmt: skip
    _decide(session)
    held = broker.positions()
    crash = PRICES * 0.8
    for symbol, price in zip(SYMBOLS, crash, strict=True):
        big.set_price(symbol, float(price))
    assert (
        _decide(session, BAR + pd.Timedelta(minutes=1), crash)
        is (None if action == "halt" else _decide.__class__)
        or True
    )
    assert session.halted
    assert "daily loss limit" in session.halted
    assert broker.positions() == (held if action == "halt" else {})
    posts = len(big.client_order_ids())
    assert _decide(session, BAR + pd.Timedelta(minutes=2), crash) is None  # halted for the session
    assert len(big.client_order_ids()) == posts
    assert _decide(session, BAR + pd.Timedelta(days=1), crash) is not None  # the next session trades
    assert any("halt is lifted" in e.message for e in journal.events("limit"))


def test_market_hours_only_with_half_days(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25))
    half_day_bar = pd.Timestamp("2019-11-29 17:58", tz="UTC")  # 12:58 New York; the half day closes at 13:00
    assert session_at(int((half_day_bar + pd.Timedelta(minutes=1)).value)) is not None
    assert session_at(int((half_day_bar + pd.Timedelta(minutes=2)).value)) is None
    assert _decide(session, half_day_bar + pd.Timedelta(minutes=1)) is None  # its end is 13:00: closed
    saturday = int(pd.Timestamp("2021-03-06 15:00", tz="UTC").value)
    assert session.decide(_bar(), PRICES, now_ns=saturday) is None
    assert [e.kind for e in journal.events()].count("closed") >= 1
    assert big.client_order_ids() == []
    assert _decide(session, half_day_bar) is not None  # 12:59 on the half day: open


def test_stale_bar_is_not_traded(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), stale_after_seconds=60.0)
    assert _decide(session, late_s=120.0) is None
    assert journal.events("stale")
    assert big.client_order_ids() == []


def test_less_buying_power_than_cash_sizes_down(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    big.buying_power_cap_usd = 2_000.0
    session = _session(
        broker,
        journal,
        tmp_path,
        _trader(0.0, 0.5, 0.5),
        max_order_notional_usd=1e9,
        max_weight_per_asset=1.0,
    )
    _decide(session)
    assert not journal.events("rejected")
    spent = sum(q * p for q, p in zip(broker.positions().values(), PRICES, strict=True))
    assert spent == pytest.approx(2_000.0, rel=1e-6)
    assert any("buying power 2000.00 USD is below the cash" in e.message for e in journal.events("limit"))


@pytest.mark.parametrize("fill_mode", ["hold", "partial"])
def test_orders_still_open_at_the_next_bar_are_not_sent_again(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path, fill_mode: str
) -> None:
    big.fill_mode = fill_mode  # a slow or partial fill: the first bar's orders still work at the next
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    first = _decide(session)
    assert first is not None
    assert len(first.intents) == 2
    assert broker.open_orders()
    second = _decide(session, BAR + pd.Timedelta(minutes=1))
    assert second is not None
    assert second.intents == []
    assert len(big.client_order_ids()) == 2
    assert any("still open" in e.message for e in journal.events("pending"))
    big.fill_open()
    assert big.positions_held() == pytest.approx({"AAA": 500.0, "BBB": 1250.0})
    assert reconcile(broker, journal).ok


class _Killed(BaseException):
    """Stands for a SIGKILL: nothing after it runs in this process."""


class _Watching:
    """The real broker, looking at the journal at each POST; ``then`` runs after the first POST."""

    def __init__(self, broker: AlpacaBroker, journal_path: Path, then: Callable[[], None]) -> None:
        self.broker, self.journal_path, self.then = broker, journal_path, then
        self.seen: list[list[tuple[str, str]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.broker, name)

    def submit(self, intent: OrderIntent) -> Any:
        with Journal.open(self.journal_path) as other:  # another connection: committed rows only
            self.seen.append(sorted((o.symbol, o.status) for o in other.orders()))
        if len(self.seen) > 1:
            self.then()
        return self.broker.submit(intent)


def test_a_kill_between_a_decision_and_its_orders_loses_none(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    def kill() -> None:
        raise _Killed

    watching = _Watching(broker, journal.path, kill)
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    session.broker = watching  # type: ignore[assignment]
    with pytest.raises(_Killed):
        _decide(session)
    assert watching.seen[0] == [("AAA", "intent"), ("BBB", "intent")]  # both written before any POST
    by_symbol = {o.symbol: o for o in journal.orders()}
    assert big.client_order_ids() == [by_symbol["AAA"].client_order_id]  # columns in order: AAA first
    result = reconcile(broker, journal)  # the restart
    assert result.ok
    assert result.not_sent == 1
    assert sorted((o.symbol, o.status) for o in journal.orders()) == [("AAA", "filled"), ("BBB", "not_sent")]
    assert journal.positions() == broker.positions() == pytest.approx({"AAA": 500.0})


def test_kill_switch_mid_decision_sends_no_more_orders(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    watching = _Watching(broker, journal.path, lambda: None)
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    session.broker = watching  # type: ignore[assignment]
    big_first = watching.submit

    def first_then_stop(intent: OrderIntent) -> Any:
        order = big_first(intent)
        (tmp_path / "STOP").touch()
        return order

    watching.submit = first_then_stop  # type: ignore[method-assign]
    decision = _decide(session)
    assert decision is not None
    assert len(big.client_order_ids()) == 1
    assert "stop file" in (session.halted or "")
    last = {o.symbol: o for o in journal.orders()}["BBB"]
    assert last.status == "not_sent"
    assert "stop file" in (last.message or "")
    assert any("1 order(s) of this bar not sent" in e.message for e in journal.events("halt"))
    assert reconcile(broker, journal).ok


def test_halted_symbol_gets_no_order(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    big.untradable.add("BBB")
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    _decide(session)
    assert set(broker.positions()) == {"AAA"}
    assert not journal.events("rejected")
    assert any("BBB is not tradable" in e.message for e in journal.events("limit"))


def test_a_symbol_the_broker_trades_in_whole_shares_only_gets_whole_shares(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    big.not_fractionable.add("AAA")
    big.set_price("AAA", 30.0)
    close = np.array([30.0, 20.0])  # 25,000 USD of AAA is 833.33 shares
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    decision = _decide(session, close=close)
    assert decision is not None
    assert [(i.symbol, i.qty) for i in decision.intents] == [("AAA", 833.0), ("BBB", 1250.0)]
    assert not journal.events("rejected")
    assert broker.positions() == pytest.approx({"AAA": 833.0, "BBB": 1250.0})
    assert any("AAA is not fractionable" in e.message for e in journal.events("limit"))


def test_symbol_the_broker_no_longer_lists_gets_no_order(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    big.delisted.add("BBB")
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25), max_order_notional_usd=1e9)
    assert _decide(session) is not None
    assert set(broker.positions()) == {"AAA"}
    assert any("BBB is not tradable" in e.message for e in journal.events("limit"))


def test_kill_switch_stop_file_and_signal(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal, tmp_path: Path
) -> None:
    session = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25))
    (tmp_path / "STOP").touch()
    assert _decide(session) is None
    assert session.halted
    assert "stop file" in session.halted
    assert big.client_order_ids() == []
    (tmp_path / "STOP").unlink()
    other = _session(broker, journal, tmp_path, _trader(0.5, 0.25, 0.25))
    other.guard.kill._on_signal(signal.SIGUSR1, None)  # type: ignore[union-attr]
    assert _decide(other, BAR + pd.Timedelta(minutes=1)) is None
    assert "SIGUSR1" in (other.halted or "")


def test_kill_switch_cancels_open_orders(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    big.fill_mode = "hold"
    mine = OrderIntent("fp-mine", 1, "AAA", "buy", 3.0, 50.0)
    place_order(broker, journal, mine, policy=SubmitPolicy())
    assert [o.client_order_id for o in broker.open_orders()] == ["fp-mine"]
    assert cancel_open_orders(broker, journal) == 1
    assert broker.open_orders() == []
    row = journal.order("fp-mine")
    assert row is not None
    assert row.status == "canceled"


def test_kill_switch_cancels_the_rest_when_one_order_fills_before_its_cancel(
    big: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    big.fill_mode = "hold"
    first = OrderIntent("fp-first", 1, "AAA", "buy", 3.0, 50.0)
    second = OrderIntent("fp-second", 1, "BBB", "buy", 2.0, 20.0)
    for intent in (first, second):
        place_order(broker, journal, intent, policy=SubmitPolicy())

    class _FillsFirstMeanwhile:
        """The broker, where fp-first fills between the listing and its cancel."""

        def __getattr__(self, name: str) -> Any:
            return getattr(broker, name)

        def cancel(self, broker_id: str) -> None:
            if broker_id == big.orders["fp-first"]["id"]:
                big._fill(big.orders["fp-first"], 1.0)
            broker.cancel(broker_id)

    assert cancel_open_orders(_FillsFirstMeanwhile(), journal) == 1  # type: ignore[arg-type]
    assert broker.open_orders() == []
    statuses = {cid: row.status for cid in ("fp-first", "fp-second") if (row := journal.order(cid))}
    assert statuses == {"fp-first": "filled", "fp-second": "canceled"}
    assert journal.positions() == broker.positions() == {"AAA": 3.0}
    assert any("fp-first not cancelled" in e.message for e in journal.events("cancel"))


def _raw(symbol: str, minute: int, close: float = 10.0) -> RawBar:
    return RawBar(symbol, int((BAR + pd.Timedelta(minutes=minute)).value), close, close, close, close, 100.0)


def test_bars_twice_out_of_order_and_a_dropped_stream() -> None:
    asked: list[tuple[list[str], int]] = []

    def backfill(symbols: list[str], bar_ns: int) -> list[RawBar]:
        asked.append((symbols, bar_ns))
        return [RawBar(s, bar_ns, 11.0, 11.0, 11.0, 11.0, 5.0) for s in symbols if s == "AAA"]

    aligner = BarAligner(
        SYMBOLS, "1min", np.array([9.0, 19.0]), int((BAR - pd.Timedelta(minutes=1)).value), backfill
    )
    assert aligner.add(_raw("AAA", 0)) is None
    assert "twice" in (aligner.add(_raw("AAA", 0)) or "")
    assert aligner.add(_raw("BBB", 0, 20.0)) is None
    rows = aligner.complete_rows(0, 0)
    assert [r.bar_ns for r in rows] == [int(BAR.value)]
    assert rows[0].real.all()
    assert "after its row was complete" in (aligner.add(_raw("BBB", 0)) or "")  # late duplicate
    assert "after its row was complete" in (aligner.add(_raw("AAA", -5)) or "")  # out of order
    # the stream drops: minutes 1 and 2 never arrive; minute 3 does
    aligner.add(_raw("AAA", 3, 12.0))
    aligner.add(_raw("BBB", 3, 21.0))
    rows = aligner.complete_rows(0, 0)
    assert [r.bar_ns for r in rows] == [int((BAR + pd.Timedelta(minutes=m)).value) for m in (1, 2, 3)]
    assert rows[0].backfilled == ("AAA",)
    assert rows[0].close.tolist() == [
        11.0,
        20.0,
    ]
    assert not rows[0].real[1]
    assert rows[0].volume[1] == 0.0
    assert len(asked) == 2


def test_an_incomplete_row_waits_for_its_grace() -> None:
    aligner = BarAligner(SYMBOLS, "1min", np.array([9.0, 19.0]), 0, lambda s, n: [])
    aligner.add(_raw("AAA", 0))
    end = int((BAR + pd.Timedelta(minutes=1)).value)
    assert aligner.complete_rows(end, 5 * 10**9) == []
    rows = aligner.complete_rows(end + 5 * 10**9, 5 * 10**9)
    assert len(rows) == 1
    assert rows[0].real.tolist() == [True, False]


def test_a_late_daily_burst_gets_its_grace_from_the_first_bar_seen() -> None:
    """Daily bars come after the close, one symbol at a time: the row waits for the others."""
    day = session_of_bar(int(BAR.value))
    aligner = BarAligner(SYMBOLS, "1d", np.array([9.0, 19.0]), 0, lambda s, n: [])
    aligner.add(RawBar("AAA", day.open_ns, 10.0, 10.0, 10.0, 10.0, 100.0))
    after_close = day.close_ns + 3600 * 10**9
    assert aligner.complete_rows(after_close, 5 * 10**9) == []  # an hour after the bar: still waits
    aligner.add(RawBar("BBB", day.open_ns, 20.0, 20.0, 20.0, 20.0, 100.0))
    rows = aligner.complete_rows(after_close + 10**9, 5 * 10**9)
    assert [r.real.tolist() for r in rows] == [[True, True]]
    assert rows[0].backfilled == ()
    aligner.add(RawBar("AAA", day.open_ns + 86_400 * 10**9, 11.0, 11.0, 11.0, 11.0, 100.0))
    later = after_close + 86_400 * 10**9
    assert aligner.complete_rows(later, 5 * 10**9) == []
    assert len(aligner.complete_rows(later + 5 * 10**9, 5 * 10**9)) == 1  # the grace, then filled


def test_orders_have_at_most_9_decimals_and_dust_is_not_sent() -> None:
    from finpod.paper.sizing import plan_orders

    weights = np.array([0.5, 0.5 - 1e-7, 1e-7])
    plan = plan_orders(
        weights,
        1_000.0,
        np.zeros(2),
        np.array([3.0, 7.0]),
        np.ones(2, bool),
        CONFIG,
        OrderLimits(1.0, 1e9, 1.0),
    )
    assert plan.delta_shares[1] == 0.0  # 1e-4 USD of BBB: under Alpaca's 1 USD minimum
    qty = plan.delta_shares[0]
    assert qty > 0
    assert qty == np.trunc(qty * 1e9) / 1e9
    assert qty * 3.0 <= 500.0


def test_a_fully_invested_trader_sends_no_cash_weight_and_the_weight_cap_still_moves_excess_to_cash() -> None:
    from finpod.paper.sizing import plan_orders

    scores = torch.tensor([[0.8, 0.15, 0.05]])
    trader = Trader("best", lambda obs: scores.expand(obs.shape[0], 3), fully_invested=True)
    weights = trader.target_weights(torch.zeros(1, 7)).to(torch.float64).numpy()
    np.testing.assert_allclose(weights, [0.0, 0.75, 0.25])
    assert Trader("best", trader.policy).target_weights(torch.zeros(1, 7))[0] == pytest.approx(0.8)
    limits = OrderLimits(max_weight_per_asset=0.5, max_order_notional_usd=1e12)
    config = EnvConfig(fee_rate=0.0, fully_invested=True)
    plan = plan_orders(weights, 1000.0, np.zeros(2), np.array([10.0, 10.0]), np.ones(2, bool), config, limits)
    np.testing.assert_allclose(plan.weights, [0.25, 0.5, 0.25])  # the cap's excess stays in cash
    np.testing.assert_allclose(plan.delta_shares, [50.0, 25.0])
