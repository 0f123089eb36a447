"""Frozen deterministic policies of the flat MLP, and several of them evaluated in one pass.

An evaluation loop (a validation score, a backtest) steps one observation row per policy per bar, so
its cost is the fixed cost of many tiny ops, not arithmetic. :class:`FrozenActorPolicy` is the flat
actor-critic's deterministic policy as data (normalisation constants, the actor's transposed
weights, the action range) that :class:`StackedActors` can stack: ``G`` policies then cost one
``baddbmm`` per layer and one pass of the elementwise ops for all of them, instead of ``G`` calls of
each. Row ``g`` of the stacked pass equals policy ``g`` called alone, bit for bit (a test checks
it), on a CPU, because:

- both run each layer as a ``baddbmm`` (:class:`~podracer.networks.FrozenMLP` over a batch of one
  matrix): per matrix, its bits do not depend on the batch size, where ``addmm`` and ``baddbmm``
  differ for some shapes; the output layer is zero-padded to a multiple of
  :data:`~podracer.networks.OUTPUT_QUANTUM` outputs, since at other widths MKL rounds a batch of one
  differently from a stack on some CPUs (an AMD EPYC: width 10, every draw);
- a transcendental elementwise op (the head's softplus, a tanh or ELU layer) gives different bits in
  the vectorised loop and in its scalar tail, so every row it sees must start and end on a
  :data:`LANE_QUANTUM` boundary: the head pads its logits to one, and :meth:`StackedActors.compatible`
  stacks a tanh or ELU network only when its hidden widths are multiples of it (ReLU is exact).

On a GPU, batched products may pick other kernels by batch size: :meth:`StackedActors.compatible`
says no there (unverified), and callers fall back to one call per policy.

:func:`freeze_policy` exports a PPO agent's deterministic policy: a :class:`FrozenActorPolicy` of the
flat MLP, or a :class:`RowWisePolicy` over a copy of the cross-sectional network.

Shapes: ``G`` policies, ``D`` observation size, ``A`` action size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from podracer.entity import CrossSectionalActorCritic
from podracer.frozen_entity import FrozenCrossSectionalPolicy
from podracer.networks import ActorCritic, FrozenMLP
from podracer.normalization import RunningMeanStd
from podracer.protocols import Policy


def _rescale(
    obs: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, clip: float | torch.Tensor
) -> torch.Tensor:
    """``(obs - shift) / scale`` clipped to ``[-clip, clip]`` (``clip`` broadcasts):
    :meth:`podracer.ppo.RunningMeanStd.rescale`."""
    rows = (obs - shift) / scale
    if isinstance(clip, torch.Tensor):
        return rows.clamp_(min=-clip, max=clip)
    return rows.clamp_(-clip, clip)


LANE_QUANTUM = 64
"""Elements per chunk that every CPU vector loop covers whole (two AVX-512 float vectors, four
AVX2): a row that starts and ends on a multiple of it runs every element through the vector path."""


def _lane_padded(width: int) -> int:
    """``width`` rounded up to a multiple of :data:`LANE_QUANTUM`."""
    return -(-width // LANE_QUANTUM) * LANE_QUANTUM


def beta_mean(logits: torch.Tensor, action_dim: int) -> torch.Tensor:
    """The mean unit action ``(..., A)`` of Betas with concentrations ``1 + softplus(.)`` over the
    actor's output ``(..., 2A)`` (alpha logits first): :meth:`podracer.networks.ActorCritic.mean_action_of`.

    The softplus runs on rows zero-padded to :data:`LANE_QUANTUM`, so each row's bits are the same
    whether it is alone or one of a stack (the module docstring says why).
    """
    width = logits.shape[-1]
    padded = torch.constant_pad_nd(logits, (0, _lane_padded(width) - width))  # F.pad without the Python
    concentrations = torch.nn.functional.softplus(padded)[..., :width].add_(1.0)
    alpha, beta = concentrations.split(action_dim, dim=-1)
    return alpha / (alpha + beta)


@dataclass(frozen=True)
class FrozenActorPolicy:
    """The flat MLP's deterministic policy, frozen: ``obs (B, D) -> actions (B, A)``.

    ``actions = low + (high - low) * beta_mean(actor(clip((obs - mean) / sqrt(var + 1e-8))))``, with
    the normalisation left out when ``mean`` is None and the affine map left out for the unit range.

    Attributes:
        mean: ``(D,)`` observation mean, or None without normalisation.
        var: ``(D,)`` observation variance, or None without normalisation.
        clip: normalised observations are clipped to ``[-clip, clip]``.
        actor: the actor network's frozen copy (its output is ``(B, 2A)``).
        action_dim: ``A``.
        action_low: lower end of the action range.
        action_high: upper end of the action range.
    """

    mean: torch.Tensor | None
    var: torch.Tensor | None
    clip: float
    actor: FrozenMLP
    action_dim: int
    action_low: float
    action_high: float
    _constants: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def normalizes(self) -> bool:
        """Whether observations are standardised before the actor."""
        return self.mean is not None and self.var is not None

    def constants(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(shift, scale)`` ``(D,)`` in ``dtype``: ``(mean, sqrt(var + 1e-8))`` (cached per dtype)."""
        if self.mean is None or self.var is None:
            raise ValueError("this policy does not normalise its observations")
        if dtype not in self._constants:
            self._constants[dtype] = (self.mean.to(dtype), self.var.to(dtype).add(1e-8).sqrt())
        return self._constants[dtype]

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic actions ``(B, A)`` in ``[action_low, action_high]`` for raw observations
        ``(B, D)``."""
        rows = _rescale(obs, *self.constants(obs.dtype), self.clip) if self.normalizes else obs
        unit = beta_mean(self.actor(rows), self.action_dim)
        if self.action_low == 0.0 and self.action_high == 1.0:  # the same numbers, two ops fewer
            return unit
        return self.action_low + (self.action_high - self.action_low) * unit


@dataclass(frozen=True)
class RowWisePolicy:
    """A deterministic policy that acts on each observation row alone: no state, no statistics over
    the batch. A caller may batch rows however it likes (one bar, many envs, many bars at once);
    each row's action is the same up to float rounding of batched products.

    Attributes:
        act: observations ``(B, D)`` -> actions ``(B, A)``.
    """

    act: Callable[[torch.Tensor], torch.Tensor]

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(B, A)`` for observations ``(B, D)``."""
        return self.act(obs)


