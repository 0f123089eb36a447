"""The reward's own gradient for a cross-sectional policy: a pathwise term through the mode's weights.

Shapes: ``B`` rows (transitions, or ``(P, b)`` for a population), ``M`` entities, ``K`` global
action dimensions, ``A = K + M``.

With per-entity advantages (:mod:`podracer.entity_advantage`) the env reports each entity's
``outcome`` (the reward per unit of its unit action, action-free) and its trade cost. When the part
of the reward the entity actions move is linear in them, the env has told the agent the reward's
gradient with respect to the action: exploration is not needed to learn the step's own reward, and
a score-function estimate of it (``(u_i - mode_i) x outcome_i``, one Gaussian draw per score) throws
most of that information away. This module differentiates the step's reward of the policy's
*mode* through the network instead (a deterministic, reparameterised policy gradient with a known
reward model: Silver et al. 2014, Heess et al. 2015 SVG(0); in trading, Moody and Saffell's 2001
"direct reinforcement", and Zhang, Zohren and Roberts 2020, who fit a portfolio network to the
Sharpe ratio itself). Per row, with ``m`` the mode's entity weights, ``e = 1 / M`` the uniform
portfolio, ``o`` the outcomes divided by their minibatch standard deviation ``s`` (so the learning
rate means the same at any reward scale), ``a`` the holdings that trade nothing and ``c`` the cost
per unit of trade (both from the env, :data:`ENTITY_HOLDINGS`, :data:`ENTITY_COST_RATES`):

    ``b = (m - e) . o``  (what the mode earned over the uniform portfolio)
    ``C = sum_i (c_i / s) x |m_i - a_i|``  (the trade's cost at the mode)
    ``R = C - |sum_i (c_i / s) x (m_i - a_i)|``  (the part of it that rotates the book)
    ``J = b - (risk / 2) x M x b**2 - C - (k - 1) x R``

and the loss is ``-coef x M x mean(J)``. Linear in ``m`` alone, ``J`` would pay most for putting
everything on the entity with the best predicted outcome; the realised ``b**2`` is a tracking-error
penalty that makes the optimum a tilt. With independent outcomes of unit variance the optimum is
``M x (m_i - e) = E[o_i | x] / risk``: the tilt over the uniform weight, in units of that weight,
is the predicted outcome in standard deviations over ``risk`` (Grinold and Kahn's alpha over risk
aversion). The cost term is the trade's cost at the mode (the env's band, if any, is ignored).

``k`` (``pathwise_cost``, 1 by default: the cost the env charges) is an aversion to **rotating**
the book: trades that move weight from one entity to another are charged ``k`` times their cost,
trades that change how much is invested (all buys, or all sells) their cost alone. ``k`` above 1
trains as if rotating cost more than it does, the classical guard of a forecast-driven portfolio
against trading on its forecast's noise (a policy that moves with every wiggle of its scores pays
for each move, and a fitted forecast wiggles most where it fitted noise). Only the rotation is
weighed because the term sees one step: an aversion to every trade would keep a book that starts
in cash from buying in at all (the entry pays back over many steps, its inflated cost in one).
``R >= 0`` (the triangle inequality), and ``R = 0`` for a trade whose every leg has one sign.

Only the step's own reward is differentiated: what an action changes later (holdings that save a
later trade's cost, with ``gamma > 0``) is still learned by the PPO term, which also keeps training
the scores' spread. Both act on the same network, ``pathwise_coef`` weighing this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import torch

from podracer.entity_advantage import ENTITY_OUTCOMES
from podracer.ppo_config import AgentError
from podracer.rollout import Rollout

ENTITY_HOLDINGS: Final[str] = "entity_holdings"
"""Step-info key: ``(N, M)`` each entity's unit action that trades nothing this step (the holdings
before the step's trades, in the action's units)."""
ENTITY_COST_RATES: Final[str] = "entity_cost_rates"
"""Step-info key: ``(N, M)``, or ``(N, 1)`` for one rate per env, reward lost per unit of
``|u_i - holding_i|`` traded this step."""


def store_step_inputs(
    info: Mapping[str, Any], outcomes: torch.Tensor, holdings: torch.Tensor, cost_rates: torch.Tensor
) -> None:
    """Copy a step's outcomes, holdings and cost rates from its ``info`` into ``(N, M)`` buffer rows
    (the env may report the cost rates as ``(N, 1)``).

    Raises:
        AgentError: the env does not report them.
    """
    reported = [info.get(key) for key in (ENTITY_OUTCOMES, ENTITY_HOLDINGS, ENTITY_COST_RATES)]
    if not all(isinstance(value, torch.Tensor) for value in reported):
        raise AgentError(
            f"pathwise_coef > 0 (or forecast_coef > 0) needs an env whose step info has {ENTITY_OUTCOMES!r}, "
            f"{ENTITY_HOLDINGS!r} and {ENTITY_COST_RATES!r} (N, M; the rates may be N, 1); fix: set "
            "pathwise_coef = 0 and forecast_coef = 0 with this env, or report them"
        )
    for destination, value in zip((outcomes, holdings, cost_rates), reported, strict=True):
        assert isinstance(value, torch.Tensor)
        destination.copy_(value.reshape(destination.shape[0], -1).expand_as(destination))


def store_pathwise_inputs(buf: Rollout, t: int, info: Mapping[str, Any]) -> None:
    """Keep step ``t``'s pathwise inputs in ``buf`` (a no-op for a buffer without them)."""
    if buf.entity_outcomes is None or buf.entity_holdings is None or buf.entity_cost_rates is None:
        return
    store_step_inputs(info, buf.entity_outcomes[t], buf.entity_holdings[t], buf.entity_cost_rates[t])


