"""The cross-sectional network's deterministic policy, frozen for evaluation loops.

Shapes: ``B`` observation rows, ``M`` entities, ``F`` features and ``E`` extras per entity, ``G``
globals, ``K`` global action scores, ``H`` the encoder's width.

An evaluation loop (a validation score, a backtest, paper trading) asks for one row's action per
bar, so at batch 1 its cost is the number of tensor operations, not their FLOPs. The live network
(:class:`~podracer.entity.CrossSectionalActorCritic`) builds each entity's input by concatenating
its features, extras and the globals, runs ``nn.Linear`` modules (a transpose per call), builds a
distribution object with its score stds, then squashes the mode. :class:`FrozenCrossSectionalPolicy`
computes the same mode with about a third of the operations: each first layer is split by input
block (``x W = features W_f + extras W_e + globals W_g``, so no concatenation), every weight is
stored transposed, activations run in place, and only the scores' locations are computed.
Equal to the live network's mode to float32 rounding (not bit for bit: the sums are grouped
differently); ``tests/engine/test_frozen_entity.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from podracer.distributions import to_action_range
from podracer.entity import CrossSectionalActorCritic
from podracer.networks import _IN_PLACE
from podracer.normalization import RunningMeanStd

Layer = tuple[torch.Tensor, torch.Tensor]
"""A linear layer as ``(weight (in, out), bias (out,))``."""


def _layers(network: nn.Sequential) -> tuple[list[Layer], list[Callable[[torch.Tensor], torch.Tensor]]]:
    """Each linear layer of ``network`` transposed and copied, and the in-place activation after each."""
    modules = list(network)
    linears = [x for x in modules if isinstance(x, nn.Linear)]
    activations = [_IN_PLACE[type(x)] for x in modules if not isinstance(x, nn.Linear)]
    copy = torch.contiguous_format  # a copy even where the transpose is already contiguous (width 1)
    layers = [(x.weight.detach().t().clone(memory_format=copy), x.bias.detach().clone()) for x in linears]
    return layers, activations


def _forward(
    x: torch.Tensor, layers: list[Layer], activations: list[Callable[[torch.Tensor], torch.Tensor]]
) -> torch.Tensor:
    """``x`` through ``layers``, each followed by its activation while there is one (in place)."""
    for index, (weight, bias) in enumerate(layers):
        x = torch.matmul(x, weight).add_(bias)
        if index < len(activations):
            x = activations[index](x)
    return x


def _split_rows(weight: torch.Tensor, *sizes: int) -> list[torch.Tensor]:
    """A transposed first-layer weight ``(in, out)`` cut into the row blocks of its input parts."""
    return [part.contiguous() for part in torch.split(weight, list(sizes), dim=0)]


class FrozenCrossSectionalPolicy:
    """Observations ``(B, D)`` -> deterministic actions ``(B, A)`` of a cross-sectional actor.

    A snapshot of the network and the normalisation constants: later learning or loading does not
    change it.

    Args:
        model: the live network.
        shift: ``(D,)`` normalisation shift (tied over entities), or ``None`` (no normalisation).
        scale: ``(D,)`` normalisation scale, or ``None``.
        clip: normalised observations are clipped to ``[-clip, clip]``.
        action_low: lower end of the env's action box.
        action_high: upper end of the env's action box.
    """

    def __init__(
        self,
        model: CrossSectionalActorCritic,
        shift: torch.Tensor | None,
        scale: torch.Tensor | None,
        clip: float,
        action_low: float,
        action_high: float,
    ) -> None:
        layout = model.layout
        self._m, self._f, self._e = layout.num_entities, layout.entity_features, layout.entity_extras
        self._k = layout.action_globals
        self._shift, self._scale, self._clip = shift, scale, clip
        self._low, self._high = action_low, action_high
        with torch.no_grad():
            encoder, self._encoder_activations = _layers(model.actor_encoder)
            (first_weight, self._encoder_bias), self._encoder_rest = encoder[0], encoder[1:]
            self._w_features, self._w_extras, self._w_globals = _split_rows(
                first_weight, self._f, self._e, layout.num_globals
            )
            entity_head, self._entity_activations = _layers(model.entity_head)
            (head_weight, self._entity_bias), self._entity_rest = entity_head[0], entity_head[1:]
            width = head_weight.shape[0] // 2  # the head reads [own encoding, context], H each
            self._w_own, self._w_context = _split_rows(head_weight, width, width)
            self._global_head: tuple[list[Layer], list[Callable[[torch.Tensor], torch.Tensor]]] | None = None
            if model.global_head is not None:
                self._global_head = _layers(model.global_head)

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(B, A)`` in ``[action_low, action_high]`` for observations ``(B, D)``."""
        rows = obs.to(torch.float32)
        if self._shift is not None and self._scale is not None:
            rows = RunningMeanStd.rescale(rows, self._shift, self._scale, self._clip)
        m, f, e = self._m, self._f, self._e
        features = rows[:, : m * f].reshape(-1, m, f)
        globals_ = rows[:, m * (f + e) :]
        hidden = torch.matmul(features, self._w_features)
        if e > 0:
            extras = rows[:, m * f : m * (f + e)].reshape(rows.shape[0], e, m).transpose(1, 2)
            hidden += torch.matmul(extras, self._w_extras)
        hidden += torch.addmm(self._encoder_bias, globals_, self._w_globals).unsqueeze(1)
        hidden = self._encoder_activations[0](hidden)
        hidden = _forward(hidden, self._encoder_rest, self._encoder_activations[1:])
        context = hidden.mean(dim=1)
        own = torch.matmul(hidden, self._w_own)
        own += torch.addmm(self._entity_bias, context, self._w_context).unsqueeze(1)
        scores = _forward(self._entity_activations[0](own), self._entity_rest, self._entity_activations[1:])
        entity_scores = scores.squeeze(-1)
        if self._global_head is not None:
            head = _forward(torch.cat([context, globals_], dim=1), *self._global_head)
            entity_scores = torch.cat([head, entity_scores], dim=1)
        return to_action_range(torch.softmax(entity_scores, dim=-1), self._low, self._high)


__all__ = ["FrozenCrossSectionalPolicy"]
