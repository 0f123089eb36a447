"""One deterministic pass of a policy over a whole segment, and the backtest of traders + baselines.

The env runs in backtest mode (one env, no random start, one episode covering the segment): it
observes bar t at its close and fills at bar t+1, so a segment of ``n`` bars takes ``n - 1`` steps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pandas as pd
import torch

from finpod.backtest.baselines import cash_ledger, equal_weight_ledger, market_ledger
from finpod.backtest.policy_pass import drive_blocks
from finpod.backtest.pyfolio_format import Ledger, ledger_to_result
from finpod.backtest.recorder import RECORDED_FIELDS, LedgerRecorder, backtest_config
from finpod.backtest.result import BacktestResult, TraderResult
from finpod.backtest.run_ahead import THREADS as AHEAD_THREADS
from finpod.backtest.run_ahead import run_ahead, runs_ahead
from finpod.backtest.thread_tuner import ThreadTuner
from finpod.backtest.threads import threads_for, torch_threads
from finpod.backtest.trader_batch import TraderBatch
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from podracer.api import Policy

BACKTEST_SEED = 0
"""The backtest env is deterministic; the seed only satisfies the env's signature."""


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
    return run_policies(panel, segment, config, [policy], device)[0]


def run_policies(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    policies: Sequence[Policy],
    device: torch.device,
    threads_used: Counter[int] | None = None,
    ahead: bool = True,
) -> list[Ledger]:
    """Trade every policy over segment ``segment``; one ledger each.

    An agent's frozen policy, or an ensemble of them, runs ahead when the config lets accounts hold
    (:mod:`finpod.backtest.run_ahead`: many bars at a time while its account holds, one torch thread;
    :func:`worth_running_ahead`); every other policy steps bar by bar with the rest
    (:func:`step_policies`), as does a trader found to trade on most bars after its first
    :data:`~finpod.backtest.run_ahead.PROBE_BARS` (where stepping is faster). Each ledger is the one
    that policy gives alone.

    Args:
        panel: the market (any device).
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings (costs, limits, action mode); start and horizon are overridden.
        policies: deterministic observations ``(B, D)`` -> actions ``(B, A)``, one per trader.
        device: where the env and policies run.
        threads_used: if given, the bars run at each torch thread count are added to it.
        ahead: let the policies that can run ahead do so (False: all step bar by bar).

    Returns:
        One ledger per policy, in order; row 0 (the first bar) is all cash.
    """
    ledgers: dict[int, Ledger] = {}
    ahead = ahead and worth_running_ahead(config) and device.type != "cuda"  # a GPU pass is graphed
    stepped = [index for index, policy in enumerate(policies) if not (ahead and runs_ahead(policy))]
    for index, policy in enumerate(policies):
        if index in stepped:
            continue
        with torch_threads(AHEAD_THREADS):
            ledger = run_ahead(panel, segment, config, policy, device, give_up_if_dense=True)
        if ledger is None:  # it trades on most bars: it steps with the others
            stepped.append(index)
            continue
        ledgers[index] = ledger
        if threads_used is not None:
            threads_used[AHEAD_THREADS] += ledger.equity_usd.shape[0] - 1
    if stepped:
        each = step_policies(panel, segment, config, [policies[i] for i in stepped], device, threads_used)
        ledgers.update(zip(stepped, each, strict=True))
    return [ledgers[index] for index in range(len(policies))]


def worth_running_ahead(config: EnvConfig) -> bool:
    """Whether accounts can hold from bar to bar under ``config``: target weights with a rebalance
    band. Without a band (or with share orders) a continuous policy trades on every bar, where
    running ahead keeps one bar per block and costs about twice the bar-by-bar pass."""
    return config.action_mode == "weights" and config.rebalance_band > 0.0


def step_policies(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    policies: Sequence[Policy],
    device: torch.device,
    threads_used: Counter[int] | None = None,
) -> list[Ledger]:
    """Trade every policy over segment ``segment`` bar by bar in ONE env pass with ``N = len(policies)`` envs.

    Env ``i`` is driven by ``policies[i]`` (its public act function, on row ``i`` of the
    observation batch), so the per-bar cost of the env is paid once for all policies; frozen
    flat-MLP policies and ensembles of them run as one stacked pass (:class:`TraderBatch`). The envs
    share nothing but the market: each ledger equals the one a pass of that policy alone gives.
    Small batches run with one torch thread (:func:`threads_for`), so results do not depend on the
    machine's thread count; a stacked pass of several networks, whose numbers are the same at any
    count, runs at 1 or the process's count, whichever the loop measures faster
    (:class:`~finpod.backtest.thread_tuner.ThreadTuner`). The loop runs in ``torch.inference_mode``.

    Args:
        panel: the market (any device).
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings (costs, limits, action mode); start and horizon are overridden.
        policies: deterministic observations ``(1, D)`` -> actions ``(1, A)``, one per env.
        device: where the env and policies run.
        threads_used: if given, the steps run at each torch thread count are added to it.

    Returns:
        One ledger per policy, in order; row 0 (the first bar) is all cash.
    """
    count = len(policies)
    traders = TraderBatch(policies)
    if device.type == "cuda":  # torch threads do not matter there, and the pass is graphed
        return step_rows(panel, segment, config, traders, count, device)
    tuner = ThreadTuner(thread_candidates(traders, count))

    def act(obs: torch.Tensor) -> torch.Tensor:
        tuner.tick()  # the tuner picks the thread count of each step
        return traders(obs)

    try:
        ledgers = step_rows(panel, segment, config, act, count, device)
    finally:
        tuner.close()
    if threads_used is not None:
        threads_used.update(tuner.steps_at)
    return ledgers


