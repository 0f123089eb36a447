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
        ``excess_log_return``: ``log(E1 / E0)`` here (the step subtracts the equal-weight basket's
        return, :func:`finpod.env.dynamics.step`); each multiplied by ``reward_scale``.
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
