"""The env's dynamic state and its episode starts: a pytree of tensors, reset by pure functions.

Shapes: ``N`` envs, ``M`` assets. Start bars come from a counter-based hash of a per-env key and
the env's episode number, so an autoreset inside ``step`` needs no random-number generator state
(pure, deterministic, capturable in a CUDA graph) and each env draws its own sequence of starts.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from finpod.env.market import BUY_CAP_ROW, CLOSE_ROW, Market

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


class EpisodeStart(NamedTuple):
    """How an episode's book starts (:class:`~finpod.env.config.EnvConfig`'s ``initial_cash_usd``,
    ``start_portfolio`` and ``whole_shares``).

    Attributes:
        initial_cash_usd: what the book is worth at the episode's first bar's close (USD).
        invested: spread it equally over the assets tradable at that bar (bought at its close, no
            cost); False: all cash.
        whole_shares: round an invested start's holdings down to whole shares.
    """

    initial_cash_usd: float
    invested: bool = False
    whole_shares: bool = False


def starting_book(
    market: Market, start: torch.Tensor, how: EpisodeStart
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cash float64 ``(N,)`` and shares float64 ``(N, M)`` of books starting at bars ``start`` ``(N,)``.

    All cash, or (``how.invested``) ``initial_cash_usd / K`` of each of the ``K`` assets tradable at
    the start bar (a positive close and a buy limit above 0) at that bar's close, whole shares
    rounded down when asked; cash keeps the remainder (never below 0), so equity at the start bar's
    close is ``initial_cash_usd`` up to rounding. No asset tradable: all cash.
    """
    num_envs = start.shape[0]
    num_assets = market.bars.shape[2]
    cash = torch.full((num_envs,), how.initial_cash_usd, dtype=MONEY_DTYPE, device=start.device)
    if not how.invested:
        return cash, torch.zeros((num_envs, num_assets), dtype=MONEY_DTYPE, device=start.device)
    close = market.bars[:, CLOSE_ROW].index_select(0, start).to(MONEY_DTYPE)
    tradable = (close > 0.0) & (market.bars[:, BUY_CAP_ROW].index_select(0, start) > 0.0)
    count = tradable.sum(dim=1, keepdim=True).clamp(min=1).to(MONEY_DTYPE)
    shares = torch.where(tradable, how.initial_cash_usd / count / torch.where(tradable, close, 1.0), 0.0)
    if how.whole_shares:
        shares = torch.floor(shares)
    cash = torch.clamp(cash - (shares * close).sum(dim=1), min=0.0)
    return cash, shares


def initial_state(market: Market, key: torch.Tensor, how: EpisodeStart) -> EnvState:
    """Every env at the start of its first episode, its book as ``how`` says (:func:`starting_book`).

    Args:
        market: segment bounds, start rule and prices.
        key: ``(N,)`` int64 per-env keys in ``[0, 2**32)``.
        how: the starting book.
    """
    episode = torch.zeros_like(key)
    start, end = episode_bounds(market, key, episode)
    return state_at(market, start, end, episode, key, how)


def state_at(
    market: Market,
    start: torch.Tensor,
    end: torch.Tensor,
    episode: torch.Tensor,
    key: torch.Tensor,
    how: EpisodeStart,
) -> EnvState:
    """Envs at the first bars ``start`` ``(N,)`` of episodes ending at ``end``, books as ``how`` says."""
    cash, shares = starting_book(market, start, how)
    return EnvState(
        cash_usd=cash,
        shares=shares,
        equity_usd=book_equity(market, start, cash, shares) if how.invested else cash.clone(),
        t=start.clone(),
        start=start,
        end=end,
        episode=episode,
        key=key,
    )


def book_equity(market: Market, bars: torch.Tensor, cash: torch.Tensor, shares: torch.Tensor) -> torch.Tensor:
    """Equity float64 ``(N,)`` of books at their bars' closes: ``cash + sum(shares x close)``."""
    close = market.bars[:, CLOSE_ROW].index_select(0, bars).to(MONEY_DTYPE)
    return cash + (shares * close).sum(dim=1)


def restart_where(market: Market, state: EnvState, restart: torch.Tensor, how: EpisodeStart) -> EnvState:
    """Start the next episode of the envs where ``restart`` ``(N,)`` bool is true; others unchanged."""
    episode = state.episode + restart.to(torch.int64)
    start, end = episode_bounds(market, state.key, episode)
    if how.invested:
        cash_start, shares_start = starting_book(market, start, how)
        equity_start = book_equity(market, start, cash_start, shares_start)
        rows = restart.unsqueeze(1)
        cash = torch.where(restart, cash_start, state.cash_usd)
        shares = torch.where(rows, shares_start, state.shares)
        equity = torch.where(restart, equity_start, state.equity_usd)
    else:
        cash = torch.where(restart, how.initial_cash_usd, state.cash_usd)
        shares = torch.where(restart.unsqueeze(1), 0.0, state.shares)
        equity = torch.where(restart, how.initial_cash_usd, state.equity_usd)
    return EnvState(
        cash_usd=cash,
        shares=shares,
        equity_usd=equity,
        t=torch.where(restart, start, state.t),
        start=torch.where(restart, start, state.start),
        end=torch.where(restart, end, state.end),
        episode=episode,
        key=state.key,
    )
