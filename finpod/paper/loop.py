"""The live loop: reconcile, warm up, then decide on every bar the stream completes, until stopped.

Order of events at start: keys from the environment; the run's trader; reconciliation with the
broker (an unexplained difference stops here, before any order); the warm-up history over REST
(aligned like the panel) seeds the online features; then the bar stream. Each completed row updates
the features and, if the limits allow it, is decided on (:class:`~finpod.paper.session.PaperSession`).
A gap in the stream (a dropped connection) is backfilled over REST and followed by a new
reconciliation before the next order. The kill switch (stop file or signal) ends the loop at once,
cancelling open orders when ``paper.cancel_open_on_stop`` says so.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd
import requests
from alpaca.common.exceptions import APIError

from finpod.alpaca_endpoints import ALPACA_DATA_URL, ALPACA_STREAM_URL, PAPER_TRADING_URL
from finpod.errors import BrokerError, FinpodError
from finpod.net import redact
from finpod.paper.alpaca_broker import AlpacaBroker
from finpod.paper.broker import Broker, BrokerBusy, BrokerUnreachable
from finpod.paper.decision import LiveRun, load_live, pin_trader
from finpod.paper.features import OnlineFeatures
from finpod.paper.feed import AlpacaBars, BarAligner, Row, align_history
from finpod.paper.journal import Journal
from finpod.paper.keys import AlpacaKeys, Redactor
from finpod.paper.limits import NS_PER_SECOND, Guard, session_of_bar
from finpod.paper.orders import cancel_open_orders, refresh_orders
from finpod.paper.reconcile import reconcile
from finpod.paper.session import BarView, PaperSession
from finpod.paper.sizing import ALPACA_MIN_NOTIONAL_USD, OrderLimits

logger = logging.getLogger("finpod.paper")
TRADING_URL_VARIABLE: Final[str] = "APCA_API_BASE_URL"
DATA_URL_VARIABLE: Final[str] = "APCA_API_DATA_URL"
STREAM_URL_VARIABLE: Final[str] = "APCA_API_STREAM_URL"
GRACE_S: Final[float] = 5.0
"""Seconds after a minute bar's end to wait for symbols the stream has not sent yet."""
POLL_S: Final[float] = 0.2
RECONCILE_TRIES: Final[int] = 5
LIVE_TRADING_HOST: Final[str] = "api.alpaca.markets"
"""Alpaca's live-money trading API: ``finpod paper`` refuses it (``url_override`` beats ``paper=True``)."""


class TradingHalted(FinpodError):
    """Trading stopped: reconciliation found a difference it cannot explain."""


def journal_path(paper_dir: Path, trader: str, *, dry_run: bool = False) -> Path:
    """``<run>/paper/journal-<trader>.sqlite`` (``journal-<trader>-dry-run.sqlite`` for a dry run).

    A dry run keeps its own journal: its decisions and never-sent orders must not stand in the way
    of real trading later.
    """
    return paper_dir / f"journal-{trader}{'-dry-run' if dry_run else ''}.sqlite"


def api_root(url: str) -> str:
    """An Alpaca API root as alpaca-py wants it: no trailing ``/`` and no ``/v2`` (the client adds it;
    Alpaca's dashboard shows its endpoints with ``/v2``, and ``.../v2/v2/...`` answers 404 to every call)."""
    return url.strip().rstrip("/").removesuffix("/v2")


def trading_url(env: Mapping[str, str]) -> str:
    """The paper trading API root from ``APCA_API_BASE_URL`` (default :data:`PAPER_TRADING_URL`).

    Raises:
        BrokerError: the variable names Alpaca's live-money API (it would trade real money).
    """
    url = api_root(env.get(TRADING_URL_VARIABLE) or PAPER_TRADING_URL)
    if (urllib.parse.urlsplit(url).hostname or "").lower() == LIVE_TRADING_HOST:
        raise BrokerError(
            f"{TRADING_URL_VARIABLE} is {url}, Alpaca's live-money trading API; finpod paper trades a "
            f"paper account only and sent nothing; fix: unset {TRADING_URL_VARIABLE} or set it to "
            f"{PAPER_TRADING_URL}, with the paper account's keys in APCA_API_KEY_ID and APCA_API_SECRET_KEY"
        )
    return url


class FeedClock:
    """Time that follows the feed: the newest bar's end plus one second (a recorded or simulated feed)."""

    def __init__(self, freq: str) -> None:
        self.freq = freq
        self.latest_ns = 0

    def see(self, bar_ns: int) -> None:
        """Note a bar that arrived."""
        end = bar_ns + 60 * NS_PER_SECOND if self.freq == "1min" else session_of_bar(bar_ns).close_ns
        self.latest_ns = max(self.latest_ns, end + NS_PER_SECOND)

    def __call__(self) -> int:
        return self.latest_ns


