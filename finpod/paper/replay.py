"""The parity replay: the live code path on recorded bars, checked bar for bar against the backtest.

``finpod paper replay RUN_DIR --start D --end D`` rebuilds the run's panel, then for every bar of the
dates: the online features (:class:`~finpod.paper.features.OnlineFeatures`, from the aligned bars
only), the :class:`~finpod.paper.session.PaperSession` decision and orders into a journal, and a
:class:`~finpod.paper.sim_broker.SimBroker` that fills them like the env at the next bar. The same
trader is run through the backtest (:func:`finpod.backtest.runner.run_policy`) over the same bars;
the target weights and the equity must agree within :data:`WEIGHT_TOLERANCE` and
:data:`EQUITY_RTOL`. The paper limits are off in a replay (the backtest has none). ``pick`` replays
what the run's pick resolves to: best, or the equal-weight policy the live trader would send
(:func:`finpod.oracle.equal_weight_policy`, re-targeted every bar), each against its own env pass.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd
import torch

from finpod.backtest.runner import run_policy
from finpod.data.panel import Panel
from finpod.env.market import FILL_ROW, Market, build_market
from finpod.errors import SpecError
from finpod.paper.decision import Trader, load_run, pin_trader
from finpod.paper.features import OnlineFeatures
from finpod.paper.journal import Journal
from finpod.paper.limits import session_on
from finpod.paper.orders import SubmitPolicy, refresh_orders
from finpod.paper.session import BarView, PaperSession
from finpod.paper.sim_broker import SimBroker
from finpod.paper.sizing import OrderLimits
from finpod.pipeline.main import target_weights

REPLAY_SEGMENT: Final[str] = "replay"
WEIGHT_TOLERANCE: Final[float] = 1e-3
"""Largest allowed absolute difference of a target weight (float32 features and policy)."""
EQUITY_RTOL: Final[float] = 1e-5
"""Largest allowed relative difference of equity at a bar's close (float64 here, float32 in the env)."""
FEATURE_TOLERANCE: Final[float] = 5e-3
"""Largest allowed absolute difference of a normalised feature (sigmas), online vs panel: the panel's
float32 EMAs of prices round to ~1e-7 of the price, which is ~1e-3 of MACD's spread on minute bars."""
DEFAULT_WINDOW_BARS: Final[int] = 512


@dataclass(frozen=True)
class ReplayResult:
    """A replay next to the backtest of the same trader on the same bars.

    Attributes:
        trader: ``"best"``, ``"ensemble"``, ``"trajectory"`` or ``"pick"``.
        resolved: the trader that traded (``pick``: ``"best"`` or ``"equal_weight"``; else ``trader``).
        label: the trader for people (:attr:`~finpod.paper.decision.Trader.label`).
        timestamps: ``(n,)`` bar starts (UTC) of the replayed bars.
        replay_weights, backtest_weights: ``(n - 1, M + 1)`` target weights decided at bars 0..n-2.
        replay_equity_usd, backtest_equity_usd: ``(n,)`` equity at each bar's close.
        feature_max_abs_diff: largest online-vs-panel feature difference (sigmas).
        journal: the replay's journal file.
    """

    trader: str
    resolved: str
    label: str
    timestamps: pd.DatetimeIndex
    replay_weights: np.ndarray
    backtest_weights: np.ndarray
    replay_equity_usd: np.ndarray
    backtest_equity_usd: np.ndarray
    feature_max_abs_diff: float
    journal: Path

    @property
    def weight_max_abs_diff(self) -> float:
        """Largest absolute target-weight difference."""
        return float(np.abs(self.replay_weights - self.backtest_weights).max(initial=0.0))

    @property
    def equity_max_rel_diff(self) -> float:
        """Largest relative equity difference."""
        return float(np.abs(self.replay_equity_usd / self.backtest_equity_usd - 1.0).max(initial=0.0))

    @property
    def matches(self) -> bool:
        """Weights and equity agree within the stated tolerances."""
        return self.weight_max_abs_diff <= WEIGHT_TOLERANCE and self.equity_max_rel_diff <= EQUITY_RTOL


def _rows(timestamps_ns: np.ndarray, start: str, end: str) -> tuple[int, int]:
    stamps = pd.DatetimeIndex(timestamps_ns).tz_localize("UTC").tz_convert("America/New_York")
    dates = stamps.normalize().tz_localize(None).asi8
    lo = int(np.searchsorted(dates, pd.Timestamp(start).value, side="left"))
    hi = int(np.searchsorted(dates, pd.Timestamp(end).value, side="right"))
    return lo, hi


