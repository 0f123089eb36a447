"""The env as pure functions: ``observe(state)`` and ``step(state, actions) -> (state', outputs)``.

gymnax style: static settings (:class:`EnvConfig`, :class:`Market`) are plain arguments, the dynamic
state is an :class:`EnvState` of tensors; no input is mutated (only the step's own fresh
temporaries are written in place), nothing syncs with the host, no shape depends on data, so a
K-step rollout can be compiled (``torch.compile``) or captured in a CUDA graph.

Timing: the agent observes bar t (its close); orders fill at bar t+1 (its open, or its close); the
portfolio is valued at bar t+1's close; the reward compares equity at t+1's close with t's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from finpod.env.accounting import execute_orders, share_delta_to_orders, weights_to_orders
from finpod.env.config import EnvConfig
from finpod.env.market import BUY_CAP_ROW, CLOSE_ROW, FILL_ROW, SELL_CAP_ROW, Market
from finpod.env.observation import fill_observation, template_rows
from finpod.env.rewards import excess_reward, step_reward
from finpod.env.state import MONEY_DTYPE, EnvState, EpisodeStart, restart_where


class StepOutput(NamedTuple):
    """What one step returns besides the new state (``N`` envs, ``M`` assets, ``D`` obs size).

    Attributes:
        obs: ``(N, D)`` observations after same-step autoreset (a finished env's first new obs).
        reward: ``(N,)`` float32 (computed in float64).
        terminated: ``(N,)`` bool, always false: a long-only cash-funded portfolio cannot be ruined.
        truncated: ``(N,)`` bool, the episode hit its horizon or the segment's last bar.
        final_obs: ``(N, D)`` observation reached by the step, before any reset.
        equity_usd: float64 ``(N,)`` equity at bar t+1's close, before any reset.
        cash_usd: float64 ``(N,)`` cash after the step's trades, before any reset.
        shares: float64 ``(N, M)`` holdings after the step's trades, before any reset.
        cost_usd: float64 ``(N,)`` fees plus slippage paid in the step.
        traded_usd: float64 ``(N,)`` gross notional traded in the step at executed prices.
        bar_index: ``(N,)`` int64, bar t+1 the step ended on.
    """

    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    equity_usd: torch.Tensor
    cash_usd: torch.Tensor
    shares: torch.Tensor
    cost_usd: torch.Tensor
    traded_usd: torch.Tensor
    bar_index: torch.Tensor


def observe(market: Market, state: EnvState) -> torch.Tensor:
    """Observations ``(N, D)`` of every env at its current bar ``state.t``."""
    close = market.bars[:, CLOSE_ROW].index_select(0, state.t)
    return fill_observation(
        template_rows(market.obs_template, state.t),
        holdings_usd=state.shares * close,
        cash_usd=state.cash_usd,
        equity_usd=state.equity_usd,
    )


def episode_start(config: EnvConfig) -> EpisodeStart:
    """How ``config``'s episodes start: its ``initial_cash_usd``, ``start_portfolio`` and ``whole_shares``."""
    return EpisodeStart(
        config.initial_cash_usd, config.start_portfolio == "equal_weight", config.whole_shares
    )


def observe_holding(
    market: Market, cash_usd: torch.Tensor, shares: torch.Tensor, bars: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """What one account would observe at each of ``bars`` if it traded nothing until then.

    A step that sends no order leaves cash and shares bit for bit as they were, so the account at
    each later bar differs only in its valuation: ``equity = cash + sum(shares x close)``, the
    arithmetic of :func:`settle` and :func:`_trade` (which observe it after a step).

    Args:
        market: the panel's tables.
        cash_usd: float64 ``(1,)`` the account's cash.
        shares: float64 ``(1, M)`` its holdings.
        bars: int64 ``(K,)`` bar indices.

    Returns:
        Observations ``(K, D)`` and equity float64 ``(K,)`` at each bar's close.
    """
    close = market.bars[:, CLOSE_ROW].index_select(0, bars).to(MONEY_DTYPE)
    holdings_usd = shares * close
    equity_usd = cash_usd + holdings_usd.sum(dim=1)
    obs = fill_observation(
        template_rows(market.obs_template, bars),
        holdings_usd=holdings_usd,
        cash_usd=cash_usd.expand(bars.shape[0]),
        equity_usd=equity_usd,
    )
    return obs, equity_usd


class Settlement(NamedTuple):
    """The arithmetic of one bar's trades (``N`` envs, ``M`` assets)."""

    cash_usd: torch.Tensor
    shares: torch.Tensor
    cost_usd: torch.Tensor
    traded_usd: torch.Tensor
    holdings_usd: torch.Tensor
    equity_usd: torch.Tensor
    reward: torch.Tensor


SettleFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], Settlement]


