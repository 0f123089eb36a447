"""Action distributions of the policies, batched over ``B`` rows with ``A`` action dimensions.

Every distribution draws a *raw* action (what PPO's probability ratio is computed on) and maps it to
a *unit* action in ``[0, 1]^A`` with :meth:`squash`, which the agent scales to the env's box.

* :class:`BetaPolicyDistribution`: independent Betas on the unit interval (raw = unit). Each action
  dimension is its own bounded number; a weights env then normalises them.
* :class:`LogisticNormalDistribution`: Gaussian scores ``z ~ N(loc, std^2)``, unit action
  ``softmax(z)``: a point of the simplex, so the actions are portfolio-style weights that sum to 1.
  Chosen over a Dirichlet for cross-sectional policies because its location (which entities get the
  weight) and its spread (how much it explores) are separate parameters, while a Dirichlet's
  concentration sets both; its log-density and entropy are a Gaussian's (no lgamma/digamma). The
  ratio is computed on the scores ``z``: the softmax is a fixed map of the action, part of the env
  from PPO's point of view, so adding a constant to every score changes nothing the env sees.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch

UNIT_SAMPLE_MARGIN = 1e-6
"""Unit-interval samples are clamped to ``[margin, 1 - margin]`` before ``log`` so a float32 sample
that rounded to exactly 0 or 1 keeps a finite log-probability."""
_HALF_LOG_TWO_PI_E = 0.5 * math.log(2.0 * math.pi * math.e)
_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


def to_action_range(unit_actions: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Unit actions ``(B, A)`` in ``[0, 1]`` scaled to the env's box ``[low, high]``."""
    if low == 0.0 and high == 1.0:  # the same numbers, two ops fewer
        return unit_actions
    return low + (high - low) * unit_actions


class PolicyDistribution(Protocol):
    """What PPO needs of an action distribution (``B`` rows, ``A`` action dimensions)."""

    def sample(self, generator: torch.Generator) -> torch.Tensor:
        """Raw actions ``(B, A)`` drawn from ``generator`` (no gradient)."""
        ...

    def mode(self) -> torch.Tensor:
        """The deterministic raw action ``(B, A)``."""
        ...

    def squash(self, raw: torch.Tensor) -> torch.Tensor:
        """Unit actions ``(B, A)`` in ``[0, 1]`` for raw actions ``(B, A)``."""
        ...

    def log_prob(self, raw: torch.Tensor) -> torch.Tensor:
        """Joint log-density ``(B,)`` of raw actions ``(B, A)`` (nats)."""
        ...

    def log_prob_components(self, raw: torch.Tensor) -> torch.Tensor:
        """Each action dimension's own log-density ``(B, A)`` (they sum to :meth:`log_prob`)."""
        ...

    def entropy(self) -> torch.Tensor:
        """Joint differential entropy ``(B,)`` of the raw action (nats)."""
        ...


class BetaPolicyDistribution:
    """Independent Beta distributions over ``A`` unit-interval action dimensions, batched over ``B``.

    Args:
        alpha: ``(B, A)`` first concentration, > 1.
        beta: ``(B, A)`` second concentration, > 1.
    """

    def __init__(self, alpha: torch.Tensor, beta: torch.Tensor) -> None:
        self.alpha = alpha
        self.beta = beta

    def sample(self, generator: torch.Generator) -> torch.Tensor:
        """Draw unit-interval actions ``(B, A)`` from ``generator`` (no gradient).

        A Beta(a, b) draw is the first coordinate of a Dirichlet(a, b) draw; torch's Dirichlet
        sampler is the one ``torch.distributions.Beta`` uses, called here with an explicit
        generator so that each agent owns its randomness.
        """
        concentration = torch.stack((self.alpha.detach(), self.beta.detach()), dim=-1)
        return torch._sample_dirichlet(concentration, generator=generator)[..., 0]

    def mode(self) -> torch.Tensor:
        """The deterministic action: the mean (see :meth:`mean`)."""
        return self.mean()

    def squash(self, raw: torch.Tensor) -> torch.Tensor:
        """Identity: a Beta draw already lies on the unit interval."""
        return raw

    def mean(self) -> torch.Tensor:
        """The distribution's mean ``(B, A)`` on the unit interval: ``alpha / (alpha + beta)``."""
        return self.alpha / (self.alpha + self.beta)

    def log_prob(self, unit_actions: torch.Tensor) -> torch.Tensor:
        """Joint log-density ``(B,)`` of unit-interval actions ``(B, A)`` (nats)."""
        return self.log_prob_components(unit_actions).sum(dim=-1)

    def log_prob_components(self, unit_actions: torch.Tensor) -> torch.Tensor:
        """Each dimension's own log-density ``(B, A)`` (nats; they sum to :meth:`log_prob`)."""
        u = unit_actions.clamp(UNIT_SAMPLE_MARGIN, 1.0 - UNIT_SAMPLE_MARGIN)
        a, b = self.alpha, self.beta
        log_norm = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
        return (a - 1.0) * torch.log(u) + (b - 1.0) * torch.log1p(-u) - log_norm

    def entropy(self) -> torch.Tensor:
        """Joint differential entropy ``(B,)`` on the unit interval (nats)."""
        a, b = self.alpha, self.beta
        log_norm = torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)
        per_dim = (
            log_norm
            - (a - 1.0) * torch.digamma(a)
            - (b - 1.0) * torch.digamma(b)
            + (a + b - 2.0) * torch.digamma(a + b)
        )
        return per_dim.sum(dim=-1)


class LogisticNormalDistribution:
    """Gaussian scores ``(B, A)`` whose softmax is the unit action (weights summing to 1).

    Args:
        loc: ``(B, A)`` score means.
        log_std: ``(A,)`` or ``(B, A)`` log standard deviations of the scores.
    """

    def __init__(self, loc: torch.Tensor, log_std: torch.Tensor) -> None:
        self.loc = loc
        self.log_std = log_std.expand_as(loc)

    def sample(self, generator: torch.Generator) -> torch.Tensor:
        """Scores ``loc + std * eps`` with ``eps ~ N(0, 1)`` from ``generator`` (no gradient)."""
        noise = torch.randn(self.loc.shape, generator=generator, device=self.loc.device, dtype=self.loc.dtype)
        return (self.loc + self.log_std.exp() * noise).detach()

    def mode(self) -> torch.Tensor:
        """The score means ``loc``."""
        return self.loc

    def squash(self, raw: torch.Tensor) -> torch.Tensor:
        """``softmax(raw)`` over the last axis: weights in ``[0, 1]`` summing to 1."""
        return torch.softmax(raw, dim=-1)

    def log_prob(self, raw: torch.Tensor) -> torch.Tensor:
        """Joint Gaussian log-density ``(B,)`` of scores ``(B, A)`` (nats)."""
        return self.log_prob_components(raw).sum(dim=-1)

    def log_prob_components(self, raw: torch.Tensor) -> torch.Tensor:
        """Each score's own Gaussian log-density ``(B, A)`` (nats; they sum to :meth:`log_prob`)."""
        z = (raw - self.loc) * torch.exp(-self.log_std)
        return -0.5 * z.square() - self.log_std - _HALF_LOG_TWO_PI

    def entropy(self) -> torch.Tensor:
        """Joint Gaussian entropy ``(B,)`` of the scores (nats)."""
        return (self.log_std + _HALF_LOG_TWO_PI_E).sum(dim=-1)
