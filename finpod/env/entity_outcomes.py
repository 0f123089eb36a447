"""Per-asset outcomes and costs of one step, for per-entity advantages (:mod:`podracer.entity_advantage`).

Shapes: ``N`` envs, ``M`` assets. In ``weights`` mode a step's reward is, to first order, linear in
the target weights ``u``: ``reward ~ sum_i u_i * outcome_i - sum_i cost_i + (what no weight moves:
the overnight move of the held book, the equal-weight basket of ``excess_log_return``)``, with

* ``outcome_i = reward_scale * (close_i / fill_i - 1)``: the return of a unit weight of asset ``i``
  bought at the bar's fill price and held to its close (per unit of initial cash in ``pnl`` mode:
  times equity / initial cash). It does not depend on the action.
* ``cost_i = reward_scale * (fee_rate + half_spread) * |shares_after_i - shares_before_i| * fill_i
  / equity``: the reward the step's trade in asset ``i`` gave up.

The env reports both in its step ``info`` (``entity_outcomes``, ``entity_costs``, float32 ``(N, M)``);
an agent with ``advantages = "entity"`` credits each asset's score with its own term.
"""

from __future__ import annotations

import torch

from finpod.env.config import EnvConfig
from finpod.env.market import CLOSE_ROW, FILL_ROW, Market
from finpod.env.state import MONEY_DTYPE


def entity_outcomes(
    config: EnvConfig,
    market: Market,
    cash_before_usd: torch.Tensor,
    shares_before: torch.Tensor,
    shares_after: torch.Tensor,
    bar_index: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """``{"entity_outcomes", "entity_costs"}`` float32 ``(N, M)`` of the step that filled on ``bar_index``.

    Args:
        config: reward mode and scale, fee rate and half-spread.
        market: the env's tables.
        cash_before_usd: float64 ``(N,)`` cash before the step's trades.
        shares_before: float64 ``(N, M)`` holdings before the trades.
        shares_after: float64 ``(N, M)`` holdings after them.
        bar_index: int64 ``(N,)`` the bar the orders filled in (the step's ``bar_index``).
    """
    bar = market.bars.index_select(0, bar_index)
    fill, close = bar[:, FILL_ROW], bar[:, CLOSE_ROW]
    held = fill > 0.0
    outcomes = torch.where(held, close / torch.where(held, fill, 1.0) - 1.0, 0.0)
    fill_usd = fill.to(MONEY_DTYPE)
    equity_usd = cash_before_usd + (shares_before * fill_usd).sum(dim=1)
    rate = config.fee_rate + config.half_spread_fraction
    traded_usd = (shares_after - shares_before).abs_().mul_(fill_usd)
    if config.reward == "pnl":
        costs = traded_usd.mul_(rate / config.initial_cash_usd)
        outcomes = outcomes * (equity_usd / config.initial_cash_usd).unsqueeze(1).to(outcomes.dtype)
    else:
        costs = traded_usd.mul_(rate).div_(equity_usd.clamp_min(torch.finfo(MONEY_DTYPE).tiny).unsqueeze(1))
    scale = config.reward_scale
    return {
        "entity_outcomes": (outcomes * scale).to(torch.float32),
        "entity_costs": (costs * scale).to(torch.float32),
    }
