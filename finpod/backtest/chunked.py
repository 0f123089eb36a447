"""A segment's equity curve from ``K`` contiguous chunks traded side by side (fast validation).

One policy's pass over a segment is sequential (each observation holds the portfolio the last fill
left), so at minute scale it is ``n`` batch-1 steps. Cut into ``K`` chunks run as ``K`` envs of one
batch, it is about ``n / K`` steps of batch ``K``. Each chunk but the first starts all cash
``warmup_bars`` bars before its own first bar, trades through them unscored (its portfolio settles
into what the policy holds there), then is scored on its own bars; the first chunk starts at the
segment's first bar, exactly as the continuous pass does. The per-bar returns of the chunks are
stitched into one equity curve (each chunk continues from the level the previous one ended at).

This is an approximation of the continuous pass: a chunk's first scored bars can differ from the
continuous pass where the policy's holdings still depend on more than ``warmup_bars`` of history
(``tests/app/test_chunked.py`` measures the agreement). Backtests never use it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from finpod.backtest.policy_pass import equity_curve
from finpod.backtest.threads import threads_for, torch_threads
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from podracer.api import Policy

CHUNKED_SEED = 0
"""The chunks' env is deterministic; the seed only satisfies the env's signature."""


@dataclasses.dataclass(frozen=True)
class ChunkPlan:
    """How ``K`` chunks cover the rows ``1 .. n - 1`` of a segment of ``n`` bars (row = bar offset).

    Attributes:
        steps: ``S``, env steps every chunk takes (its warm-up plus its scored bars).
        starts: int64 ``(K,)`` row each chunk's env first observes (all cash there).
        first_rows: int64 ``(K,)`` first row each chunk scores (its return from the row before).
        stop_rows: int64 ``(K,)`` one past the last row each chunk scores; chunk ``j`` stops where
            chunk ``j + 1`` starts, the last at ``n``.
    """

    steps: int
    starts: np.ndarray
    first_rows: np.ndarray
    stop_rows: np.ndarray

    @property
    def num_chunks(self) -> int:
        """``K``."""
        return int(self.starts.shape[0])


def chunk_plan(num_bars: int, chunks: int, warmup_bars: int) -> ChunkPlan:
    """The chunks of a segment of ``num_bars`` bars: at most ``chunks`` of them, equal lengths.

    The first chunk scores ``warmup_bars`` rows more than the others (it needs no warm-up: it
    starts where the segment does), so all chunks take the same number of steps. Every chunk scores
    at least ``warmup_bars`` rows (warm-ups at most double the work), so a segment too short for
    two such chunks gets one: the continuous pass.

    Args:
        num_bars: ``n`` >= 2, bars in the segment.
        chunks: the most chunks wanted (>= 1).
        warmup_bars: unscored bars each chunk but the first trades before its own (>= 0).
    """
    rows = num_bars - 1
    spare = rows - warmup_bars
    if chunks <= 1 or spare < 2:
        one = np.array([0], dtype=np.int64)
        return ChunkPlan(rows, one, one + 1, np.array([num_bars], dtype=np.int64))
    length = max(math.ceil(spare / chunks), warmup_bars, 1)
    count = math.ceil(spare / length)
    if count < 2:
        return chunk_plan(num_bars, 1, warmup_bars)
    steps = warmup_bars + length
    first_rows = np.concatenate([[1], steps + 1 + length * np.arange(count - 1)]).astype(np.int64)
    stop_rows = np.append(first_rows[1:], num_bars).astype(np.int64)
    starts = np.minimum(first_rows - 1 - warmup_bars, rows - steps)
    starts[0] = 0
    return ChunkPlan(steps, starts.astype(np.int64), first_rows, stop_rows)


def stitch(plan: ChunkPlan, curves: np.ndarray) -> np.ndarray:
    """One equity curve ``(n,)`` from the chunks' curves ``(S + 1, K)`` (row ``i`` of chunk ``j`` is
    its equity at segment row ``plan.starts[j] + i``): chunk 0 as it is, each later chunk's returns
    continuing from the stitched level at the row before its first."""
    out = np.empty(int(plan.stop_rows[-1]), dtype=np.float64)
    out[: plan.stop_rows[0]] = curves[: plan.stop_rows[0], 0]
    for j in range(1, plan.num_chunks):
        first, stop, offset = int(plan.first_rows[j]), int(plan.stop_rows[j]), int(plan.starts[j])
        level = out[first - 1] / curves[first - 1 - offset, j]
        out[first:stop] = curves[first - offset : stop - offset, j] * level
    return out


def chunked_equity(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    policy: Policy,
    device: torch.device,
    plan: ChunkPlan,
) -> np.ndarray:
    """The stitched equity curve of ``policy`` over ``segment``: float64 ``(n,)`` USD at each bar's close.

    Args:
        panel: the market.
        segment: the segment (``plan`` must be for its length).
        config: env settings (start and horizon are overridden).
        policy: deterministic, observations ``(K, D)`` -> actions ``(K, A)``.
        device: where the env and policy run.
        plan: the chunks (:func:`chunk_plan`).
    """
    return chunked_equities(panel, segment, config, policy, 1, device, plan)[0]


def chunked_equities(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    rows: Policy,
    count: int,
    device: torch.device,
    plan: ChunkPlan,
) -> list[np.ndarray]:
    """The stitched equity curves of ``count`` policies given as ONE row-wise call, in one env pass.

    The env holds ``count x K`` accounts, policy ``p``'s chunks in rows ``p K .. (p + 1) K - 1``, so
    ``count`` scores cost the sequential steps of one (:func:`~finpod.backtest.policy_pass.equity_curve`:
    CUDA graphs on a GPU).

    Args:
        panel: the market.
        segment: the segment (``plan`` must be for its length).
        config: env settings (start and horizon are overridden).
        rows: observations ``(count K, D)`` -> actions ``(count K, A)``, row block ``p`` by policy
            ``p`` (e.g. :class:`podracer.population.PopulationPolicy`; one policy when ``count`` is 1).
        count: how many policies ``rows`` holds.
        device: where the env and policies run.
        plan: the chunks (:func:`chunk_plan`).

    Returns:
        One float64 ``(n,)`` equity curve (USD at each bar's close) per policy, in order.
    """
    first_bar, _ = panel.segment(segment)
    chunks = plan.num_chunks
    chunk_config = dataclasses.replace(
        config, random_start=False, horizon_bars=plan.steps, start_portfolio="cash"
    )
    starts = np.tile(plan.starts + first_bar, count)
    with torch_threads(threads_for(chunks * count)), torch.inference_mode():
        env = TradingEnv(panel, segment, chunk_config, chunks * count, CHUNKED_SEED, device)
        obs, _ = env.reset_at(torch.as_tensor(starts, dtype=torch.int64))
        curves = equity_curve(env, rows, obs, plan.steps).cpu().numpy()
    return [stitch(plan, curves[:, p * chunks : (p + 1) * chunks]) for p in range(count)]
