"""One deterministic pass of a policy over a whole segment, and the backtest of traders + baselines.

The env runs in backtest mode (one env, no random start, one episode covering the segment): it
observes bar t at its close and fills at bar t+1, so a segment of ``n`` bars takes ``n - 1`` steps.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import torch

from finpod.backtest.baselines import cash_ledger, equal_weight_ledger, market_ledger
from finpod.backtest.pyfolio_format import Ledger, ledger_to_result
from finpod.backtest.recorder import LedgerRecorder, backtest_config
from finpod.backtest.result import BacktestResult, TraderResult
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from podracer.api import Policy

BACKTEST_ENVS = 1
BACKTEST_SEED = 0
"""The backtest env is deterministic; the seed only satisfies the env's signature."""


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
    env = TradingEnv(
        panel, segment, backtest_config(config, panel, segment), BACKTEST_ENVS, BACKTEST_SEED, device
    )
    recorder = LedgerRecorder(panel, segment, config, device)
    obs, _ = env.reset(seed=BACKTEST_SEED)
    for row in range(1, recorder.num_bars):
        obs, _, _, _, info = env.step(policy(obs))
        recorder.record(row, info)
    return recorder.ledger()


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
        config: env settings shared by traders and baselines (capital, fill, costs, caps, band);
            every baseline runs through the same env (:mod:`finpod.backtest.baselines`).
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
        "equal_weight": equal_weight_ledger(panel, segment, config, device),
        "market": market_ledger(panel, segment, config, device),
        "cash": cash_ledger(panel, segment, config, device),
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