@dataclass
class LiveLoop:
    """The running paper trader (see the module docstring)."""

    live: LiveRun
    broker: Broker
    bars: AlpacaBars
    journal: Journal
    guard: Guard
    session: PaperSession
    clock: Callable[[], int]
    feed_clock: FeedClock | None = None

    def run(self) -> int:
        """Trade until the kill switch; returns the exit status (0).

        Raises:
            TradingHalted: reconciliation failed.
        """
        trader, run_id = self.live.trader.label, self.live.run.run_id
        self.journal.event("start", f"paper trader {trader} of {run_id} started")
        self._reconcile("start")
        online, aligner = self._warm_up()
        self.bars.start_stream()
        try:
            while True:
                killed = self.guard.kill.reason()
                if killed:
                    return self._stop(killed)
                self._drain(aligner)
                rows = aligner.complete_rows(self.clock(), int(GRACE_S * NS_PER_SECOND))
                if any(r.backfilled for r in rows) or len(rows) > 1:
                    self.journal.event(
                        "reconnect",
                        f"{len(rows)} row(s) at once, {sum(len(r.backfilled) for r in rows)} bar(s) "
                        "backfilled: reconciling",
                    )
                    self._reconcile("gap")
                for row in rows:
                    self._on_row(online, row)
                if rows:
                    self._refresh()
        finally:
            self.bars.stop_stream()

    def _reconcile(self, why: str) -> None:
        last = ""
        for attempt in range(RECONCILE_TRIES):
            try:
                result = reconcile(self.broker, self.journal)
                break
            except (BrokerUnreachable, BrokerBusy) as err:
                last = str(err)
                self.journal.event("error", f"reconcile ({why}): {err}")
                logger.warning("reconcile (%s): %s", why, err)
                time.sleep(min(2.0**attempt, 10.0))
        else:
            raise TradingHalted(
                f"reconciliation ({why}): no usable answer from the broker after {RECONCILE_TRIES} tries; "
                f"nothing was traded; last: {last}"
            )
        if not result.ok:
            raise TradingHalted("reconciliation failed, trading stopped: " + "; ".join(result.problems))
        logger.info(
            "reconciled (%s): %d order(s) updated, %d never sent", why, result.resolved, result.not_sent
        )

    def _warm_up(self) -> tuple[OnlineFeatures, BarAligner]:
        settings = self.live.spec.paper
        freq = self.live.spec.frequency
        try:
            if self.feed_clock is None:
                now = pd.Timestamp.now(tz="UTC")
                per_day = 390 if freq == "1min" else 1
                days = int(np.ceil(settings.warmup_bars / per_day * 1.6)) + 5
                history = self.bars.history((now - pd.Timedelta(days=days)).normalize(), now)
            else:  # a recorded feed: its whole history so far, whatever the wall clock says
                history = self.bars.history(None, None)
        except (APIError, requests.exceptions.RequestException) as err:
            text = redact(" ".join(str(err).split()))[:300]
            raise TradingHalted(
                f"warm-up: the data API failed ({type(err).__name__}: {text}); nothing was traded; "
                f"fix: check {DATA_URL_VARIABLE} (if set), the network, and that the keys may read "
                "market data"
            ) from None
        if not history:
            raise TradingHalted(
                f"warm-up: the data API returned no {freq} bars for {', '.join(self.live.symbols)}"
            )
        days_seen = sorted(
            {pd.Timestamp(b.bar_ns, tz="UTC").tz_convert("America/New_York").date() for b in history}
        )
        aligned = align_history(history, self.live.symbols, freq, str(days_seen[0]), str(days_seen[-1]))
        online = OnlineFeatures(len(self.live.symbols), freq, self.live.stats, settings.warmup_bars)
        online.seed(aligned.close, aligned.volume, aligned.real)
        last_bar = int(aligned.timestamps_ns[-1])
        if self.feed_clock is not None:
            self.feed_clock.see(last_bar)
        self.journal.event(
            "warmup",
            f"{aligned.timestamps_ns.shape[0]} bars of history up to {pd.Timestamp(last_bar, tz='UTC')}",
        )
        return online, BarAligner(self.live.symbols, freq, aligned.close[-1], last_bar, self.bars.backfill)

    def _drain(self, aligner: BarAligner) -> None:
        try:
            bar = self.bars.queue.get(timeout=POLL_S)
        except queue.Empty:
            return
        while True:
            if self.feed_clock is not None:
                self.feed_clock.see(bar.bar_ns)
            refused = aligner.add(bar)
            if refused is not None:
                self.journal.event("bar_refused", refused, bar_ns=bar.bar_ns, symbol=bar.symbol)
                logger.warning("%s", refused)
            try:
                bar = self.bars.queue.get_nowait()
            except queue.Empty:
                return

    def _on_row(self, online: OnlineFeatures, row: Row) -> None:
        day = session_of_bar(row.bar_ns)
        features = online.push(row.bar_ns, day.open_ns, row.close, row.volume, row.real)
        view = BarView(row.bar_ns, day.open_ns, day.close_ns, row.close, row.real, features)
        self.journal.set_meta("last_bar_ns", str(row.bar_ns))
        try:
            self.session.decide(view, row.close.astype(np.float64), now_ns=self.clock())
        except (BrokerUnreachable, BrokerBusy) as err:
            self.journal.event(
                "error", f"no decision on {pd.Timestamp(row.bar_ns, tz='UTC')}: {err}", bar_ns=row.bar_ns
            )
            logger.warning("no decision on %s: %s", pd.Timestamp(row.bar_ns, tz="UTC"), err)

    def _refresh(self) -> None:
        try:
            refresh_orders(self.broker, self.journal)
        except (BrokerUnreachable, BrokerBusy) as err:
            logger.warning("order refresh: %s", err)

    def _stop(self, reason: str) -> int:
        self.journal.event("halt", reason)
        logger.warning("%s", reason)
        if self.live.spec.paper.cancel_open_on_stop and not self.session.dry_run:
            try:
                cancel_open_orders(self.broker, self.journal)
            except (BrokerUnreachable, BrokerBusy) as err:
                self.journal.event("error", f"cancel on stop: {err}")
        return 0


