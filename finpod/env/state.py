"""The env's dynamic state and its episode starts: a pytree of tensors, reset by pure functions.

Shapes: ``N`` envs, ``M`` assets. Start bars come from a counter-based hash of a per-env key and
the env's episode number, so an autoreset inside ``step`` needs no random-number generator state
(pure, deterministic, capturable in a CUDA graph) and each env draws its own sequence of starts.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from finpod.env.market import Market

KEY_BITS = 32
"""Env keys and hashes are unsigned 32-bit integers held in int64."""
_MASK_32 = (1 << KEY_BITS) - 1
_GOLDEN_32 = 0x9E3779B9
_FMIX_MUL_1 = 0x85EBCA6B
_FMIX_MUL_2 = 0xC2B2AE35
MONEY_DTYPE = torch.float64
"""Cash, holdings and equity: float64, so that 10,000 steps of accounting do not drift (float32's
24-bit mantissa drifted equity by 5e-5 relative after 10k steps). Prices and features stay float32."""


class EnvState(NamedTuple):
    """Dynamic state of ``N`` portfolios (float64 money and shares, int64 bar indices).

    Attributes:
        cash_usd: float64 ``(N,)`` cash (USD, >= 0).
        shares: float64 ``(N, M)`` holdings (shares, >= 0).
        equity_usd: float64 ``(N,)`` cash + holdings at bar ``t``'s close (USD).
        t: ``(N,)`` the bar each env has observed (its close is "now").
        start: ``(N,)`` first bar of each env's episode.
        end: ``(N,)`` bar at which each env's episode truncates.
        episode: ``(N,)`` episodes each env has started since the last seeded reset, minus one.
        key: ``(N,)`` per-env random key in ``[0, 2**32)`` drawn at the seeded reset.
    """

    cash_usd: torch.Tensor
    shares: torch.Tensor
    equity_usd: torch.Tensor
    t: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor
    episode: torch.Tensor
    key: torch.Tensor


def hash_u32(values: torch.Tensor) -> torch.Tensor:
    """MurmurHash3's 32-bit finaliser, elementwise on int64 tensors holding values in ``[0, 2**32)``."""
    x = values & _MASK_32
    x = x ^ (x >> 16)
    x = (x * _FMIX_MUL_1) & _MASK_32
    x = x ^ (x >> 13)
    x = (x * _FMIX_MUL_2) & _MASK_32
    return x ^ (x >> 16)


def episode_bounds(
    market: Market, key: torch.Tensor, episode: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Start and truncation bars ``(N,)`` int64 of episode ``episode`` of the envs keyed ``key``.

    The start is uniform over the ``market.num_starts`` bars from the segment's first bar (a
    multiply-shift of the 32-bit hash); the end is ``start + horizon`` or the segment's last bar.
    """
    mixed = hash_u32(key + episode * _GOLDEN_32)
    start = market.first_bar + ((mixed * market.num_starts) >> KEY_BITS)
    end = torch.clamp(start + market.horizon_bars, max=market.last_bar)
    return start, end


def initial_state(market: Market, key: torch.Tensor, num_assets: int, initial_cash_usd: float) -> EnvState:
    """Every env at the start of its first episode: all cash, no holdings.

    Args:
        market: segment bounds and start rule.
        key: ``(N,)`` int64 per-env keys in ``[0, 2**32)``.
        num_assets: ``M``.
        initial_cash_usd: cash at an episode's start.
    """
    episode = torch.zeros_like(key)
    start, end = episode_bounds(market, key, episode)
    num_envs = key.shape[0]
    cash = torch.full((num_envs,), initial_cash_usd, dtype=MONEY_DTYPE, device=key.device)
    return EnvState(
        cash_usd=cash,
        shares=torch.zeros((num_envs, num_assets), dtype=MONEY_DTYPE, device=key.device),
        equity_usd=cash.clone(),
        t=start.clone(),
        start=start,
        end=end,
        episode=episode,
        key=key,
    )


def restart_where(
    market: Market, state: EnvState, restart: torch.Tensor, initial_cash_usd: float
) -> EnvState:
    """Start the next episode of the envs where ``restart`` ``(N,)`` bool is true; others unchanged."""
    episode = state.episode + restart.to(torch.int64)
    start, end = episode_bounds(market, state.key, episode)
    cash = torch.where(restart, initial_cash_usd, state.cash_usd)
    return EnvState(
        cash_usd=cash,
        shares=torch.where(restart.unsqueeze(1), 0.0, state.shares),
        equity_usd=torch.where(restart, initial_cash_usd, state.equity_usd),
        t=torch.where(restart, start, state.t),
        start=torch.where(restart, start, state.start),
        end=torch.where(restart, end, state.end),
        episode=episode,
        key=state.key,
    )