def settle(
    config: EnvConfig,
    actions: torch.Tensor,
    cash_usd: torch.Tensor,
    shares: torch.Tensor,
    equity_usd: torch.Tensor,
    bar: torch.Tensor,
) -> Settlement:
    """Orders, limits, fills, costs, valuation and reward of one bar: elementwise work only.

    No gathers and no shapes that depend on data, so inductor fuses it into one loop nest
    (:class:`~finpod.env.trading_env.TradingEnv` ``compile_step``).

    Args:
        config: costs, limits, action and reward modes.
        actions: float32 ``(N, M + 1)`` (``weights``) or ``(N, M)`` (``share_delta``), widened to
            float64 where they become orders.
        cash_usd: float64 ``(N,)`` cash before the bar.
        shares: float64 ``(N, M)`` holdings before the bar.
        equity_usd: float64 ``(N,)`` equity at the previous close (for the reward).
        bar: float32 ``(N, 4, M)`` each env's fill bar row of :attr:`Market.bars`, widened to
            float64 once here (cheaper than a cast inside every mixed-dtype operation).
    """
    bar = bar.to(MONEY_DTYPE)
    fill_price = bar[:, FILL_ROW]
    if config.action_mode == "weights":
        orders = weights_to_orders(
            actions, cash_usd, shares, fill_price, config.rebalance_band, config.fully_invested
        )
    else:
        orders = share_delta_to_orders(actions.to(MONEY_DTYPE), config.max_shares)
    fills = execute_orders(
        orders,
        cash_usd,
        shares,
        fill_price,
        buy_limit_shares=bar[:, BUY_CAP_ROW],
        sell_limit_shares=bar[:, SELL_CAP_ROW],
        config=config,
        orders_within_holdings=config.action_mode == "weights",
    )
    holdings_usd = fills.shares * bar[:, CLOSE_ROW]
    new_equity_usd = fills.cash_usd + holdings_usd.sum(dim=1)
    return Settlement(
        cash_usd=fills.cash_usd,
        shares=fills.shares,
        cost_usd=fills.cost_usd,
        traded_usd=fills.traded_usd,
        holdings_usd=holdings_usd,
        equity_usd=new_equity_usd,
        reward=step_reward(equity_usd, new_equity_usd, config).to(torch.float32),
    )


def _trade(
    config: EnvConfig, market: Market, state: EnvState, actions: torch.Tensor, settle_fn: SettleFn | None
) -> tuple[EnvState, StepOutput, torch.Tensor]:
    """One bar without autoreset: the stepped state, its outputs, and holdings ``(N, M)`` in USD."""
    next_bar = state.t + 1
    bar = market.bars.index_select(0, next_bar)
    if settle_fn is None:
        done = settle(config, actions, state.cash_usd, state.shares, state.equity_usd, bar)
    else:
        done = settle_fn(actions, state.cash_usd, state.shares, state.equity_usd, bar)
    final_obs = fill_observation(
        template_rows(market.obs_template, next_bar),
        holdings_usd=done.holdings_usd,
        cash_usd=done.cash_usd,
        equity_usd=done.equity_usd,
    )
    truncated = next_bar >= state.end
    reward = done.reward
    if config.reward == "excess_log_return":
        reward = excess_reward(reward, market.equal_weight_log_return.index_select(0, next_bar), config)
    output = StepOutput(
        obs=final_obs,
        reward=reward,
        terminated=torch.zeros_like(truncated),
        truncated=truncated,
        final_obs=final_obs,
        equity_usd=done.equity_usd,
        cash_usd=done.cash_usd,
        shares=done.shares,
        cost_usd=done.cost_usd,
        traded_usd=done.traded_usd,
        bar_index=next_bar,
    )
    stepped = state._replace(
        cash_usd=done.cash_usd, shares=done.shares, equity_usd=done.equity_usd, t=next_bar
    )
    return stepped, output, done.holdings_usd