class StackedActors:
    """``G`` frozen policies of the same architecture, evaluated on one row each in one pass.

    Each layer is one ``baddbmm`` over weights stacked ``(G, in, out)``; the normalisation, head and
    action range are elementwise over ``(G, 1, .)``. A policy without normalisation gets shift 0,
    scale 1 and an infinite clip, a unit-range policy gets low 0 and high 1: both leave its numbers
    unchanged, so row ``g`` equals ``policies[g](obs[g : g + 1])`` bit for bit.

    Args:
        policies: at least one policy; all with the same layer shapes, activations and action size.

    Raises:
        ValueError: the policies do not share one architecture (see :meth:`compatible`).
    """

    def __init__(self, policies: Sequence[FrozenActorPolicy]) -> None:
        if not policies or not self.compatible(policies):
            raise ValueError("StackedActors needs one or more FrozenActorPolicy of one architecture")
        first = policies[0]
        self.count = len(policies)
        self.action_dim = first.action_dim
        weight = first.actor.layers[0][0]
        dim, dtype, device = weight.shape[0], weight.dtype, weight.device
        unchanged = (
            torch.zeros(dim, dtype=dtype, device=device),
            torch.ones(dim, dtype=dtype, device=device),
        )
        constants = [p.constants(dtype) if p.normalizes else unchanged for p in policies]
        self._shift = torch.stack([shift for shift, _ in constants]).unsqueeze(1)
        self._scale = torch.stack([scale for _, scale in constants]).unsqueeze(1)
        clips = [p.clip if p.normalizes else torch.inf for p in policies]
        self._clip = torch.tensor(clips, dtype=dtype, device=device).view(-1, 1, 1)
        self._activations: list[Callable[[torch.Tensor], torch.Tensor]] = first.actor.activations
        self._layers = [
            (
                torch.stack([p.actor.layers[index][1] for p in policies]).unsqueeze(1),
                torch.stack([p.actor.layers[index][0] for p in policies]),
            )
            for index in range(len(first.actor.layers))
        ]
        self._unit_range = all(p.action_low == 0.0 and p.action_high == 1.0 for p in policies)
        self._low = torch.tensor([p.action_low for p in policies], dtype=dtype, device=device).view(-1, 1)
        spans = [p.action_high - p.action_low for p in policies]
        self._span = torch.tensor(spans, dtype=dtype, device=device).view(-1, 1)

    @staticmethod
    def compatible(policies: Sequence[object]) -> bool:
        """Whether ``policies`` can stack with rows equal to their own calls bit for bit: all
        :class:`FrozenActorPolicy` of one architecture, on the CPU, with every hidden width a multiple
        of :data:`LANE_QUANTUM` unless the activation is ReLU."""
        if not policies or not all(isinstance(p, FrozenActorPolicy) for p in policies):
            return False
        frozen = [p for p in policies if isinstance(p, FrozenActorPolicy)]
        first = frozen[0]
        shapes = [(w.shape, b.shape, w.dtype, w.device) for w, b in first.actor.layers]
        if first.actor.layers[0][0].device.type != "cpu":
            return False
        hidden_widths = [bias.shape[0] for _, bias in first.actor.layers[:-1]]
        exact = all(fn is torch.relu_ for fn in first.actor.activations)
        if not exact and any(width % LANE_QUANTUM for width in hidden_widths):
            return False
        return all(
            p.action_dim == first.action_dim
            and p.actor.activations == first.actor.activations
            and [(w.shape, b.shape, w.dtype, w.device) for w, b in p.actor.layers] == shapes
            for p in frozen
        )

    @torch.no_grad()
    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """Actions ``(G, A)`` of policy ``g`` on observation row ``rows[g]`` ``(G, D)``, in the
        weights' dtype and on their device."""
        x = _rescale(rows.unsqueeze(1), self._shift, self._scale, self._clip)
        last = len(self._layers) - 1
        for index, (bias, weight) in enumerate(self._layers):
            x = torch.baddbmm(bias, x, weight)
            if index < last:
                x = self._activations[index](x)
        unit = beta_mean(x[..., : 2 * self.action_dim], self.action_dim).squeeze(1)
        if self._unit_range:
            return unit
        return self._low + self._span * unit