def run_paper(
    run_dir: Path,
    trader: str,
    *,
    dry_run: bool,
    env: Mapping[str, str] | None = None,
    clock: str = "wall",
) -> int:
    """``finpod paper RUN_DIR``: paper-trade a finished run's trader through Alpaca until stopped.

    Args:
        run_dir: ``reports/<run_id>``.
        trader: ``"best"``, ``"ensemble"``, ``"trajectory"`` or ``"pick"`` (the run's saved pick,
            pinned in the journal at the first start: a later start that resolves it differently
            is refused).
        dry_run: journal decisions and orders, send none.
        env: the environment (keys ``APCA_API_KEY_ID``/``APCA_API_SECRET_KEY``; optional URLs
            ``APCA_API_BASE_URL``, ``APCA_API_DATA_URL``, ``APCA_API_STREAM_URL``).
        clock: ``"wall"`` (real time) or ``"feed"`` (time follows the bars: a simulated feed).

    Returns:
        The exit status (0 after the kill switch).

    Raises:
        TradingHalted: reconciliation failed. BrokerError: ``APCA_API_BASE_URL`` names the live-money
            API. FinpodError: keys missing, not a finished run, a
            ``pick`` the run never saved or that resolves unlike at the journal's first start...
    """
    env = os.environ if env is None else env
    keys = AlpacaKeys.from_env(env)
    redact = Redactor([keys.key_id, keys.secret_key])
    url = trading_url(env)
    _quiet_logs(redact)
    live = load_live(run_dir, trader)
    logger.info("trader %s of %s", live.trader.label, live.run.run_id)
    settings = live.spec.paper
    timeout = settings.request_timeout_seconds
    broker = AlpacaBroker(keys, url=url, timeout_s=timeout, redact=redact)
    bars = AlpacaBars(
        keys,
        live.symbols,
        live.spec.frequency,
        data_url=api_root(env.get(DATA_URL_VARIABLE) or ALPACA_DATA_URL),
        stream_url=env.get(STREAM_URL_VARIABLE, ALPACA_STREAM_URL),
        timeout_s=timeout,
    )
    guard = Guard.from_spec(settings, live.paper_dir)
    guard.kill.install()
    feed_clock = FeedClock(live.spec.frequency) if clock == "feed" else None
    now: Callable[[], int] = feed_clock if feed_clock is not None else time.time_ns
    with Journal.open(journal_path(live.paper_dir, trader, dry_run=dry_run)) as journal:
        pin_trader(journal, live.trader)
        if dry_run:
            journal.event("dry_run", "dry run: orders are journaled, none is sent")
        session = PaperSession(
            run_id=live.run.run_id,
            trader=live.trader,
            symbols=live.symbols,
            freq=live.spec.frequency,
            config=live.config,
            limits=OrderLimits(
                settings.max_weight_per_asset, settings.max_order_notional_usd, ALPACA_MIN_NOTIONAL_USD
            ),
            broker=broker,
            journal=journal,
            dry_run=dry_run,
            guard=guard,
        )
        loop = LiveLoop(live, broker, bars, journal, guard, session, now, feed_clock)
        return loop.run()


class JsonLines(logging.Formatter):
    """One JSON object per log line: ``at`` (UTC ISO), ``level``, ``logger``, ``message``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        at = pd.Timestamp(record.created, unit="s", tz="UTC").isoformat(timespec="milliseconds")
        return json.dumps(
            {
                "at": at,
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": record.getMessage(),
            }
        )


def _quiet_logs(redact: Redactor) -> None:
    """Structured logs (JSON lines) on stderr, keys redacted from every record."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLines())
    handler.addFilter(redact.log_filter())
    for name in ("finpod.paper", "alpaca"):
        log = logging.getLogger(name)
        log.handlers[:] = [handler]
        log.setLevel(logging.INFO if name == "finpod.paper" else logging.WARNING)
        log.propagate = False
