"""Per-entity advantages for a cross-sectional policy whose reward is linear in its entity actions.

Shapes: ``B`` rows (``T * N`` transitions, or ``(P, b)`` for a population), ``M`` entities, ``K``
global action dimensions, ``A = K + M``.

With one scalar advantage per transition, PPO credits every entity's score with the whole reward,
so the noise of the other ``M - 1`` entities' draws drowns each entity's own effect: the gradient's
signal-to-noise ratio falls like ``1 / sqrt(M)``. Many envs know more. When the part of the reward
that the entity actions move is linear in them,
``reward = sum_i u_i * outcome_i - sum_i cost_i + (terms no entity action moves)``
(``u`` the unit action's entity part), an env can report ``outcome`` and ``cost`` per entity in its
step ``info`` (:data:`ENTITY_OUTCOMES`, :data:`ENTITY_COSTS`, both ``(N, M)``; the outcomes must not
depend on the actions). A smooth concave reward (one with a risk penalty) works to first order: the
env reports the reward's slopes at the step's own action, which then depend on it a little (the
error is of second order in the exploration). Then entity ``i``'s own effect this step is

    ``term_i = (u_i - mode_i) * (outcome_i - mode . outcome) - cost_i``

where ``mode`` is the unit action of the distribution's mode (``mode . outcome`` over the entities:
what the mode's portfolio earned, the globals' outcome taken as 0, e.g. cash). Subtracting
``mode_i * outcome_i`` is a baseline that depends on the realised outcome but not on the draw, so
it leaves the gradient's expectation unchanged and removes the variance of what the mean action
earned; the other entities' draws are left out entirely (factored policy gradients, Spooner et al.
2021, with the action-independent baseline of Gu et al.'s Q-Prop taken exactly from the linear
reward). Centring the outcome on ``mode . outcome`` follows the softmax: raising score ``i`` moves
weight to entity ``i`` from the whole portfolio, so its gradient is ``m_i (outcome_i - m .
outcome)``, and the term's score-function estimate is that gradient's own-draw part, ``m_i (1 -
m_i) (outcome_i - m . outcome)`` (``tests/engine/test_entity_advantage.py``). Uncentred, it was
``m_i (1 - m_i) outcome_i``: whenever the portfolio earned (a rising market, a learned edge) every
score was pushed up in proportion to its weight, so the heaviest grew heaviest: on the skill
bench's daily100 case the picked policies held one stock (effective number of names 1.1, against
the ridge baseline's 25) with score stds that had grown to 5-15.

``PPOConfig.advantages = "entity"`` uses these terms: each entity score gets its own clipped PPO
ratio and advantage ``term_i + future`` (``future``: the GAE advantage beyond the step's own reward,
the same for all entities; 0 when ``gamma = 0``); the ``K`` global scores keep the joint advantage.
Measured on the skill bench's daily100 reversal case (BENCHMARKS.md "Entity advantages"): the same
validation score in about a third of the env steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Protocol

import torch

from podracer.ppo_config import AgentError

ENTITY_OUTCOMES: Final[str] = "entity_outcomes"
"""Step-info key: ``(N, M)`` reward per unit of each entity's unit action this step (action-free)."""
ENTITY_COSTS: Final[str] = "entity_costs"
"""Step-info key: ``(N, M)`` reward each entity's trade cost this step (optional; 0 if absent)."""


class _Squashing(Protocol):
    def squash(self, raw: torch.Tensor) -> torch.Tensor: ...

    def mode(self) -> torch.Tensor: ...


