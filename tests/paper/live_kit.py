"""A simulated market for live paper-trading tests: fake Alpaca REST + stream, and the trader as a subprocess.

The tiny daily run's dataset is split at the backtest's first session: the bars before are the REST
history (the warm-up); each later session is published on demand (REST first, so a restarted or
reconnected trader can backfill it, then the stream). The trader runs as ``python -m finpod paper
RUN_DIR --clock feed``: time follows the bars, so a trading day takes milliseconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.data.store import read_dataset
from finpod.paper.journal import Journal
from finpod.paper.loop import journal_path
from finpod.rundir import RunDir
from tests.fakes.alpaca_server import bars_to_alpaca_json
from tests.fakes.alpaca_stream import FakeStreamServer
from tests.fakes.alpaca_trading import FakeTradingServer

KEY_ID, SECRET = "PKLIVEKEYID987", "live-secret-value-654"
REPO = Path(__file__).resolve().parents[2]


def _alpaca_daily(bars: pd.DataFrame) -> pd.DataFrame:
    """Daily bars stamped at New York midnight, as Alpaca sends them."""
    out = bars.copy()
    local = pd.DatetimeIndex(out["timestamp"]).tz_convert("America/New_York").normalize()
    out["timestamp"] = local.tz_convert("UTC")
    return out


class SimMarket:
    """The fake broker, data API and stream over a finished tiny daily run."""

    def __init__(self, run_dir: Path, trading: FakeTradingServer, stream: FakeStreamServer) -> None:
        self.run_dir = run_dir
        self.trading, self.stream = trading, stream
        run = RunDir(run_dir)
        spec = run.load_spec()
        bars, _ = read_dataset(Path(run.read_info()["dataset"]))
        bars = bars.loc[bars["symbol"] != spec.benchmark_symbol]
        self.minute = spec.frequency == "1min"
        self.timeframe = "1Min" if self.minute else "1Day"
        cut = pd.Timestamp(spec.segments.backtest[0], tz="America/New_York").tz_convert("UTC")
        self.days = [g for _, g in bars.loc[bars["timestamp"] >= cut].groupby("timestamp")]
        """The bars to publish, one grid row (a session, or a minute of a minute run) each."""
        self.next_day = 0
        for symbol, rows in bars_to_alpaca_json(self._stamped(bars.loc[bars["timestamp"] < cut])).items():
            trading.add_bars(self.timeframe, symbol, rows)
        last = bars.loc[bars["timestamp"] < cut].groupby("symbol")["close"].last()
        for symbol, price in last.items():
            trading.set_price(str(symbol), float(price))

    def env(self) -> dict[str, str]:
        """The trader's environment: keys and the fake URLs."""
        return {
            **os.environ,
            "APCA_API_KEY_ID": KEY_ID,
            "APCA_API_SECRET_KEY": SECRET,
            "APCA_API_BASE_URL": self.trading.url,
            "APCA_API_DATA_URL": self.trading.url,
            "APCA_API_STREAM_URL": self.stream.url,
            "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'engine'}",
        }

    def _stamped(self, bars: pd.DataFrame) -> pd.DataFrame:
        return bars if self.minute else _alpaca_daily(bars)

    def publish(self, *, stream: bool = True) -> pd.DataFrame:
        """Publish the next row (a session, or a minute): REST bars, fill prices (its close), the stream."""
        day = self.days[self.next_day]
        self.next_day += 1
        for symbol, rows in bars_to_alpaca_json(self._stamped(day)).items():
            self.trading.add_bars(self.timeframe, symbol, rows)
        for row in day.itertuples():
            self.trading.set_price(str(row.symbol), float(row.close))
        if stream:
            stamp = self._stamped(day)["timestamp"]
            self.stream.push(
                [
                    {
                        "S": r.symbol,
                        "t_ns": int(t.value),
                        "o": r.open,
                        "h": r.high,
                        "l": r.low,
                        "c": r.close,
                        "v": r.volume,
                    }
                    for r, t in zip(day.itertuples(), stamp, strict=True)
                ]
            )
        return day

    def start(self, *args: str, log: Path) -> subprocess.Popen[bytes]:
        """Start ``finpod paper RUN_DIR --clock feed ARGS`` with its stderr in ``log``."""
        command = [sys.executable, "-m", "finpod", "paper", str(self.run_dir), "--clock", "feed", *args]
        with log.open("ab") as sink:
            return subprocess.Popen(command, env=self.env(), cwd=REPO, stdout=sink, stderr=sink)

    def journal(self, trader: str = "pick", *, dry_run: bool = False) -> Journal:
        """The trader's journal (opened read-write; WAL lets it run beside the trader)."""
        return Journal.open(journal_path(self.run_dir / "paper", trader, dry_run=dry_run))


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float = 60.0,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> Any:
    """Poll ``check`` until it returns something truthy; fail with the trader's log otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(
        f"timed out waiting for {what}; trader exit {proc.poll() if proc else None}; log:\n{tail}"
    )
