"""Idempotent orders against the real TradingClient and a fake broker: every fault, no duplicate."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from finpod.paper.alpaca_broker import AlpacaBroker
from finpod.paper.broker import OrderIntent
from finpod.paper.ids import client_order_id
from finpod.paper.journal import Journal
from finpod.paper.orders import SubmitPolicy, place_order
from finpod.paper.reconcile import reconcile
from tests.fakes.alpaca_trading import FakeTradingServer
from tests.paper.conftest import KEY_ID, SECRET, TIMEOUT_S

POLICY = SubmitPolicy(attempts=4, max_wait_s=5.0, unreachable_wait_s=0.0)


def _intent(symbol: str = "AAA", side: str = "buy", qty: float = 10.0, bar_ns: int = 1) -> OrderIntent:
    cid = client_order_id("run", "best", bar_ns, symbol, side)
    return OrderIntent(cid, bar_ns, symbol, side, qty, 50.0)  # type: ignore[arg-type]


class _Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_ids_are_deterministic_and_distinct() -> None:
    a = client_order_id("run", "best", 1, "AAA", "buy")
    assert a == client_order_id("run", "best", 1, "AAA", "buy")
    others = {
        client_order_id("run2", "best", 1, "AAA", "buy"),
        client_order_id("run", "ensemble", 1, "AAA", "buy"),
        client_order_id("run", "best", 2, "AAA", "buy"),
        client_order_id("run", "best", 1, "BBB", "buy"),
        client_order_id("run", "best", 1, "AAA", "sell"),
    }
    assert a not in others
    assert len(others) == 5
    assert len(a) <= 128


def test_fill_is_journaled_and_reconciles(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    order = place_order(broker, journal, _intent(), policy=POLICY)
    assert order is not None
    assert order.status == "filled"
    assert journal.positions() == {"AAA": 10.0} == broker.positions()
    assert journal.fills()[0][2:4] == (10.0, 50.0)
    assert reconcile(broker, journal).ok


def test_same_intent_twice_posts_once(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    place_order(broker, journal, _intent(), policy=POLICY)
    assert place_order(broker, journal, _intent(), policy=POLICY) is None
    assert server.client_order_ids() == [_intent().client_order_id]


def test_timeout_after_the_order_landed_looks_it_up(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    server.land_then_hang(TIMEOUT_S * 3)
    order = place_order(broker, journal, _intent(), policy=POLICY)
    assert order is not None
    assert order.status == "filled"
    assert server.client_order_ids() == [_intent().client_order_id]
    assert journal.positions() == {"AAA": 10.0}
    assert any("no answer" in e.message for e in journal.events("error"))


def test_429_waits_retry_after_then_sends_once(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    server.busy_next(429, times=1, retry_after_s=2.5)
    sleeps = _Sleeps()
    order = place_order(broker, journal, _intent(), policy=POLICY, sleep=sleeps)
    assert order is not None
    assert sleeps == [2.5]
    assert server.client_order_ids() == [_intent().client_order_id]
    posts = [r for r in server.requests if r.method == "POST"]
    lookups = [r for r in server.requests if r.path == "/v2/orders:by_client_order_id"]
    assert len(posts) == 2
    assert len(lookups) == 1


def test_5xx_then_success(server: FakeTradingServer, broker: AlpacaBroker, journal: Journal) -> None:
    server.busy_next(503, times=2)
    order = place_order(broker, journal, _intent(), policy=POLICY, sleep=_Sleeps())
    assert order is not None
    assert server.client_order_ids() == [_intent().client_order_id]


def test_server_that_never_answers_leaves_the_order_for_reconciliation(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    server.delay_next(TIMEOUT_S * 2, times=POLICY.attempts)
    assert place_order(broker, journal, _intent(), policy=POLICY) is None
    row = journal.order(_intent().client_order_id)
    assert row is not None
    assert row.status == "intent"
    posts = [r for r in server.requests if r.method == "POST"]
    assert len(posts) == 1  # every later try was a look-up
    result = reconcile(broker, journal)  # the delayed POST landed meanwhile
    assert result.ok
    assert result.resolved == 1
    assert journal.positions() == broker.positions() == {"AAA": 10.0}


def test_rejection_is_final_and_redacted(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    server.buying_power_cap_usd = 100.0
    server.echo_keys_in_errors = True
    assert place_order(broker, journal, _intent(), policy=POLICY) is None
    row = journal.order(_intent().client_order_id)
    assert row is not None
    assert row.status == "rejected"
    assert "insufficient buying power" in (row.message or "")
    assert "decides again at the next bar; fix: check the paper account's buying power" in (row.message or "")
    text = Path(journal.path).read_bytes().decode("latin-1") + "".join(e.message for e in journal.events())
    assert KEY_ID not in text
    assert SECRET not in text
    assert "[redacted]" in (row.message or "")


def test_untradable_symbol_is_rejected(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    server.untradable.add("BBB")
    assert not broker.asset("BBB").tradable
    assert broker.asset("AAA").tradable
    assert place_order(broker, journal, _intent("BBB"), policy=POLICY) is None
    assert journal.positions() == {}
    row = journal.order(_intent("BBB").client_order_id)
    assert row is not None
    assert row.status == "rejected"
    assert "is not tradable" in (row.message or "")
    assert "decides again at the next bar; fix: check the symbol's status on Alpaca" in (row.message or "")


def test_partial_fill_then_cancel(server: FakeTradingServer, broker: AlpacaBroker, journal: Journal) -> None:
    server.fill_mode = "partial"
    order = place_order(broker, journal, _intent(), policy=POLICY)
    assert order is not None
    assert order.status == "partially_filled"
    assert journal.positions() == {"AAA": 5.0}
    server.fill_open(0.5)
    broker.cancel(order.broker_id)
    assert reconcile(broker, journal).ok
    row = journal.order(order.client_order_id)
    assert row is not None
    assert row.status == "canceled"
    assert row.filled_qty == pytest.approx(7.5)
    assert journal.positions() == broker.positions() == {"AAA": 7.5}


def test_manual_trade_stops_trading(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    assert reconcile(broker, journal).ok  # baseline: nothing held
    server.positions["BBB"] = 3.0  # a trade made by hand in the account
    result = reconcile(broker, journal)
    assert not result.ok
    assert "BBB: the broker holds 3 shares, the journal expects 0" in result.problems[0]
    assert journal.events("halt")


def test_first_start_adopts_existing_positions(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    server.positions["AAA"] = 4.0
    result = reconcile(broker, journal)
    assert result.ok
    assert result.baseline_adopted
    assert journal.positions() == {"AAA": 4.0}
    assert not reconcile(broker, journal).baseline_adopted


def test_keys_never_in_repr() -> None:
    from finpod.paper.keys import AlpacaKeys

    assert KEY_ID not in repr(AlpacaKeys(KEY_ID, SECRET))
    assert SECRET not in repr(AlpacaKeys(KEY_ID, SECRET))


def test_a_wrong_api_url_stops_reconciliation_before_any_intent_is_marked_never_sent(
    server: FakeTradingServer, journal: Journal
) -> None:
    from finpod.paper.broker import OrderRejected
    from finpod.paper.keys import AlpacaKeys, Redactor

    # the URL as Alpaca's dashboard shows it: alpaca-py adds /v2 again and every call answers 404
    wrong = AlpacaBroker(
        AlpacaKeys(KEY_ID, SECRET), url=server.url + "/v2", timeout_s=TIMEOUT_S, redact=Redactor([])
    )
    journal.record_intent(_intent(), dry_run=False)  # maybe sent before a crash
    with pytest.raises(OrderRejected, match=r"list open orders: HTTP 404.*fix: .*APCA_API_BASE_URL"):
        reconcile(wrong, journal)
    row = journal.order(_intent().client_order_id)
    assert row is not None
    assert row.status == "intent"  # still to be settled by a broker that answers


def test_trading_url_refuses_the_live_money_api_and_drops_v2(
    server: FakeTradingServer, tmp_path: Path
) -> None:
    from finpod.alpaca_endpoints import PAPER_TRADING_URL
    from finpod.errors import BrokerError
    from finpod.paper.keys import AlpacaKeys, Redactor
    from finpod.paper.loop import api_root, run_paper, trading_url

    assert trading_url({}) == PAPER_TRADING_URL
    assert trading_url({"APCA_API_BASE_URL": ""}) == PAPER_TRADING_URL
    assert trading_url({"APCA_API_BASE_URL": "https://paper-api.alpaca.markets/v2/"}) == PAPER_TRADING_URL
    assert api_root("https://data.alpaca.markets/v2") == "https://data.alpaca.markets"
    env = {"APCA_API_KEY_ID": KEY_ID, "APCA_API_SECRET_KEY": SECRET}
    for live in ("https://api.alpaca.markets", "https://API.alpaca.markets/v2"):
        with pytest.raises(BrokerError, match="live-money trading API; finpod paper trades a paper"):
            trading_url({"APCA_API_BASE_URL": live})
        with pytest.raises(BrokerError, match="fix: unset APCA_API_BASE_URL") as caught:
            run_paper(tmp_path / "no-run", "best", dry_run=False, env={**env, "APCA_API_BASE_URL": live})
        assert KEY_ID not in str(caught.value)
        assert SECRET not in str(caught.value)
    fixed = AlpacaBroker(
        AlpacaKeys(KEY_ID, SECRET),
        url=trading_url({"APCA_API_BASE_URL": server.url + "/v2/"}),
        timeout_s=TIMEOUT_S,
        redact=Redactor([]),
    )
    assert fixed.account().cash_usd == 100_000.0


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('{"cash": "100"}', r"not what Alpaca sends \(\d+ problem\(s\), first: "),
        ("", r"not what Alpaca sends \(an empty or unexpected reply\)"),
        ("<html>proxy login</html>", "the broker's answer is not JSON"),
    ],
)
def test_a_garbled_reply_is_one_line_naming_the_fix(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal, body: str, why: str
) -> None:
    from finpod.paper.broker import BrokerUnreachable

    server.garble_next(body)
    with pytest.raises(BrokerUnreachable) as caught:
        broker.account()
    text = str(caught.value)
    assert text.startswith("read the account: ")
    assert re.search(why, text)
    assert "fix: check that APCA_API_BASE_URL" in text
    assert "\n" not in text
    # an order POST answered with garbage may have landed: it is looked up, then sent once
    server.garble_next(body)
    order = place_order(broker, journal, _intent(), policy=POLICY)
    assert order is not None
    assert server.client_order_ids() == [_intent().client_order_id]
    assert journal.positions() == broker.positions() == {"AAA": 10.0}


def test_a_fill_between_the_look_up_and_the_positions_read_reconciles(
    server: FakeTradingServer, broker: AlpacaBroker, journal: Journal
) -> None:
    assert reconcile(broker, journal).baseline_adopted  # the first start, before any order
    server.fill_mode = "partial"
    order = place_order(broker, journal, _intent(), policy=POLICY)
    assert order is not None
    assert journal.positions() == {"AAA": 5.0}

    class FillsWhileReading:
        """The broker, where the open order fills just before the first positions read answers."""

        def __init__(self) -> None:
            self.reads = 0

        def __getattr__(self, name: str) -> object:
            return getattr(broker, name)

        def positions(self) -> dict[str, float]:
            self.reads += 1
            if self.reads == 1:
                server.fill_open(1.0)
            return broker.positions()

    racing = FillsWhileReading()
    result = reconcile(racing, journal)  # type: ignore[arg-type]
    assert result.ok, result.problems
    assert racing.reads == 2, "the fill that landed between the reads was looked up again"
    assert journal.positions() == {"AAA": 10.0} == broker.positions()
