"""Per-step rewards from the equity before and after a step (pure, batched)."""

from __future__ import annotations

import torch

from finpod.env.config import EnvConfig


def step_reward(
    equity_before_usd: torch.Tensor, equity_after_usd: torch.Tensor, config: EnvConfig
) -> torch.Tensor:
    """The reward of one step, as ``config.reward`` defines it, times ``config.reward_scale``.

    Args:
        equity_before_usd: ``(N,)`` equity at bar t's close (USD, > 0).
        equity_after_usd: ``(N,)`` equity at bar t+1's close (USD, > 0).
        config: reward mode, scale, risk penalty and initial cash.

    Returns:
        ``(N,)`` rewards in the equities' dtype: ``log_return``: ``log(E1 / E0)``; ``pnl``: ``(E1 - E0) /
        initial_cash_usd``; ``risk_penalised``: ``r - risk_penalty x r**2`` with ``r = log(E1 / E0)``;
        ``excess_log_return``: ``log(E1 / E0)`` here (the step then applies :func:`excess_reward`);
        each multiplied by ``reward_scale``.
    """
    if config.reward == "pnl":
        base = (equity_after_usd - equity_before_usd) / config.initial_cash_usd
    else:
        log_return = torch.log(equity_after_usd / equity_before_usd)
        if config.reward == "risk_penalised":
            base = log_return - config.risk_penalty * log_return.square()
        else:
            base = log_return
    return base * config.reward_scale


def excess_reward(
    scaled_log_return: torch.Tensor, equal_weight_log_return: torch.Tensor, config: EnvConfig
) -> torch.Tensor:
    """The ``excess_log_return`` reward: ``reward_scale x (x - risk_penalty x x**2)``, with ``x`` the
    step's log return minus the equal-weight basket's (a tracking-error penalty: ``risk_penalty`` is
    a risk aversion per unit of squared excess return, the same in annual and per-bar units, since
    both the mean and the variance of ``x`` add up over bars).

    Args:
        scaled_log_return: ``(N,)`` float32, ``reward_scale x log(E1 / E0)`` (:func:`step_reward`).
        equal_weight_log_return: ``(N,)`` float32, the basket's log return over the same bar.
        config: ``reward_scale`` and ``risk_penalty``.
    """
    excess = scaled_log_return - config.reward_scale * equal_weight_log_return
    if config.risk_penalty == 0.0:
        return excess
    return excess - (config.risk_penalty / config.reward_scale) * excess.square()


def has_risk_penalty(config: EnvConfig) -> bool:
    """Whether the reward is ``base - risk_penalty x base**2`` with ``risk_penalty > 0``."""
    return config.risk_penalty > 0.0 and config.reward in ("risk_penalised", "excess_log_return")


def risk_gradient_factor(base_return: torch.Tensor, config: EnvConfig) -> torch.Tensor:
    """``1 - 2 x risk_penalty x base``: how much a reward ``base - risk_penalty x base**2`` moves per
    unit of ``base`` at the step's own ``base`` ``(N,)`` (unscaled: the log return of
    ``risk_penalised``, the excess log return of ``excess_log_return``; see :func:`has_risk_penalty`)."""
    return 1.0 - (2.0 * config.risk_penalty) * base_return