def replay(
    run_dir: Path, start: str, end: str, trader: str, *, window_bars: int = DEFAULT_WINDOW_BARS
) -> ReplayResult:
    """Replay ``trader`` of a finished run over the New York dates ``start..end`` (inclusive).

    Raises:
        SpecError: bad dates, fewer than two bars in the range, or anything :func:`load_run` refuses.
    """
    try:
        first, last = pd.Timestamp(start), pd.Timestamp(end)
    except ValueError:
        raise SpecError(f"--start/--end: {start!r}..{end!r} are not dates; fix: use YYYY-MM-DD") from None
    if last < first:
        raise SpecError(f"--end {end} is before --start {start}; swap them")
    loaded = load_run(run_dir, trader, full_panel=True)
    panel = loaded.panel
    lo, hi = _rows(panel.timestamps_ns, str(first.date()), str(last.date()))
    if hi - lo < 2:
        first_day = pd.Timestamp(panel.timestamps_ns[0], tz="UTC").date()
        last_day = pd.Timestamp(panel.timestamps_ns[-1], tz="UTC").date()
        raise SpecError(
            f"--start/--end: {start}..{end} holds {max(hi - lo, 0)} bar(s) of the run's data "
            f"({first_day}..{last_day}); fix: pick dates inside it"
        )
    train_stop = panel.segment("train")[1]
    if lo < train_stop:
        raise SpecError(
            f"--start {start}: inside the train segment; fix: replay validation or backtest dates"
        )
    replay_panel = dataclasses.replace(panel, segments={**panel.segments, REPLAY_SEGMENT: (lo, hi)})
    config, device = loaded.config, loaded.device
    recorded: list[torch.Tensor] = []

    def recording(obs: torch.Tensor) -> torch.Tensor:
        actions = loaded.trader.policy(obs)
        recorded.append(target_weights(actions, config.fully_invested)[0].to(torch.float64))
        return actions

    ledger = run_policy(replay_panel, REPLAY_SEGMENT, config, recording, device)
    market = build_market(replay_panel, REPLAY_SEGMENT, config, device)
    broker = SimBroker(market, panel.symbols, config)
    path = loaded.paper_dir / f"replay-{trader}-{first.date()}-{last.date()}.sqlite"
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    weights, equity, feature_diff = _run(
        loaded.run.run_id, loaded.trader, replay_panel, market, broker, path, (lo, hi), window_bars
    )
    return ReplayResult(
        trader=trader,
        resolved=loaded.trader.resolved,
        label=loaded.trader.label,
        timestamps=pd.DatetimeIndex(panel.timestamps_ns[lo:hi]).tz_localize("UTC"),
        replay_weights=weights,
        backtest_weights=torch.stack(recorded).numpy() if recorded else np.zeros((0, panel.num_assets + 1)),
        replay_equity_usd=equity,
        backtest_equity_usd=ledger.equity_usd,
        feature_max_abs_diff=feature_diff,
        journal=path,
    )


def _run(
    run_id: str,
    trader: Trader,
    panel: Panel,
    market: Market,
    broker: SimBroker,
    path: Path,
    rows: tuple[int, int],
    window_bars: int,
) -> tuple[np.ndarray, np.ndarray, float]:
    lo, hi = rows
    assert panel.feature_stats is not None
    online = OnlineFeatures(panel.num_assets, panel.frequency, panel.feature_stats, window_bars)
    close = panel.close.cpu().numpy()
    volume = panel.volume.cpu().numpy()
    real = panel.real_bars().cpu().numpy()
    tradable = panel.tradable.cpu().numpy()
    opens_ns = [(0, 0)] * lo + _session_bounds(panel, lo, hi)
    equity = np.empty(hi - lo)
    weights = np.zeros((hi - lo - 1, panel.num_assets + 1))
    feature_diff = 0.0
    with Journal.open(path) as journal:
        pin_trader(journal, trader)
        session = PaperSession(
            run_id=run_id, trader=trader, symbols=panel.symbols, freq=panel.frequency, config=broker.config,
            limits=OrderLimits(), broker=broker, journal=journal, dry_run=False,
            submit_policy=SubmitPolicy(attempts=1),
        )  # fmt: skip
        journal.set_baseline({})
        equity[0] = broker.config.initial_cash_usd
        online.seed(close[:lo], volume[:lo], real[:lo])
        for t in range(lo, hi):
            open_ns, close_ns = opens_ns[t]
            features = online.push(int(panel.timestamps_ns[t]), open_ns, close[t], volume[t], real[t])
            feature_diff = max(feature_diff, float((features - panel.features[t].cpu()).abs().max()))
            if t == hi - 1:
                break
            bar = BarView(int(panel.timestamps_ns[t]), open_ns, close_ns, close[t], tradable[t], features)
            price_now = market.bars[t + 1, FILL_ROW].double().cpu().numpy()
            decision = session.decide(bar, price_now, now_ns=int(panel.timestamps_ns[t]))
            if decision is not None:
                weights[t - lo] = decision.plan.weights
            broker.fill(t + 1)
            refresh_orders(broker, journal)
            held = broker.shares[0].numpy()
            equity[t + 1 - lo] = float(broker.cash_usd[0]) + float(held @ close[t + 1].astype(np.float64))
    return weights, equity, feature_diff


def _session_bounds(panel: Panel, lo: int, hi: int) -> list[tuple[int, int]]:
    """``(open, close)`` UTC ns of the sessions of bars ``lo..hi``, from the XNAS calendar."""
    out = []
    cache: dict[str, tuple[int, int]] = {}
    for stamp in (
        pd.DatetimeIndex(panel.timestamps_ns[lo:hi]).tz_localize("UTC").tz_convert("America/New_York")
    ):
        day = stamp.strftime("%Y-%m-%d")
        if day not in cache:
            found = session_on(day)
            assert found is not None
            cache[day] = (found.open_ns, found.close_ns)
        out.append(cache[day])
    return out
