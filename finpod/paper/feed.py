"""Live bars: Alpaca's ``StockDataStream`` for new bars, ``StockHistoricalDataClient`` for warm-up and gaps.

Bars from the stream land in a thread-safe queue (the stream runs its own asyncio loop in a daemon
thread and reconnects by itself). :class:`BarAligner` turns raw bars into complete rows of the XNAS
grid, like :func:`finpod.data.calendar.align`: a row is complete when every symbol has its bar, or
when a later bar shows that the stream moved on; a symbol still missing is asked for over REST
(backfill after a dropped connection) and otherwise filled from its last close with zero volume
(not tradable). A bar that arrives twice, or after its row was completed, is refused and counted.
Daily bars (stamped at New York midnight by Alpaca) are moved to their session's open.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from alpaca.data.enums import Adjustment, DataFeed
from alpaca.data.historical.stock import StockHistoricalDataClient
from alpaca.data.live.stock import StockDataStream
from alpaca.data.models import BarSet
from alpaca.data.requests import StockBarsRequest
from alpaca.data.timeframe import TimeFrame

from finpod.data.calendar import EXCHANGE_TIMEZONE, NS_PER_MINUTE, align, calendar_grid
from finpod.net import Timeouts, install_timeouts
from finpod.paper.keys import AlpacaKeys

logger = logging.getLogger("finpod.paper")


@dataclass(frozen=True)
class RawBar:
    """One symbol's bar as the data API sent it (bar START in UTC ns; prices USD; volume shares)."""

    symbol: str
    bar_ns: int
    open: float
    high: float
    low: float
    close: float
    volume: float


@dataclass(frozen=True)
class Row:
    """One complete grid row of every symbol (``M`` columns).

    Attributes:
        bar_ns: bar start, UTC ns.
        open, close, volume: ``(M,)`` aligned values (a filled bar carries the last close, volume 0).
        real: ``(M,)`` bool, the symbol had its own bar.
        backfilled: symbols whose bar came from the REST backfill.
    """

    bar_ns: int
    open: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    real: np.ndarray
    backfilled: tuple[str, ...]


def daily_stamp(stamp: pd.Timestamp) -> int:
    """A daily bar's stamp (New York midnight, or already the open) moved to its session's open, UTC ns."""
    day = stamp.tz_convert(EXCHANGE_TIMEZONE).strftime("%Y-%m-%d")
    return int(calendar_grid("1d", day, day).session_open_ns[0])