def advance(
    config: EnvConfig,
    market: Market,
    state: EnvState,
    actions: torch.Tensor,
    settle_fn: SettleFn | None = None,
) -> tuple[EnvState, StepOutput]:
    """:func:`step` for a bar on which no episode ends: no autoreset work, ``obs is final_obs``.

    Valid only when the caller knows that no env truncates on this step (every episode lasts
    exactly ``market.horizon_bars`` steps, so a host-side clock knows without asking the device).
    ``truncated`` is still computed from the state, so a wrong clock shows. Args and returns as
    :func:`step`.
    """
    stepped, output, _ = _trade(config, market, state, actions, settle_fn)
    return stepped, output


def step(
    config: EnvConfig,
    market: Market,
    state: EnvState,
    actions: torch.Tensor,
    settle_fn: SettleFn | None = None,
) -> tuple[EnvState, StepOutput]:
    """Advance every env one bar with ``actions`` and autoreset the envs whose episode ended.

    Args:
        config: costs, limits, action and reward modes.
        market: the panel's tables and the segment's episode bounds.
        state: the current state (not modified).
        actions: ``(N, M + 1)`` in ``[0, 1]`` (``weights``) or ``(N, M)`` in ``[-1, 1]``
            (``share_delta``); values outside are clamped.
        settle_fn: :func:`settle` with ``config`` bound (e.g. compiled); ``None``: the eager one.

    Returns:
        The next state and the step's :class:`StepOutput`.
    """
    stepped, output, holdings_usd = _trade(config, market, state, actions, settle_fn)
    done = output.truncated
    how = episode_start(config)
    new_state = restart_where(market, stepped, done, how)
    if how.invested:  # a restarted env observes its new book at its start bar's close
        start_close = market.bars[:, CLOSE_ROW].index_select(0, new_state.t)
        holdings_usd = torch.where(done.unsqueeze(1), new_state.shares * start_close, holdings_usd)
    else:
        holdings_usd = torch.where(done.unsqueeze(1), 0.0, holdings_usd)
    obs = fill_observation(
        template_rows(market.obs_template, new_state.t),
        holdings_usd=holdings_usd,
        cash_usd=new_state.cash_usd,
        equity_usd=new_state.equity_usd,
    )
    return new_state, output._replace(obs=obs)


def hold(
    market: Market, cash_usd: torch.Tensor, shares: torch.Tensor, first_bar: int, stop_bar: int
) -> dict[str, torch.Tensor]:
    """The accounts that steps with no orders give on bars ``first_bar .. stop_bar - 1``, at once.

    Holding sends no order, so cash and shares stay as they are (no fill, no cost) and only the
    valuation moves: equity at each bar's close is ``cash + sum(shares x close)``, the arithmetic of
    :func:`settle`, batched over the bars instead of stepped (a buy-and-hold baseline's ``K``
    steps become a few ops; ``tests/env`` checks it equals the stepped hold bit for bit). Episode
    ends and rewards are not considered.

    Args:
        market: the panel's tables.
        cash_usd: float64 ``(N,)`` cash of ``N`` accounts after their last trade.
        shares: float64 ``(N, M)`` their holdings.
        first_bar: the first bar held through (the bar after the last trade's).
        stop_bar: one past the last bar to value (``>= first_bar``).

    Returns:
        With ``K = stop_bar - first_bar`` rows: ``equity_usd``, ``cash_usd``, ``cost_usd`` (0),
        ``traded_usd`` (0) float64 ``(K, N)``, ``shares`` float64 ``(K, N, M)`` and ``bar_index``
        int64 ``(K, N)``, as :class:`StepOutput` names them.
    """
    bars = torch.arange(first_bar, stop_bar, dtype=torch.int64, device=cash_usd.device)
    close = market.bars[first_bar:stop_bar, CLOSE_ROW].to(MONEY_DTYPE)
    count, num_envs = bars.shape[0], cash_usd.shape[0]
    holdings_usd = shares.unsqueeze(0) * close.unsqueeze(1)
    zeros = torch.zeros((count, num_envs), dtype=MONEY_DTYPE, device=cash_usd.device)
    return {
        "equity_usd": cash_usd.unsqueeze(0) + holdings_usd.sum(dim=2),
        "cash_usd": cash_usd.expand(count, num_envs),
        "shares": shares.expand(count, *shares.shape),
        "cost_usd": zeros,
        "traded_usd": zeros,
        "bar_index": bars.unsqueeze(1).expand(count, num_envs),
    }
