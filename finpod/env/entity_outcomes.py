"""Per-asset outcomes and costs of one step, for per-entity advantages (:mod:`podracer.entity_advantage`).

Shapes: ``N`` envs, ``M`` assets. In ``weights`` mode a step's reward is, to first order, linear in
the target weights ``u``: ``reward ~ sum_i u_i * outcome_i - sum_i cost_i + (what no weight moves:
the overnight move of the held book, the equal-weight basket of ``excess_log_return``)``, with

* ``outcome_i = reward_scale * (close_i / fill_i - 1)``: the return of a unit weight of asset ``i``
  bought at the bar's fill price and held to its close (per unit of initial cash in ``pnl`` mode:
  times equity / initial cash). The market holds it as a table
  (:attr:`~finpod.env.market.Market.fill_to_close_return`), so a step only gathers it.
* ``cost_i = reward_scale * (fee_rate + half_spread) * |shares_after_i - shares_before_i| * fill_i
  / equity``: the reward the step's trade in asset ``i`` gave up (``equity`` at the previous close,
  the reward's own denominator; the initial cash in ``pnl`` mode).

With a risk penalty (``risk_penalised``, or ``excess_log_return`` with ``risk_penalty > 0``) the
reward ``b - risk_penalty x b**2`` of the step's return ``b`` is concave in the weights, and both
are the reward's derivatives at the step's own action: times ``1 - 2 x risk_penalty x b``
(:func:`~finpod.env.rewards.risk_gradient_factor`). A bet that already made the portfolio's return
far from its benchmark earns less credit for going further: the mean-variance trade-off, per asset.

The env reports both in its step ``info`` (``entity_outcomes``, ``entity_costs``, float32 ``(N, M)``);
an agent with ``advantages = "entity"`` credits each asset's score with its own term. For the
pathwise term (:mod:`podracer.pathwise`) it also reports ``entity_holdings`` (``(N, M)``: the
weights held before the trades at the fill prices, i.e. the target weights that trade nothing) and
``entity_cost_rates`` (``(N, 1)``: the reward a unit of target weight traded gives up, so that
``cost_i = rate x |u_i - holding_i|`` where no limit or band cuts the order).
"""

from __future__ import annotations

import torch

from finpod.env.config import EnvConfig
from finpod.env.market import FILL_ROW, Market
from finpod.env.rewards import has_risk_penalty, risk_gradient_factor
from finpod.env.state import MONEY_DTYPE


def entity_outcomes(
    config: EnvConfig,
    market: Market,
    equity_before_usd: torch.Tensor,
    equity_after_usd: torch.Tensor,
    cash_before_usd: torch.Tensor,
    shares_before: torch.Tensor,
    shares_after: torch.Tensor,
    bar_index: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """``{"entity_outcomes", "entity_costs", "entity_holdings"}`` float32 ``(N, M)`` and
    ``"entity_cost_rates"`` float32 ``(N, 1)`` of the step that filled on ``bar_index``.

    Two gathers of ``(N, M)`` float32 rows and one float64 pass (the traded shares, exact before
    they are rounded to float32): a small share of a step's cost (``finpod bench env``).

    Args:
        config: reward mode, scale and risk penalty, fee rate and half-spread.
        market: the env's tables.
        equity_before_usd: float64 ``(N,)`` equity at the previous close (the step's reward compares
            the new equity with it).
        equity_after_usd: float64 ``(N,)`` equity at the step's close (before any reset).
        cash_before_usd: float64 ``(N,)`` cash before the trades.
        shares_before: float64 ``(N, M)`` holdings before the trades.
        shares_after: float64 ``(N, M)`` holdings after them.
        bar_index: int64 ``(N,)`` the bar the orders filled in (the step's ``bar_index``).
    """
    scale = config.reward_scale
    outcomes = market.fill_to_close_return.index_select(0, bar_index)
    fill_price = market.bars[:, FILL_ROW].index_select(0, bar_index)
    traded_shares = torch.sub(shares_after, shares_before).abs_().to(torch.float32)
    # The weights held before the trades at the fill prices (the target weights that trade nothing),
    # and the reward a unit of weight traded gives up: the orders' targets are fractions of the
    # equity at the fill prices, the reward's denominator the previous close's.
    held_usd = shares_before * fill_price
    equity_fill_usd = held_usd.sum(dim=1).add_(cash_before_usd).clamp_min(torch.finfo(MONEY_DTYPE).tiny)
    holdings = held_usd.div_(equity_fill_usd.unsqueeze(1)).to(torch.float32)
    rate = (config.fee_rate + config.half_spread_fraction) * scale
    if config.reward == "pnl":
        costs = traded_shares.mul_(fill_price).mul_(rate / config.initial_cash_usd)
        per_unit = (equity_before_usd * (scale / config.initial_cash_usd)).to(torch.float32)
        return {
            "entity_outcomes": outcomes * per_unit.unsqueeze(1),
            "entity_costs": costs,
            "entity_holdings": holdings,
            "entity_cost_rates": (equity_fill_usd * (rate / config.initial_cash_usd))
            .to(torch.float32)
            .unsqueeze(1),
        }
    per_equity = equity_before_usd.clamp_min(torch.finfo(MONEY_DTYPE).tiny).reciprocal_()
    per_usd = (per_equity * rate).to(torch.float32)
    costs = traded_shares.mul_(fill_price).mul_(per_usd.unsqueeze(1))
    cost_rates = (equity_fill_usd * per_equity).mul_(rate).to(torch.float32).unsqueeze(1)
    if not has_risk_penalty(config):
        return {
            "entity_outcomes": outcomes.mul_(scale),
            "entity_costs": costs,
            "entity_holdings": holdings,
            "entity_cost_rates": cost_rates,
        }
    base_return = torch.log(equity_after_usd / equity_before_usd).to(torch.float32)
    if config.reward == "excess_log_return":
        base_return = base_return - market.equal_weight_log_return.index_select(0, bar_index)
    per_row = risk_gradient_factor(base_return, config).unsqueeze(1)
    return {
        "entity_outcomes": outcomes.mul_(per_row * scale),
        "entity_costs": costs.mul_(per_row),
        "entity_holdings": holdings,
        "entity_cost_rates": cost_rates.mul_(per_row),
    }