def step_rows(
    panel: Panel, segment: str, config: EnvConfig, rows: Policy, count: int, device: torch.device
) -> list[Ledger]:
    """Trade ``count`` policies given as ONE row-wise call over segment ``segment``, bar by bar.

    Env ``i`` is driven by row ``i`` of ``rows`` (e.g. :class:`podracer.population.PopulationPolicy`:
    a population's pods in one batched network call per bar), so ``count`` policies cost one call a
    bar. Runs in the caller's torch thread setting.

    Args:
        panel: the market (any device).
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings (costs, limits, action mode); start and horizon are overridden.
        rows: observations ``(count, D)`` -> actions ``(count, A)``, row ``i`` by policy ``i``.
        count: how many policies ``rows`` holds.
        device: where the env and policies run.

    Returns:
        One ledger per row, in order; row 0 (the first bar) of each is all cash.
    """
    with torch.inference_mode():
        env = TradingEnv(
            panel, segment, backtest_config(config, panel, segment), count, BACKTEST_SEED, device
        )
        recorder = LedgerRecorder(panel, segment, config, device, num_envs=count)
        obs, _ = env.reset(seed=BACKTEST_SEED)
        for block in drive_blocks(env, rows, obs, recorder.num_bars - 1, RECORDED_FIELDS):
            recorder.record_rows(block)
        return recorder.ledgers()


def thread_candidates(traders: TraderBatch, rows: int) -> tuple[int, ...]:
    """The torch thread counts a pass may use: the process's count as well as 1 only for a stacked
    pass of two or more networks (its numbers are the same at any count), else :func:`threads_for`."""
    if traders.all_stacked and traders.stacked is not None and traders.stacked.count >= 2:
        return (1, torch.get_num_threads())
    return (threads_for(rows),)


def run_backtest(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    policies: Mapping[str, Policy],
    device: torch.device,
    ahead: bool = True,
    baselines: Mapping[str, Policy] | None = None,
    one_pass: bool | None = None,
) -> BacktestResult:
    """Every trader in ``policies`` plus the baselines over one segment.

    Args:
        panel: the market; must hold ``segment``.
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings shared by traders and baselines (capital, fill, costs, caps, band);
            every baseline runs through the same env (:mod:`finpod.backtest.baselines`).
        policies: trader name -> deterministic policy, e.g. ``{"best": ..., "ensemble_top3": ...}``;
            they trade in one batched env pass (:func:`run_policies`).
        device: where the env and policies run.
        ahead: let the traders that can run ahead do so (:func:`run_policies`).
        baselines: baselines that are policies (the linear baseline, :mod:`finpod.linear_baseline`),
            name -> deterministic policy; they step through the same env, in a pass of their own
            or in the traders' (``one_pass``). The accounts are independent and each policy acts on
            its own row, so the ledgers are the same either way when no trader runs ahead (never on
            CUDA; running ahead matches stepping to float rounding only), up to the rounding of a
            GPU's sums over many assets, which can depend on the number of accounts.
        one_pass: step the policy baselines in the traders' pass (no trader then runs ahead);
            ``None``: on a CUDA device, where a pass costs about the same per bar whatever its
            accounts (small kernels one after the other), so one pass instead of two nearly halves
            the phase; on a CPU each pass keeps its own thread setting and the traders may run
            ahead. One policy that cannot be graphed makes the whole pass eager on CUDA.

    Returns:
        Traders first (in ``policies`` order), then ``equal_weight``, the policy ``baselines``,
        ``market`` (when the panel has a benchmark) and ``cash``.
    """
    cash_usd = config.initial_cash_usd
    results: dict[str, TraderResult] = {}
    threads_used: Counter[int] = Counter()
    traders = list(policies.values())
    policy_baselines = dict(baselines or {})
    together = device.type == "cuda" if one_pass is None else one_pass
    if together and policies and policy_baselines:
        both = [*traders, *policy_baselines.values()]
        everything = step_policies(panel, segment, config, both, device, threads_used)
        ledgers, traded = everything[: len(traders)], everything[len(traders) :]
    else:
        ledgers = (
            run_policies(panel, segment, config, traders, device, threads_used, ahead) if policies else []
        )
        traded = (
            step_policies(panel, segment, config, list(policy_baselines.values()), device)
            if baselines
            else []
        )
    for name, ledger in zip(policies, ledgers, strict=True):
        results[name] = ledger_to_result(name, "trader", panel, ledger, cash_usd)
    ledgers_of: dict[str, Ledger | None] = {
        "equal_weight": equal_weight_ledger(panel, segment, config, device),
        **dict(zip(policy_baselines, traded, strict=True)),
        "market": market_ledger(panel, segment, config, device),
        "cash": cash_ledger(panel, segment, config, device),
    }
    for name, baseline in ledgers_of.items():
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
        steps_by_threads=dict(sorted(threads_used.items())),
    )
