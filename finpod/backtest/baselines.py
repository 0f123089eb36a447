"""The baselines every report carries: equal-weight buy-and-hold, the market ETF, and cash.

Each runs through the same env as the traders (:class:`~finpod.env.trading_env.TradingEnv` with the
same :class:`~finpod.env.config.EnvConfig`): it decides at the segment's first bar's close, its
orders fill at the next bar's open (or close, as ``config.fill`` says) with the same fee,
half-spread, volume cap and rebalance band, and it then holds: every later step sends no order.
No baseline ever trades at a price it has already seen.

The entry is one target-weights step (``weights`` action mode); holding sends no order (a target
weight step would re-trade the drift between a close and the next open), so the env's own
valuation of the unchanged account at every later close is computed for all bars at once
(:func:`finpod.env.dynamics.hold`, equal bit for bit to stepping a zero ``share_delta`` action).
A baseline whose entry the volume cap or the band cuts short keeps what it got.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import torch

from finpod.backtest.pyfolio_format import Ledger
from finpod.backtest.recorder import LedgerRecorder, backtest_config
from finpod.data.panel import Panel
from finpod.env import dynamics
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from finpod.errors import DataError

BASELINE_SEED = 0
"""Baseline runs are deterministic (no random start); the seed only satisfies the env's signature."""


def run_buy_and_hold(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    entry_weights: np.ndarray,
    device: torch.device,
) -> Ledger:
    """Buy ``entry_weights`` at the first step through the env, then hold to the segment's end.

    Args:
        panel: the market.
        segment: ``"validation"`` or ``"backtest"``.
        config: the traders' env settings (start and horizon are overridden: one episode over the
            segment from its first bar).
        entry_weights: float ``(M + 1,)`` target weights over ``[cash, asset_1 .. asset_M]``.
        device: where the env runs.

    Returns:
        The ledger over the segment's bars; row 0 (the first bar) is all cash.
    """
    weights_config = dataclasses.replace(backtest_config(config, panel, segment), action_mode="weights")
    env = TradingEnv(panel, segment, weights_config, 1, BASELINE_SEED, device)
    recorder = LedgerRecorder(panel, segment, config, device)
    env.reset(seed=BASELINE_SEED)
    entry = torch.as_tensor(entry_weights, dtype=torch.float32, device=device).reshape(1, -1)
    _, _, _, _, info = env.step(entry)
    recorder.record(info)
    stop = recorder.start + recorder.num_bars
    recorder.record_rows(
        dynamics.hold(env.market, info["cash_usd"], info["shares"], recorder.start + 2, stop)
    )
    return recorder.ledgers()[0]


def equal_weight_weights(panel: Panel, segment: str) -> np.ndarray:
    """Entry weights ``(M + 1,)``: equal over the assets tradable at the segment's first bar, no cash.

    Raises:
        DataError: no asset is tradable at the segment's first bar.
    """
    start, _ = panel.segment(segment)
    tradable = panel.tradable[start].cpu().numpy()
    if not tradable.any():
        first = pd.Timestamp(int(panel.timestamps_ns[start]), tz="UTC")
        raise DataError(
            f"{segment}: no asset is tradable at its first bar ({first}); fix: start the segment on a "
            "session where the universe has bars"
        )
    return np.concatenate([[0.0], tradable / tradable.sum()])


def equal_weight_ledger(panel: Panel, segment: str, config: EnvConfig, device: torch.device) -> Ledger:
    """Equal-weight buy-and-hold of the assets tradable at the first bar, through the env."""
    return run_buy_and_hold(panel, segment, config, equal_weight_weights(panel, segment), device)


def cash_ledger(panel: Panel, segment: str, config: EnvConfig, device: torch.device) -> Ledger:
    """Hold cash for the whole segment, through the env: equity is the initial cash at every bar."""
    entry = np.zeros(panel.num_assets + 1)
    entry[0] = 1.0
    return run_buy_and_hold(panel, segment, config, entry, device)


def benchmark_panel(panel: Panel) -> Panel | None:
    """A one-asset panel of the benchmark ETF on ``panel``'s bars; ``None`` when it has none.

    The ETF's open is its close when the panel has no benchmark open (then it fills at the next
    close); its volume is unbounded when the panel has no benchmark volume (no volume cap). It is
    tradable where it has a bar (volume > 0) or, without volume, everywhere. Its one feature is 0.
    """
    if panel.benchmark_close is None or panel.benchmark_symbol is None:
        return None
    close = panel.benchmark_close.reshape(-1, 1)
    opens = close if panel.benchmark_open is None else panel.benchmark_open.reshape(-1, 1)
    if panel.benchmark_volume is None:
        volume = torch.full_like(close, float("inf"))
        tradable = torch.ones_like(close, dtype=torch.bool)
    else:
        volume = panel.benchmark_volume.reshape(-1, 1)
        tradable = volume > 0.0
    return dataclasses.replace(
        panel,
        symbols=(panel.benchmark_symbol,),
        open=opens,
        high=torch.maximum(opens, close),
        low=torch.minimum(opens, close),
        close=close,
        volume=volume,
        features=torch.zeros((panel.num_bars, 1, 1), dtype=torch.float32, device=close.device),
        feature_names=("none",),
        tradable=tradable,
        benchmark_symbol=None,
        benchmark_close=None,
        benchmark_open=None,
        benchmark_volume=None,
        real=None,
        feature_stats=None,
    )


def market_ledger(panel: Panel, segment: str, config: EnvConfig, device: torch.device) -> Ledger | None:
    """Buy the benchmark ETF with all the cash through the env and hold; ``None`` without one.

    The ledger holds one instrument, the ETF (``panel.benchmark_symbol``).
    """
    market = benchmark_panel(panel)
    if market is None:
        return None
    return run_buy_and_hold(market, segment, config, np.array([0.0, 1.0]), device)
