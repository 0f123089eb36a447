"""An auxiliary forecast loss: the actor's shared entity encoder also learns to predict each entity's outcome.

Shapes: ``B`` rows (transitions, or ``(P, b)`` for a population), ``M`` entities.

With per-entity advantages the env reports each entity's ``outcome`` (the reward per unit of its unit
action, :data:`podracer.entity_advantage.ENTITY_OUTCOMES`). The policy loss learns from them through
the actions; this loss learns from them directly: a linear head on the actor encoder's per-entity
output regresses the outcome, demeaned across the row's entities (only the differences between
entities move a cross-sectional policy) and in units of the minibatch's standard deviation of
those differences, so the weight means the same at any reward scale. Each row gives ``M`` targets,
so the encoder gets a well-conditioned, low-variance gradient towards features that predict the
outcomes (the auxiliary-task idea of UNREAL, Jaderberg et al. 2017, with the env's own
per-entity outcomes as the task); the actor head then reads them. ``forecast_coef`` weighs it
against the policy loss.
"""

from __future__ import annotations

import torch


def forecast_loss(forecast: torch.Tensor, outcomes: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the row-demeaned ``forecast`` against the row-demeaned, standardised
    ``outcomes`` (a forecast's level common to the row's entities is free: it moves no
    cross-sectional policy).

    Args:
        forecast: ``(..., B, M)`` the forecast head's outputs (differentiable).
        outcomes: ``(..., B, M)`` the env's per-entity outcomes.

    Returns:
        ``(...)`` one loss per leading batch (e.g. per pod); 0 for a batch whose outcomes do not
        differ across entities (no target to learn).
    """
    relative = outcomes - outcomes.mean(dim=-1, keepdim=True)
    spread = relative.square().mean(dim=(-2, -1), keepdim=True).sqrt()
    defined = spread > torch.finfo(spread.dtype).tiny
    target = relative / torch.where(defined, spread, torch.ones_like(spread))
    error = (forecast - forecast.mean(dim=-1, keepdim=True) - target).square() * defined
    return error.mean(dim=(-2, -1))


__all__ = ["forecast_loss"]
