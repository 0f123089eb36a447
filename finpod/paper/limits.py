"""The paper limits that are not order shapes: market hours, stale data, order rate, daily loss, kill switch.

Market hours come from exchange-calendars' XNAS calendar (holidays, half days). The kill switch is a
stop file (``<run>/paper/STOP`` by default) or a signal (SIGTERM, SIGINT, SIGUSR1): either halts new
orders at once. Every check returns ``None`` (go) or a one-line reason (no order), which the caller
journals and logs.
"""

from __future__ import annotations

import collections
import signal
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import FrameType
from typing import Final

import pandas as pd

from finpod.data.calendar import EXCHANGE_TIMEZONE, calendar_grid
from finpod.errors import DataError
from finpod.spec import PaperSpec

NS_PER_SECOND: Final[int] = 1_000_000_000
NS_PER_MINUTE: Final[int] = 60 * NS_PER_SECOND
STOP_FILE: Final[str] = "STOP"
STOP_SIGNALS: Final[tuple[signal.Signals, ...]] = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


@dataclass(frozen=True)
class Session:
    """One XNAS session: its New York date and regular open/close (UTC ns, close exclusive)."""

    date: str
    open_ns: int
    close_ns: int


@lru_cache(maxsize=64)
def session_on(day: str) -> Session | None:
    """The XNAS session on New York date ``day`` (``YYYY-MM-DD``), or ``None`` (weekend, holiday)."""
    try:
        grid = calendar_grid("1d", day, day)
    except DataError:
        return None
    return Session(day, int(grid.session_open_ns[0]), int(grid.session_close_ns[0]))


def session_at(now_ns: int) -> Session | None:
    """The session whose regular hours contain ``now_ns``, or ``None`` (market closed)."""
    day = pd.Timestamp(now_ns, tz="UTC").tz_convert(EXCHANGE_TIMEZONE).strftime("%Y-%m-%d")
    found = session_on(day)
    if found is None or not (found.open_ns <= now_ns < found.close_ns):
        return None
    return found


def session_of_bar(bar_ns: int) -> Session:
    """The session a regular-hours bar starting at ``bar_ns`` belongs to.

    Raises:
        DataError: the bar is outside regular hours.
    """
    found = session_at(bar_ns)
    if found is None:
        raise DataError(f"bar {pd.Timestamp(bar_ns, tz='UTC')} is outside XNAS regular hours")
    return found


class KillSwitch:
    """Halts new orders when the stop file exists or a stop signal arrived."""

    def __init__(self, stop_file: Path) -> None:
        self.stop_file = stop_file
        self.signalled: str | None = None

    def install(self) -> None:
        """Catch the stop signals (main thread only)."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signalled = signal.Signals(signum).name

    def reason(self) -> str | None:
        """Why trading must stop, or ``None``."""
        if self.signalled:
            return f"kill switch: {self.signalled} received"
        if self.stop_file.exists():
            return f"kill switch: stop file {self.stop_file} exists (delete it to trade again)"
        return None


class OrderRate:
    """At most ``per_minute`` orders in any rolling minute."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._sent: collections.deque[int] = collections.deque()

    def room(self, now_ns: int) -> int:
        """How many orders may be sent now."""
        while self._sent and self._sent[0] <= now_ns - NS_PER_MINUTE:
            self._sent.popleft()
        return max(self.per_minute - len(self._sent), 0)

    def note(self, now_ns: int) -> None:
        """Count one order sent at ``now_ns``."""
        self._sent.append(now_ns)


def daily_loss(start_equity_usd: float, equity_usd: float) -> float:
    """Loss since the session's first equity, a fraction (negative for a gain)."""
    return 1.0 - equity_usd / start_equity_usd


@dataclass(frozen=True)
class Guard:
    """The limits of one paper trader.

    Attributes:
        settings: the spec's ``[paper]`` section.
        kill: the kill switch.
        rate: the order-rate limiter.
    """

    settings: PaperSpec
    kill: KillSwitch
    rate: OrderRate

    @classmethod
    def from_spec(cls, settings: PaperSpec, paper_dir: Path) -> Guard:
        """Limits with the stop file ``paper_dir/STOP``."""
        return cls(settings, KillSwitch(paper_dir / STOP_FILE), OrderRate(settings.max_orders_per_minute))

    def before_decision(self, bar: Session, bar_ns: int, freq: str, now_ns: int) -> tuple[str, str] | None:
        """``(kind, reason)`` when no order may follow this bar's close, else ``None``.

        Minute bars: the market must be open now (regular XNAS hours, half days close early) and the
        bar's end at most ``stale_after_seconds`` ago. Daily bars: the bar's session must have closed
        and the next one not yet opened (the orders queue for the next open, the env's fill).
        """
        killed = self.kill.reason()
        if killed:
            return "halt", killed
        stamp = pd.Timestamp(now_ns, tz="UTC")
        if freq == "1d":
            if now_ns < bar.close_ns:
                return "closed", f"daily bar {bar.date} is not over at {stamp}: no order"
            following = next_session_open_ns(bar.close_ns)
            if now_ns >= following:
                return (
                    "stale",
                    f"stale data: daily bar {bar.date} is older than the session open before {stamp}",
                )
            return None
        if session_at(now_ns) is None:
            return "closed", f"market closed at {stamp}: no order"
        late_s = (now_ns - (bar_ns + NS_PER_MINUTE)) / NS_PER_SECOND
        if late_s > self.settings.stale_after_seconds:
            return "stale", (
                f"stale data: bar {pd.Timestamp(bar_ns, tz='UTC')} ended {late_s:.0f} s ago "
                f"(> paper.stale_after_seconds = {self.settings.stale_after_seconds:g}): no trading"
            )
        return None


def next_session_open_ns(after_ns: int) -> int:
    """The regular open of the first XNAS session that opens after ``after_ns``."""
    day = pd.Timestamp(after_ns, tz="UTC").tz_convert(EXCHANGE_TIMEZONE).normalize().tz_localize(None)
    grid = calendar_grid("1d", day + pd.Timedelta(days=1), day + pd.Timedelta(days=10))
    return int(grid.session_open_ns[0])