class BarAligner:
    """Collects raw bars into complete grid rows, in time order.

    Args:
        symbols: the ``M`` columns.
        freq: ``"1min"`` or ``"1d"``.
        last_close: ``(M,)`` each symbol's last close before the first row (from the warm-up).
        after_ns: rows at or before this bar start were already seen (the warm-up's last bar).
        backfill: ``(symbols, bar_ns) -> bars`` over REST for symbols the stream missed.
    """

    def __init__(
        self,
        symbols: Sequence[str],
        freq: str,
        last_close: np.ndarray,
        after_ns: int,
        backfill: Callable[[list[str], int], list[RawBar]],
    ) -> None:
        self.symbols = tuple(symbols)
        self.column = {s: i for i, s in enumerate(self.symbols)}
        self.freq = freq
        self.last_close = np.asarray(last_close, dtype=np.float32).copy()
        self.done_ns = after_ns
        self.backfill = backfill
        self._pending: dict[int, dict[str, RawBar]] = {}
        self._first_seen: dict[int, int] = {}
        self.refused: list[str] = []

    def add(self, bar: RawBar) -> str | None:
        """Queue a bar; returns why it was refused (unknown symbol, duplicate, late), else ``None``."""
        stamp = pd.Timestamp(bar.bar_ns, tz="UTC")
        if bar.symbol not in self.column:
            reason = f"bar {bar.symbol} {stamp}: not a traded symbol"
        elif bar.bar_ns <= self.done_ns:
            reason = (
                f"bar {bar.symbol} {stamp}: arrived after its row was complete (duplicate or out of order)"
            )
        elif bar.symbol in self._pending.get(bar.bar_ns, {}):
            reason = f"bar {bar.symbol} {stamp}: arrived twice"
        else:
            self._pending.setdefault(bar.bar_ns, {})[bar.symbol] = bar
            return None
        self.refused.append(reason)
        return reason

    def complete_rows(self, now_ns: int, grace_ns: int) -> list[Row]:
        """Rows that are complete: all symbols in, a later bar seen, or ``grace_ns`` gone by.

        The grace runs from the later of the bar's end and the first time this method saw the row:
        bars that arrive well after their end (Alpaca's daily bars come after the close) still get
        the whole grace for the other symbols' bars of the same message burst.
        """
        out: list[Row] = []
        newest = max(self._pending, default=None)
        for bar_ns in sorted(self._pending):
            got = self._pending[bar_ns]
            end = bar_ns + (NS_PER_MINUTE if self.freq == "1min" else 0)
            seen = self._first_seen.setdefault(bar_ns, now_ns)
            full = len(got) == len(self.symbols)
            moved_on = newest is not None and bar_ns < newest
            if not (full or moved_on or now_ns >= max(end, seen) + grace_ns):
                break
            del self._pending[bar_ns]
            self._first_seen.pop(bar_ns, None)
            for missed in self._grid_between(self.done_ns, bar_ns):
                out.append(self._row(missed, {}))  # no symbol sent it: all from the backfill
            out.append(self._row(bar_ns, got))
            self.done_ns = bar_ns
        return out

    def _grid_between(self, after_ns: int, before_ns: int) -> list[int]:
        """Grid bar starts strictly between two bars (the rows a dropped stream never sent)."""
        if after_ns <= 0:
            return []
        days = [
            pd.Timestamp(n, tz="UTC").tz_convert(EXCHANGE_TIMEZONE).strftime("%Y-%m-%d")
            for n in (after_ns, before_ns)
        ]
        stamps = calendar_grid(self.freq, days[0], days[1]).timestamps_ns
        return [int(n) for n in stamps if after_ns < n < before_ns]

    def _row(self, bar_ns: int, got: dict[str, RawBar]) -> Row:
        missing = [s for s in self.symbols if s not in got]
        backfilled: list[str] = []
        if missing:
            for bar in self.backfill(missing, bar_ns):
                if bar.bar_ns == bar_ns and bar.symbol in missing and bar.symbol not in got:
                    got[bar.symbol] = bar
                    backfilled.append(bar.symbol)
        m = len(self.symbols)
        opens, close = self.last_close.copy(), self.last_close.copy()
        volume, real = np.zeros(m, dtype=np.float32), np.zeros(m, dtype=bool)
        for symbol, bar in got.items():
            col = self.column[symbol]
            opens[col], close[col], volume[col], real[col] = bar.open, bar.close, bar.volume, True
        self.last_close = close.copy()
        return Row(bar_ns, opens, close, volume, real, tuple(backfilled))


