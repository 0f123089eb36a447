"""One deterministic pass of a policy over a whole segment, and the backtest of traders + baselines.

The env runs in backtest mode (one env, no random start, one episode covering the segment): it
observes bar t at its close and fills at bar t+1, so a segment of ``n`` bars takes ``n - 1`` steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch

from finpod.backtest.baselines import cash_ledger, equal_weight_ledger, market_ledger
from finpod.backtest.pyfolio_format import Ledger, ledger_to_result
from finpod.backtest.result import BacktestResult, TraderResult
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from podracer.api import Policy

BACKTEST_ENVS = 1
BACKTEST_SEED = 0
"""The backtest env is deterministic; the seed only satisfies the env's signature."""


def backtest_config(config: EnvConfig, panel: Panel, segment: str) -> EnvConfig:
    """``config`` in backtest mode: fixed start at the segment's first bar, one episode to its end."""
    start, stop = panel.segment(segment)
    return dataclasses.replace(config, random_start=False, horizon_bars=max(stop - start - 1, 1))


@torch.no_grad()
def run_policy(panel: Panel, segment: str, config: EnvConfig, policy: Policy, device: torch.device) -> Ledger:
    """Trade ``policy`` over segment ``segment`` once; the account at every bar's close.

    Args:
        panel: the market (any device).
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings (costs, limits, action mode); start and horizon are overridden.
        policy: deterministic observations ``(1, D)`` -> actions ``(1, A)``.
        device: where the env and policy run.

    Returns:
        The ledger over the segment's bars; row 0 (the first bar) is all cash.
    """
    start, stop = panel.segment(segment)
    env = TradingEnv(
        panel, segment, backtest_config(config, panel, segment), BACKTEST_ENVS, BACKTEST_SEED, device
    )
    n, m = stop - start, panel.num_assets
    # Device buffers filled step by step and copied to the host once: no host sync inside the loop.
    equity_t = torch.full((n,), config.initial_cash_usd, dtype=torch.float64, device=device)
    cash_t = equity_t.clone()
    shares_t = torch.zeros((n, m), dtype=torch.float64, device=device)
    cost_t = torch.zeros(n, dtype=torch.float64, device=device)
    traded_t = torch.zeros(n, dtype=torch.float64, device=device)
    bar_t = torch.arange(n, dtype=torch.int64, device=device) + start
    obs, _ = env.reset(seed=BACKTEST_SEED)
    for row in range(1, n):
        obs, _, _, _, info = env.step(policy(obs))
        equity_t[row] = info["equity_usd"][0]
        cash_t[row] = info["cash_usd"][0]
        shares_t[row] = info["shares"][0]
        cost_t[row] = info["cost_usd"][0]
        traded_t[row] = info["traded_usd"][0]
        bar_t[row] = info["bar_index"][0]
    bars = bar_t.cpu().numpy()
    wrong = np.flatnonzero(bars != np.arange(start, stop))
    if wrong.size:
        row = int(wrong[0])
        raise RuntimeError(f"backtest env stepped to bar {bars[row]}, expected {start + row}")
    equity, cash, shares = equity_t.cpu().numpy(), cash_t.cpu().numpy(), shares_t.cpu().numpy()
    cost, traded = cost_t.cpu().numpy(), traded_t.cpu().numpy()
    fill_source = panel.open if config.fill == "next_open" else panel.close
    fill = fill_source[start:stop].double().cpu().numpy()
    bought = np.diff(shares, axis=0, prepend=0.0) > 0
    slip = config.half_spread_fraction
    return Ledger(
        first_bar=start,
        symbols=panel.symbols,
        close_usd=panel.close[start:stop].double().cpu().numpy(),
        equity_usd=equity,
        cash_usd=cash,
        shares=shares,
        fill_price_usd=np.where(bought, fill * (1.0 + slip), fill * (1.0 - slip)),
        cost_usd=cost,
        traded_usd=traded,
    )


def run_backtest(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    policies: Mapping[str, Policy],
    device: torch.device,
) -> BacktestResult:
    """Every trader in ``policies`` plus the baselines over one segment.

    Args:
        panel: the market; must hold ``segment``.
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings shared by traders and baselines (capital, fee, half-spread).
        policies: trader name -> deterministic policy, e.g. ``{"best": ..., "ensemble_top3": ...}``.
        device: where the env and policies run.

    Returns:
        Traders first (in ``policies`` order), then ``equal_weight``, ``market`` (when the panel
        has a benchmark) and ``cash``.
    """
    cash_usd = config.initial_cash_usd
    results: dict[str, TraderResult] = {}
    for name, policy in policies.items():
        ledger = run_policy(panel, segment, config, policy, device)
        results[name] = ledger_to_result(name, "trader", panel, ledger, cash_usd)
    baselines: dict[str, Ledger | None] = {
        "equal_weight": equal_weight_ledger(
            panel, segment, cash_usd, config.fee_rate, config.half_spread_bps
        ),
        "market": market_ledger(panel, segment, cash_usd, config.fee_rate, config.half_spread_bps),
        "cash": cash_ledger(panel, segment, cash_usd),
    }
    for name, baseline in baselines.items():
        if baseline is not None:
            results[name] = ledger_to_result(name, "baseline", panel, baseline, cash_usd)
    notes = (
        [] if panel.benchmark_close is not None else ["no market ETF in the dataset: market baseline omitted"]
    )
    dates = next(iter(results.values())).returns.index
    return BacktestResult(
        segment=segment,
        start=pd.Timestamp(dates[0]),
        end=pd.Timestamp(dates[-1]),
        traders=results,
        benchmark_name="market" if "market" in results else "equal_weight",
        initial_cash_usd=cash_usd,
        notes=notes,
    )
