"""Observations made of entities, and the cross-sectional actor-critic that treats them alike.

Shapes: ``B`` rows, ``M`` entities, ``F`` features per entity, ``E`` per-entity extras, ``G`` globals,
``K`` global action dimensions, ``H`` hidden width.

An :class:`EntityLayout` describes a flat observation row of size ``D = M * F + E * M + G``:
``[entity_1's F features, entity_2's F features, ..., extra_1 of entities 1..M, ..., extra_E of
entities 1..M, G globals]``, and a flat action of size ``A = K + M``: ``[K global actions, one action
per entity]``. The engine knows nothing of what the entities are.

:class:`CrossSectionalActorCritic` (``policy = "cross_sectional"``):

* one shared **encoder** (the same weights for every entity) maps each entity's
  ``[F features, E extras, G globals]`` to an ``H``-vector;
* **pooled context**: the mean of the encodings over entities, concatenated to each entity's own;
* the **actor** turns each ``[own, context]`` into one score per entity (shared head) and
  ``[context, globals]`` into ``K`` global scores; the action distribution is logistic-normal
  (:class:`podracer.distributions.LogisticNormalDistribution`: Gaussian scores, softmax = weights),
  with one learned log-std for the entity scores and one per global score;
* the **critic** has its own encoder, pools it the same way and maps ``[context, globals]`` to a value;
  or (``critic_features = "actor"``) its head reads the actor's pooled context with the actor's
  gradient stopped: the value loss trains the head only and the actor learns as with its own critic,
  while a round skips a second encoder's forward and backward passes over every entity (about a
  third of the work at ``M = 100``, 64 x 64). Its values are a baseline for the global scores and
  the GAE beyond a step's own reward (0 at ``gamma = 0``).

Permuting the entities permutes the entity scores and leaves the global scores and the value
unchanged; the parameter count does not depend on ``M``, and one network runs on any ``M``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from podracer.distributions import LogisticNormalDistribution
from podracer.errors import PodracerError
from podracer.networks import (
    ACTOR_HEAD_INIT_GAIN,
    CRITIC_HEAD_INIT_GAIN,
    Activation,
    mlp,
    mlp_body,
)

INITIAL_SCORE_STD = 0.5
"""Initial standard deviation of every Gaussian score (exploration around the initial weights)."""
MAX_SCORE_STD = 2.0
"""The most a Gaussian score's standard deviation may grow to (its parameter is clamped there). At 2,
a softmax over 100 scores already draws about two entities at random on every step; far above it
the draws carry no signal about the scores' locations (the location's gradient shrinks like
``1 / std``), and a pod can drift there and stay: seen on the skill bench's daily100 cases (stds of
5 to 6e5 with near one-stock portfolios, which then won selection by luck on the validation year)."""


class LayoutError(PodracerError, ValueError):
    """An entity layout that does not describe the observation or action it is used with."""


@dataclass(frozen=True)
class EntityLayout:
    """How a flat observation row and action split into entities and globals.

    Attributes:
        num_entities: ``M``.
        entity_features: ``F``, features per entity, entity-major at the start of the row.
        entity_extras: ``E``, blocks of ``M`` per-entity values after the features (entity order).
        num_globals: ``G``, trailing columns shared by all entities.
        action_globals: ``K``, action dimensions before the ``M`` per-entity ones.
    """

    num_entities: int
    entity_features: int
    entity_extras: int
    num_globals: int
    action_globals: int

    def __post_init__(self) -> None:
        """Reject negative counts (and no entity or no per-entity input at all)."""
        counts = asdict(self)
        bad = {name: value for name, value in counts.items() if int(value) < 0}
        if bad or self.num_entities < 1 or self.entity_features + self.entity_extras < 1:
            raise LayoutError(
                f"entity layout {counts}: counts must be >= 0, with >= 1 entity and >= 1 per-entity input"
            )

    @property
    def obs_dim(self) -> int:
        """``D = M * F + E * M + G``."""
        return self.num_entities * (self.entity_features + self.entity_extras) + self.num_globals

    @property
    def feature_columns(self) -> int:
        """``M * F``: the entity features at the start of a row (before the extras and globals)."""
        return self.num_entities * self.entity_features

    @property
    def action_dim(self) -> int:
        """``A = K + M``."""
        return self.action_globals + self.num_entities

    @property
    def entity_width(self) -> int:
        """Inputs of the shared encoder per entity: ``F + E + G``."""
        return self.entity_features + self.entity_extras + self.num_globals

    def split(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(entities (B, M, F + E), globals (B, G))`` of observations ``(B, D)``."""
        m, f, e = self.num_entities, self.entity_features, self.entity_extras
        features = obs[:, : m * f].reshape(-1, m, f)
        extras = obs[:, m * f : m * (f + e)].reshape(obs.shape[0], e, m).transpose(1, 2)
        return torch.cat([features, extras], dim=2), obs[:, m * (f + e) :]

    def tie_statistics(self, mean: torch.Tensor, var: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-column statistics ``(D,)`` pooled over entities, so every entity is normalised alike.

        A per-entity column's mean becomes the mean over entities; its variance the pooled variance
        ``mean(var + mean^2) - pooled_mean^2``; global columns are unchanged.
        """
        m, f, e = self.num_entities, self.entity_features, self.entity_extras
        out_mean, out_var = mean.clone(), var.clone()
        blocks = [(slice(0, m * f), (m, f), 0), (slice(m * f, m * (f + e)), (e, m), 1)]
        for columns, shape, axis in blocks:
            mu, second = mean[columns].view(shape), (var[columns] + mean[columns].square()).view(shape)
            pooled = mu.mean(dim=axis, keepdim=True)
            pooled_var = (second.mean(dim=axis, keepdim=True) - pooled.square()).clamp_min(0.0)
            out_mean[columns] = pooled.expand(shape).reshape(-1)
            out_var[columns] = pooled_var.expand(shape).reshape(-1)
        return out_mean, out_var

    def to_dict(self) -> dict[str, int]:
        """Plain-Python form for snapshots."""
        return {name: int(value) for name, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> EntityLayout:
        """Inverse of :meth:`to_dict`."""
        return cls(**{name: int(value) for name, value in values.items()})


def _first_linear(network: nn.Sequential) -> nn.Linear:
    """The first layer of a network built by :func:`podracer.networks.mlp` or ``mlp_body``."""
    first = network[0]
    if not isinstance(first, nn.Linear):
        raise TypeError(f"expected a network that starts with nn.Linear, got {type(first).__name__}")
    return first


def _after_first(network: nn.Sequential, hidden: torch.Tensor) -> torch.Tensor:
    """``network[1:](hidden)`` without building a new ``nn.Sequential`` on every call (interpreter
    time that pod threads take turns holding)."""
    for index, layer in enumerate(network):
        if index:
            hidden = layer(hidden)
    return hidden


def _forecast_head(width: int, generator: torch.Generator) -> nn.Sequential:
    """``(..., H) -> (..., 1)``, linear and without a bias: the forecast loss ignores a forecast's
    level common to the row's entities, so a bias would get no gradient but float noise, which Adam
    turns into steps of the full learning rate."""
    layer = nn.Linear(width, 1, bias=False)
    nn.init.orthogonal_(layer.weight, gain=1.0, generator=generator)
    return nn.Sequential(layer)


class CrossSectionalActorCritic(nn.Module):
    """Shared per-entity encoders, mean-pooled context, logistic-normal actor and pooled critic.

    Args:
        layout: the observation and action layout.
        hidden_sizes: encoder widths (its last one is ``H``, also the width of the heads' hidden layer).
        activation: hidden-layer nonlinearity.
        seed: seeds the initial weights (drawn on the CPU, so identical on every device).
        critic_features: ``own`` (the critic's own encoder) or ``actor`` (the actor's pooled
            context, gradient stopped; no critic encoder).
        forecast_head: add a linear head on the actor's per-entity encodings for the auxiliary
            forecast loss (:mod:`podracer.forecast`; ``forecast_coef > 0``), drawn after every
            other weight so the rest of the initialisation does not depend on it.
    """

    def __init__(
        self,
        layout: EntityLayout,
        hidden_sizes: tuple[int, ...],
        activation: Activation,
        seed: int,
        critic_features: str = "own",
        forecast_head: bool = False,
    ) -> None:
        super().__init__()
        self.layout = layout
        self.obs_dim = layout.obs_dim
        self.action_dim = layout.action_dim
        width = hidden_sizes[-1]
        globals_, k = layout.num_globals, layout.action_globals
        generator = torch.Generator().manual_seed(seed)
        self.actor_encoder = mlp_body(layout.entity_width, hidden_sizes, activation, generator)
        self.entity_head = mlp(2 * width, (width,), 1, activation, ACTOR_HEAD_INIT_GAIN, generator)
        self.global_head = (
            mlp(width + globals_, (width,), k, activation, ACTOR_HEAD_INIT_GAIN, generator) if k > 0 else None
        )
        if critic_features not in ("own", "actor"):
            raise LayoutError(f"critic_features must be 'own' or 'actor', got {critic_features!r}")
        self.critic_features = critic_features
        self.critic_encoder = (
            mlp_body(layout.entity_width, hidden_sizes, activation, generator)
            if critic_features == "own"
            else None
        )
        self.critic_head = mlp(width + globals_, (width,), 1, activation, CRITIC_HEAD_INIT_GAIN, generator)
        self.log_std = nn.Parameter(torch.full((1 + k,), math.log(INITIAL_SCORE_STD)))
        self.forecast_head = _forecast_head(width, generator) if forecast_head else None

    def _encode(
        self, encoder: nn.Sequential, obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(encodings (B, M, H), context (B, H), globals (B, G))``.

        The encoder's first layer is applied by input block, ``x W = features W_f + extras W_e +
        globals W_g``, with the globals' part computed once per row instead of once per entity and
        no concatenated ``(B, M, F + E + G)`` input (the same function as the layer on the
        concatenation, summed in another order).
        """
        layout = self.layout
        m, f, e = layout.num_entities, layout.entity_features, layout.entity_extras
        first = _first_linear(encoder)
        w_features, w_extras, w_globals = torch.split(first.weight, [f, e, layout.num_globals], dim=1)
        features = obs[:, : m * f].reshape(-1, m, f)
        globals_ = obs[:, m * (f + e) :]
        hidden = nn.functional.linear(features, w_features)
        if e > 0:
            extras = obs[:, m * f : m * (f + e)].reshape(obs.shape[0], e, m).transpose(1, 2)
            hidden += nn.functional.linear(extras, w_extras)
        hidden += nn.functional.linear(globals_, w_globals, first.bias).unsqueeze(1)
        encoded = _after_first(encoder, hidden)
        return encoded, encoded.mean(dim=1), globals_

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``(B,)`` for observations ``(B, D)``."""
        if self.critic_encoder is None:
            with torch.no_grad():
                _, context, globals_ = self._encode(self.actor_encoder, obs)
        else:
            _, context, globals_ = self._encode(self.critic_encoder, obs)
        return self._value_of(context, globals_)

    def _value_of(self, context: torch.Tensor, globals_: torch.Tensor) -> torch.Tensor:
        return self.critic_head(torch.cat([context, globals_], dim=1)).squeeze(-1)

    @property
    def value_with_policy(self) -> bool:
        """Whether the value is nearly free with the policy's call (``critic_features = "actor"``:
        the head reads the pooled context the policy computes anyway), so a rollout takes each
        step's values from :meth:`distribution_and_value` instead of encoding every row again."""
        return self.critic_encoder is None

    def distribution_and_value(self, obs: torch.Tensor) -> tuple[LogisticNormalDistribution, torch.Tensor]:
        """:meth:`distribution` and :meth:`value` of the same observations ``(B, D)``; with
        ``critic_features = "actor"`` the entities are encoded once for both."""
        if self.critic_encoder is not None:
            return self.distribution(obs), self.value(obs)
        encoded, context, globals_ = self._encode(self.actor_encoder, obs)
        return self._distribution_of(encoded, context, globals_), self._value_of(context.detach(), globals_)

    def distribution_value_and_forecast(
        self, obs: torch.Tensor
    ) -> tuple[LogisticNormalDistribution, torch.Tensor, torch.Tensor | None]:
        """:meth:`distribution_and_value` and the forecast head's per-entity outputs ``(B, M)``
        (``None`` without a forecast head) from one encoding of the entities."""
        encoded, context, globals_ = self._encode(self.actor_encoder, obs)
        dist = self._distribution_of(encoded, context, globals_)
        own_critic = self.critic_encoder is not None
        value = self.value(obs) if own_critic else self._value_of(context.detach(), globals_)
        forecast = None if self.forecast_head is None else self.forecast_head(encoded).squeeze(-1)
        return dist, value, forecast

    def distribution(self, obs: torch.Tensor) -> LogisticNormalDistribution:
        """Gaussian scores over ``[K globals, M entities]`` for observations ``(B, D)``."""
        return self._distribution_of(*self._encode(self.actor_encoder, obs))

    def _distribution_of(
        self, encoded: torch.Tensor, context: torch.Tensor, globals_: torch.Tensor
    ) -> LogisticNormalDistribution:
        entity_scores = self._entity_scores(encoded, context)
        bounded = self.log_std.clamp(max=math.log(MAX_SCORE_STD))
        log_std = torch.cat([bounded[1:], bounded[:1].expand(self.layout.num_entities)])
        if self.global_head is None:
            return LogisticNormalDistribution(entity_scores, log_std)
        global_scores = self.global_head(torch.cat([context, globals_], dim=1))
        return LogisticNormalDistribution(torch.cat([global_scores, entity_scores], dim=1), log_std)

    def _entity_scores(self, encoded: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Entity scores ``(B, M)``: the entity head on ``[own (B, M, H), context (B, H)]``, its first
        layer applied by block (``own W_own + context W_context``), so the context's part is
        computed once per row instead of once per entity (the head's costliest layer, halved)."""
        first = _first_linear(self.entity_head)
        width = encoded.shape[-1]
        w_own, w_context = torch.split(first.weight, [width, width], dim=1)
        hidden = nn.functional.linear(encoded, w_own)
        hidden += nn.functional.linear(context, w_context, first.bias).unsqueeze(1)
        return _after_first(self.entity_head, hidden).squeeze(-1)

    def matmul_flops_per_row(self) -> tuple[int, int]:
        """Multiply-add FLOPs of one forward pass for one observation row (``M`` entities).

        Returns:
            ``(total, first_layers)``: encoder and entity-head layers count once per entity; the
            two encoders' first layers are ``first_layers``.
        """
        m = self.layout.num_entities

        def flops(module: nn.Module | None, times: int) -> int:
            if module is None:
                return 0
            linears = [x for x in module.modules() if isinstance(x, nn.Linear)]
            return times * sum(2 * x.in_features * x.out_features for x in linears)

        total = (
            flops(self.actor_encoder, m)
            + flops(self.critic_encoder, m)
            + flops(self.entity_head, m)
            + flops(self.global_head, 1)
            + flops(self.critic_head, 1)
            + flops(self.forecast_head, m)
        )
        firsts = [enc[0] for enc in (self.actor_encoder, self.critic_encoder) if enc is not None]
        first = sum(flops(layer, m) for layer in firsts)
        return total, first


__all__ = ["CrossSectionalActorCritic", "EntityLayout", "LayoutError"]