def entity_terms(
    dist: _Squashing, raw: torch.Tensor, info: Mapping[str, Any], action_globals: int
) -> torch.Tensor:
    """``(..., M)`` entity terms ``(u_i - mode_i) * outcome_i - cost_i`` of one step.

    Args:
        dist: the step's action distribution (its ``squash`` maps raw actions to unit actions).
        raw: ``(..., A)`` raw actions drawn.
        info: the env step's info, with :data:`ENTITY_OUTCOMES` and optionally :data:`ENTITY_COSTS`
            as ``(N, M)`` with ``N`` the product of ``raw``'s leading dimensions.
        action_globals: ``K``.

    Raises:
        AgentError: the env does not report entity outcomes.
    """
    outcomes = info.get(ENTITY_OUTCOMES)
    if outcomes is None:
        raise AgentError(
            f"advantages = 'entity' needs an env whose step info has {ENTITY_OUTCOMES!r} (N, M); "
            "fix: use advantages = 'joint' with this env, or report the per-entity outcomes"
        )
    unit = dist.squash(raw)[..., action_globals:]
    mode = dist.squash(dist.mode())[..., action_globals:]
    outcomes = outcomes.to(unit.dtype).view_as(unit)
    mode_outcome = (mode * outcomes).sum(dim=-1, keepdim=True)
    terms = (unit - mode) * (outcomes - mode_outcome)
    costs = info.get(ENTITY_COSTS)
    return terms if costs is None else terms - costs.to(unit.dtype).view_as(unit)


def with_future(
    terms: torch.Tensor, advantages: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor
) -> torch.Tensor:
    """``(T, N, M)`` entity advantages: each step's terms plus the GAE advantage beyond its own reward.

    Args:
        terms: ``(T, N, M)`` from :func:`entity_terms`.
        advantages: ``(T, N)`` GAE advantages.
        rewards: ``(T, N)`` the rewards GAE used (bootstrapped on truncation).
        values: ``(T, N)`` the critic's values.
    """
    return terms + (advantages - (rewards - values)).unsqueeze(-1)


def _bound(bound: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A clip bound as a tensor that broadcasts against ``like`` (``(P, 1)`` gets trailing axes)."""
    tensor = torch.as_tensor(bound, dtype=like.dtype, device=like.device)
    return tensor.reshape(*tensor.shape, *([1] * (like.dim() - tensor.dim()))) if tensor.dim() else tensor


def entity_policy_loss(
    log_prob_components: torch.Tensor,
    old_entity_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    entity_advantages: torch.Tensor,
    joint_advantages: torch.Tensor,
    low: float | torch.Tensor,
    high: float | torch.Tensor,
    action_globals: int,
    normalize: bool,
) -> torch.Tensor:
    """Clipped-PPO policy loss ``(...)`` with a ratio and an advantage per entity score.

    Args:
        log_prob_components: ``(..., B, A)`` the current policy's per-score log-densities.
        old_entity_log_probs: ``(..., B, M)`` the rollout policy's, entity scores only.
        old_log_probs: ``(..., B)`` the rollout policy's joint log-densities.
        entity_advantages: ``(..., B, M)`` from :func:`with_future`.
        joint_advantages: ``(..., B)`` the (already normalised) joint advantages, for the globals.
        low: lower ratio clip ``1 - epsilon`` (a float, or ``(P, 1)`` per pod).
        high: upper ratio clip ``1 + epsilon``.
        action_globals: ``K``.
        normalize: standardise the entity advantages over the minibatch's ``B x M`` values.

    Returns:
        The entity part (mean over rows of the per-entity clipped objectives, summed over entities
        and divided by ``sqrt(M)``) plus, with ``K > 0``, the globals' clipped loss on the joint
        advantage.
    """
    k = action_globals
    adv = entity_advantages
    if normalize:
        mean = adv.mean(dim=(-2, -1), keepdim=True)
        adv = (adv - mean) / (adv.std(dim=(-2, -1), keepdim=True) + 1e-8)
    ratio = (log_prob_components[..., k:] - old_entity_log_probs).exp()
    low_e, high_e = _bound(low, ratio), _bound(high, ratio)
    per_entity = torch.max(-adv * ratio, -adv * ratio.clamp(low_e, high_e)).mean(dim=-2)
    loss = per_entity.sum(dim=-1) / math.sqrt(ratio.shape[-1])
    if k > 0:
        old_globals = old_log_probs - old_entity_log_probs.sum(dim=-1)
        ratio_g = (log_prob_components[..., :k].sum(dim=-1) - old_globals).exp()
        low_g, high_g = _bound(low, ratio_g), _bound(high, ratio_g)
        loss = loss + torch.max(
            -joint_advantages * ratio_g, -joint_advantages * ratio_g.clamp(low_g, high_g)
        ).mean(dim=-1)
    return loss


__all__ = ["ENTITY_COSTS", "ENTITY_OUTCOMES", "entity_policy_loss", "entity_terms", "with_future"]