def pathwise_loss(
    mode_unit: torch.Tensor,
    outcomes: torch.Tensor,
    holdings: torch.Tensor,
    cost_rates: torch.Tensor,
    action_globals: int,
    risk: float | torch.Tensor,
    cost_aversion: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """``-M x mean(J)`` over the rows (``(...)``: one loss per leading batch, e.g. per pod).

    Args:
        mode_unit: ``(..., B, A)`` the mode's unit action (differentiable: the weights to train).
        outcomes: ``(..., B, M)`` the env's per-entity outcomes (reward per unit action).
        holdings: ``(..., B, M)`` the unit actions that trade nothing.
        cost_rates: ``(..., B, M)`` reward lost per unit traded.
        action_globals: ``K``.
        risk: the tracking-error aversion (a float, or ``(P,)`` per pod).
        cost_aversion: ``k``, the weight of the cost of rotating the book (a float, or ``(P,)``
            per pod; 1: every trade at its cost).

    A batch whose outcomes do not vary (all 0: e.g. orders filled at the close they are scored at)
    has no scale and no outcome to learn from; its term is 0, not its costs over a zero spread.
    """
    weights = mode_unit[..., action_globals:]
    entities = weights.shape[-1]
    spread = outcomes.std(dim=(-2, -1), keepdim=True)
    defined = spread > torch.finfo(spread.dtype).tiny
    scale = torch.where(defined, spread, torch.ones_like(spread))
    excess = ((weights - 1.0 / entities) * outcomes).sum(dim=-1, keepdim=True) / scale
    risk_t = _per_row(risk, excess)
    trade_costs = (weights - holdings) * cost_rates
    costs = trade_costs.abs().sum(dim=-1, keepdim=True) / scale
    objective = excess - 0.5 * entities * risk_t * excess.square() - costs
    if isinstance(cost_aversion, torch.Tensor) or cost_aversion != 1.0:
        rotation = costs - trade_costs.sum(dim=-1, keepdim=True).abs() / scale
        objective = objective - (_per_row(cost_aversion, excess) - 1.0) * rotation
    objective = objective * defined
    return -entities * objective.squeeze(-1).mean(dim=-1)


def _per_row(value: float | torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """A float, or a ``(P,)`` per-pod value, shaped to broadcast against ``rows`` ``(P, B, 1)``."""
    value_t = torch.as_tensor(value, dtype=rows.dtype, device=rows.device)
    if value_t.dim():
        value_t = value_t.reshape(*value_t.shape, *([1] * (rows.dim() - value_t.dim())))
    return value_t


__all__ = [
    "ENTITY_COST_RATES",
    "ENTITY_HOLDINGS",
    "pathwise_loss",
    "store_pathwise_inputs",
    "store_step_inputs",
]
