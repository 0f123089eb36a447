"""The tournament of a run: pods learn on the TRAIN segment and are ranked on VALIDATION.

Validation score (what the leaderboard ranks by): the annualised Sharpe ratio (empyrical, zero
risk-free rate, 252 sessions a year) of the policy's daily returns over one deterministic pass of
the validation segment; a policy whose returns have zero volatility (it never leaves cash) scores 0.
At minute scale the pass may run as contiguous chunks side by side (``tournament.validation_chunks``,
:mod:`finpod.backtest.chunked`), an approximation of the one continuous pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import empyrical as ep
import pandas as pd
import torch

from finpod.backtest.chunked import chunk_plan, chunked_equities, chunked_equity
from finpod.backtest.pyfolio_format import daily_returns
from finpod.backtest.runner import run_policy, worth_running_ahead
from finpod.backtest.threads import torch_threads
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.shape import EnvShape
from finpod.errors import SpecError
from finpod.matmul_precision import set_cuda_matmul_precision
from finpod.spec import Spec
from podracer.api import Agent, AgentFactory, PodAgent, Policy, PPOAgent, PPOConfig
from podracer.api import deterministic_policy as engine_deterministic_policy

VALIDATION_SEGMENT = "validation"
TRAIN_SEGMENT = "train"
INIT_THREADS = 1
"""Torch threads an agent is built with: one, so its initial weights are the same on every machine."""


def check_horizon(spec: Spec, panel: Panel) -> None:
    """Refuse ``env.horizon_bars`` that leaves no room for random episode starts in the train segment.

    With a horizon as long as the segment every episode would start at its first bar: the pods
    would see one market path, however many envs they run.

    Raises:
        SpecError: the horizon is at least the train segment's length minus one bar.
    """
    first, stop = panel.segment(TRAIN_SEGMENT)
    bars = stop - first
    if spec.env.horizon_bars >= bars - 1:
        raise SpecError(
            f"{spec.source or 'spec'}: env.horizon_bars {spec.env.horizon_bars} does not fit the train "
            f"segment's {bars} {panel.frequency} bars (every episode would start at its first bar); "
            f"fix: set env.horizon_bars below {max(bars - 1, 2)}, e.g. {max(bars // 4, 2)}, or widen "
            "segments.train"
        )


def validation_score(
    panel: Panel,
    config: EnvConfig,
    policy: Policy,
    device: torch.device,
    *,
    chunks: int = 1,
    warmup_bars: int = 0,
) -> float:
    """Annualised Sharpe of ``policy``'s daily returns over the validation segment (0 if flat).

    Args:
        panel: the selection panel (holds the validation segment).
        config: env settings (start and horizon are overridden).
        policy: deterministic, observations ``(B, D)`` -> actions ``(B, A)``.
        device: where the env and policy run.
        chunks: 1: one continuous pass (exact). More: the segment runs as up to ``chunks``
            contiguous chunks side by side, each warmed up on the ``warmup_bars`` before it, and
            their returns are stitched (:mod:`finpod.backtest.chunked`; about ``chunks`` times
            fewer sequential steps, an approximation of the continuous score).
        warmup_bars: unscored bars before each chunk but the first (``chunks`` > 1).
    """
    first_bar, stop = panel.segment(VALIDATION_SEGMENT)
    plan = chunk_plan(stop - first_bar, chunks, warmup_bars)
    if plan.num_chunks == 1 and worth_running_ahead(config) and device.type != "cuda":
        equity = run_policy(panel, VALIDATION_SEGMENT, config, policy, device).equity_usd  # runs ahead
    else:  # one pass that keeps only the equity (one chunk: the continuous pass itself)
        equity = chunked_equity(panel, VALIDATION_SEGMENT, config, policy, device, plan)
    return _sharpe(daily_returns(panel, first_bar, equity, config.initial_cash_usd))


@dataclass(frozen=True)
class ValidationScore:
    """The tournament's ``evaluate``: :func:`validation_score` of a policy, and of many at once.

    A population of pods (``tournament.backend = "population"``) is scored in one batched pass
    (:meth:`score_many`: one env of ``P`` accounts, or ``P x K`` with ``K`` chunks, one network
    call a bar for all pods); only a continuous score with a rebalance band on a CPU, where a
    single pass runs ahead, scores each policy alone, as :meth:`__call__` does. Every pass keeps
    only the equity a score needs.

    Attributes:
        panel: the selection panel (holds the validation segment).
        config: env settings (start and horizon are overridden).
        device: where the env and policies run.
        chunks: ``tournament.validation_chunks``.
        warmup_bars: ``tournament.validation_warmup_bars``.
    """

    panel: Panel
    config: EnvConfig
    device: torch.device
    chunks: int = 1
    warmup_bars: int = 0

    def __call__(self, policy: Policy) -> float:
        """:func:`validation_score` of ``policy``."""
        return validation_score(
            self.panel, self.config, policy, self.device, chunks=self.chunks, warmup_bars=self.warmup_bars
        )

    def score_many(self, policies: Sequence[Policy], rows: Policy) -> list[float]:
        """The scores of ``policies``; ``rows``: them as one row-wise call (podracer ScoresMany).

        One env pass for all: of ``P x K`` accounts with ``K`` chunks, else of ``P`` accounts; but a
        continuous score with a rebalance band scores each policy alone on a CPU, where a single
        pass runs ahead (:func:`~finpod.backtest.runner.worth_running_ahead`).
        """
        first_bar, stop = self.panel.segment(VALIDATION_SEGMENT)
        plan = chunk_plan(stop - first_bar, self.chunks, self.warmup_bars)
        cash = self.config.initial_cash_usd
        if plan.num_chunks == 1 and worth_running_ahead(self.config) and self.device.type != "cuda":
            return [self(policy) for policy in policies]
        curves = chunked_equities(
            self.panel, VALIDATION_SEGMENT, self.config, rows, len(policies), self.device, plan
        )
        return [_sharpe(daily_returns(self.panel, first_bar, equity, cash)) for equity in curves]


def _sharpe(returns: pd.Series) -> float:
    """Annualised Sharpe of daily returns (empyrical, zero risk-free rate); 0 if flat or undefined."""
    sharpe = float(ep.sharpe_ratio(returns.to_numpy()))
    return sharpe if math.isfinite(sharpe) else 0.0


def agent_factory(shape: EnvShape, device: torch.device) -> AgentFactory:
    """``(PPOConfig, seed) -> PPOAgent`` sized for envs of ``shape`` (a run builds it once, in its
    :class:`~finpod.pipeline.context.RunContext`).

    The agent is built on one torch thread: its orthogonal initialisation factors matrices with
    LAPACK (MKL), whose result depends on the thread count, so without this two machines with
    different core counts would start the same seed from different weights.
    """

    def make(config: PPOConfig, seed: int) -> PodAgent:
        with torch_threads(INIT_THREADS):
            return PPOAgent(
                shape.obs_dim,
                shape.action_dim,
                shape.action_low,
                shape.action_high,
                config,
                device,
                seed,
                layout=shape.layout,
            )

    return make


def precision_agent_factory(factory: AgentFactory, device: torch.device, precision: str) -> AgentFactory:
    """``factory`` that first sets the CUDA matmul precision in the process building the agent.

    A pod on a Ray worker (its own process) then trains at the spec's precision too.
    """
    if device.type != "cuda":
        return factory

    def make(config: PPOConfig, seed: int) -> PodAgent:
        set_cuda_matmul_precision(device, precision)
        return factory(config, seed)

    return make


def deterministic_policy(agent: Agent) -> Policy:
    """The agent's deterministic action as a :data:`Policy`, frozen at its current weights.

    :func:`podracer.api.deterministic_policy`: the same function the tournament's validation
    scores use, so a backtest, a replay and a validation score evaluate an agent alike.
    """
    return engine_deterministic_policy(agent)