class AlpacaBars:
    """Alpaca market data for the paper trader: REST history and the live bar stream.

    Args:
        keys: API keys.
        symbols: tickers.
        freq: ``"1min"`` or ``"1d"``.
        data_url: REST base URL (``https://data.alpaca.markets`` or a fake).
        stream_url: websocket URL (:data:`ALPACA_STREAM_URL` or a fake).
        timeout_s: timeout of every REST request.
    """

    def __init__(
        self,
        keys: AlpacaKeys,
        symbols: Sequence[str],
        freq: str,
        *,
        data_url: str,
        stream_url: str,
        timeout_s: float,
    ) -> None:
        self.symbols = list(symbols)
        self.freq = freq
        self.client = StockHistoricalDataClient(keys.key_id, keys.secret_key, url_override=data_url)
        self.client._retry = 2
        self.client._retry_wait = 1
        self.client._retry_codes = [429, 500, 502, 503, 504]
        install_timeouts(self.client._session, Timeouts(connect_s=timeout_s, read_s=timeout_s))
        self._keys = keys
        self._stream_url = stream_url
        self.queue: queue.Queue[RawBar] = queue.Queue()
        self._stream: StockDataStream | None = None
        self._thread: threading.Thread | None = None

    def _to_raw(self, symbol: str, bar: Any) -> RawBar:
        stamp = pd.Timestamp(bar.timestamp)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        bar_ns = daily_stamp(stamp) if self.freq == "1d" else int(stamp.value)
        return RawBar(
            symbol,
            bar_ns,
            float(bar.open),
            float(bar.high),
            float(bar.low),
            float(bar.close),
            float(bar.volume),
        )

    def history(
        self, start: pd.Timestamp | None, end: pd.Timestamp | None, symbols: Sequence[str] | None = None
    ) -> list[RawBar]:
        """Adjusted bars with starts in ``[start, end]`` (UTC; ``None``: the source's default)."""
        request = StockBarsRequest(
            symbol_or_symbols=list(symbols or self.symbols),
            timeframe=TimeFrame.Minute if self.freq == "1min" else TimeFrame.Day,
            start=None if start is None else start.to_pydatetime(),
            end=None if end is None else end.to_pydatetime(),
            adjustment=Adjustment.ALL,
            feed=DataFeed.IEX,
        )
        result = self.client.get_stock_bars(request)
        data = result.data if isinstance(result, BarSet) else {}
        return [self._to_raw(symbol, bar) for symbol, bars in data.items() for bar in bars]

    def backfill(self, symbols: list[str], bar_ns: int) -> list[RawBar]:
        """The bars of ``symbols`` at ``bar_ns`` over REST (empty when the API has none or fails)."""
        stamp = pd.Timestamp(bar_ns, tz="UTC")
        end = stamp if self.freq == "1min" else stamp + pd.Timedelta(hours=23)
        if self.freq == "1d":
            stamp = stamp.tz_convert(EXCHANGE_TIMEZONE).normalize().tz_convert("UTC")
        try:
            return self.history(stamp, end, symbols)
        except Exception as err:  # a failed backfill leaves the bar filled; it never stops trading
            logger.warning(
                "backfill of %s at %s failed (%s): filled from the last close",
                symbols,
                stamp,
                type(err).__name__,
            )
            return []

    def start_stream(self) -> None:
        """Subscribe to every symbol's bars; they arrive in :attr:`queue`."""
        stream = StockDataStream(self._keys.key_id, self._keys.secret_key, url_override=self._stream_url)

        async def on_bar(bar: Any) -> None:
            self.queue.put(self._to_raw(str(bar.symbol), bar))

        if self.freq == "1min":
            stream.subscribe_bars(on_bar, *self.symbols)
        else:
            stream.subscribe_daily_bars(on_bar, *self.symbols)
        stream._reconnect_min_backoff = 0.2
        self._stream = stream
        self._thread = threading.Thread(target=stream.run, name="alpaca-stream", daemon=True)
        self._thread.start()

    def stop_stream(self) -> None:
        """Stop the stream thread (best effort; it is a daemon)."""
        if self._stream is not None:
            self._stream.stop()


@dataclass(frozen=True)
class History:
    """Aligned warm-up history (``T`` rows of the grid up to the newest bar seen, ``M`` symbols)."""

    timestamps_ns: np.ndarray
    close: np.ndarray
    volume: np.ndarray
    real: np.ndarray


def align_history(
    bars: list[RawBar], symbols: Sequence[str], freq: str, first_day: str, last_day: str
) -> History:
    """Align warm-up bars onto the XNAS grid with the panel's own :func:`~finpod.data.calendar.align`.

    Rows after the newest bar (later minutes of today) are cut: they have not happened yet.
    """
    frame = pd.DataFrame(
        {
            "timestamp": pd.DatetimeIndex([pd.Timestamp(b.bar_ns, tz="UTC") for b in bars]).as_unit("ns"),
            "symbol": pd.Series([b.symbol for b in bars], dtype="str"),
            "open": np.array([b.open for b in bars], dtype=np.float64),
            "high": np.array([b.high for b in bars], dtype=np.float64),
            "low": np.array([b.low for b in bars], dtype=np.float64),
            "close": np.array([b.close for b in bars], dtype=np.float64),
            "volume": np.array([b.volume for b in bars], dtype=np.float64),
        }
    )
    aligned = align(frame, freq, first_day, last_day, symbols=tuple(symbols))
    newest = max((b.bar_ns for b in bars), default=None)
    keep = 0 if newest is None else int(np.searchsorted(aligned.grid.timestamps_ns, newest, side="right"))
    return History(
        aligned.grid.timestamps_ns[:keep], aligned.close[:keep], aligned.volume[:keep], aligned.real[:keep]
    )