def freeze_policy(
    model: ActorCritic | CrossSectionalActorCritic,
    obs_stats: RunningMeanStd,
    normalize: bool,
    clip: float,
    action_low: float,
    action_high: float,
) -> Policy:
    """The deterministic policy of an actor-critic, frozen at its current weights and statistics.

    The flat MLP's policy is a :class:`FrozenActorPolicy` (the actor as a
    :class:`~podracer.networks.FrozenMLP`, weights pre-transposed: about twice as fast at batch 1 on a
    CPU, equal to the live network's mode to float32 rounding; several stack into one pass with
    :class:`StackedActors`); the cross-sectional network's is a
    :class:`~podracer.frozen_entity.FrozenCrossSectionalPolicy` (a third of the live network's
    operations at batch 1, equal to its mode to float32 rounding), as a :class:`RowWisePolicy` (it
    mixes assets within an observation, never rows). Later learning or loading does not change it.

    Args:
        model: the actor-critic.
        obs_stats: its observation statistics (copied).
        normalize: whether observations are standardised with them.
        clip: standardised observations are clipped to ``[-clip, clip]``.
        action_low: lower end of the env's action box.
        action_high: upper end of the env's action box.

    Returns:
        Observations ``(N, D)`` -> actions ``(N, A)`` in ``[action_low, action_high]``.
    """
    mean, var = obs_stats.mean.clone(), obs_stats.var.clone()
    if isinstance(model, ActorCritic):  # data that StackedActors can stack
        return FrozenActorPolicy(
            mean if normalize else None,
            var if normalize else None,
            clip,
            FrozenMLP(model.actor),
            model.action_dim,
            action_low,
            action_high,
        )
    mean, var = model.layout.tie_statistics(mean, var)  # every entity normalised alike
    shift, scale = RunningMeanStd.constants(mean, var, torch.float32) if normalize else (None, None)
    frozen = FrozenCrossSectionalPolicy(model, shift, scale, clip, action_low, action_high)
    return RowWisePolicy(frozen)  # the cross-sectional network mixes assets within a row only
