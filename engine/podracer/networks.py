"""The flat actor-critic MLP (``policy = "mlp"``) and the MLP builder every network uses.

Shapes: ``B`` rows (envs or a minibatch), ``D`` observation size, ``A`` action size.

The flat policy is a product of independent Beta distributions on the unit interval, one per action
dimension (:class:`podracer.distributions.BetaPolicyDistribution`), with both concentrations
``1 + softplus(.)`` so that every marginal is unimodal and has a finite density at the bounds. The
cross-sectional network for entity-structured observations lives in :mod:`podracer.entity`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

from podracer.distributions import BetaPolicyDistribution

__all__ = ["Activation", "ActorCritic", "BetaPolicyDistribution", "FrozenMLP", "mlp", "mlp_body"]

Activation = Literal["tanh", "relu", "elu"]
"""Hidden-layer nonlinearity of the MLPs."""

_ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
_IN_PLACE: dict[type[nn.Module], Callable[[torch.Tensor], torch.Tensor]] = {
    nn.Tanh: torch.tanh_,
    nn.ReLU: torch.relu_,
    nn.ELU: nn.functional.elu_,
}
"""The same activations as in-place functions (same numbers, no module call, no new tensor)."""

OUTPUT_QUANTUM = 16
"""A frozen MLP's last layer is stored zero-padded to a multiple of this many outputs: MKL's
``baddbmm`` rounds a product whose width is not a multiple of 8 differently with a batch of one
matrix and with several (measured on an AMD EPYC: every one of 300 draws at width 10), while padded
widths give the same bits alone and stacked (:mod:`podracer.frozen`)."""
HIDDEN_INIT_GAIN = math.sqrt(2.0)
"""Orthogonal-init gain of hidden layers (the usual PPO choice)."""
ACTOR_HEAD_INIT_GAIN = 0.01
"""Orthogonal-init gain of the actor's output layer: near-zero logits give a broad initial policy."""
CRITIC_HEAD_INIT_GAIN = 1.0
"""Orthogonal-init gain of the critic's output layer."""


def _linear(in_features: int, out_features: int, gain: float, generator: torch.Generator) -> nn.Linear:
    layer = nn.Linear(in_features, out_features)
    nn.init.orthogonal_(layer.weight, gain=gain, generator=generator)
    nn.init.zeros_(layer.bias)
    return layer


def mlp_body(
    in_features: int, hidden_sizes: tuple[int, ...], activation: Activation, generator: torch.Generator
) -> nn.Sequential:
    """Hidden layers only, each followed by ``activation``: ``(..., in) -> (..., hidden_sizes[-1])``."""
    layers: list[nn.Module] = []
    width = in_features
    for hidden in hidden_sizes:
        layers += [_linear(width, hidden, HIDDEN_INIT_GAIN, generator), _ACTIVATIONS[activation]()]
        width = hidden
    return nn.Sequential(*layers)


def mlp(
    in_features: int,
    hidden_sizes: tuple[int, ...],
    out_features: int,
    activation: Activation,
    head_gain: float,
    generator: torch.Generator,
) -> nn.Sequential:
    """A fully connected network ``in -> hidden... -> out`` with orthogonal initialisation.

    Args:
        in_features: input width.
        hidden_sizes: widths of the hidden layers, in order (may be empty: a linear map).
        out_features: output width.
        activation: nonlinearity after every hidden layer (none after the output layer).
        head_gain: orthogonal-init gain of the output layer.
        generator: CPU generator the initial weights are drawn from.

    Returns:
        The network: ``(B, in_features)`` -> ``(B, out_features)``.
    """
    layers: list[nn.Module] = []
    width = in_features
    for hidden in hidden_sizes:
        layers += [_linear(width, hidden, HIDDEN_INIT_GAIN, generator), _ACTIVATIONS[activation]()]
        width = hidden
    layers.append(_linear(width, out_features, head_gain, generator))
    return nn.Sequential(*layers)


class FrozenMLP:
    """An inference copy of an MLP built by :func:`mlp`, for batch-1 evaluation loops.

    Holds each linear layer's weight transposed and contiguous (``(in, out)``): a one-row product
    with it is a plain row-times-matrix, about twice as fast on a CPU as ``nn.Linear``'s product with
    the transposed view, and equal to it to float32 rounding (not bit for bit). The product is a
    ``baddbmm`` over a batch of one matrix, the kernel that :class:`podracer.frozen.StackedActors`
    runs over ``G`` stacked matrices, so one network alone and the same network in a stack give the
    same bits (``addmm`` and ``baddbmm`` do not, for some shapes); it costs no more than ``addmm``.
    A snapshot: later changes of the network do not reach it.

    Args:
        network: an ``nn.Sequential`` of ``nn.Linear`` layers with an activation between them.
    """

    def __init__(self, network: nn.Sequential) -> None:
        layers = list(network)
        linears = [x for x in layers[::2] if isinstance(x, nn.Linear)]
        activations = [_IN_PLACE.get(type(x)) for x in layers[1::2]]
        if len(linears) != len(layers[::2]) or len(activations) != len(linears) - 1 or None in activations:
            raise TypeError(
                "FrozenMLP needs an nn.Sequential of Linear layers with a Tanh, ReLU or ELU between each"
            )
        self._activations = [fn for fn in activations if fn is not None]
        self.out_features = linears[-1].out_features
        """The network's output width (its last layer is stored zero-padded, see :meth:`__call__`)."""
        padding = -self.out_features % OUTPUT_QUANTUM
        with torch.no_grad():
            self._layers = [(x.weight.detach().t().contiguous(), x.bias.detach().clone()) for x in linears]
            weight_t, bias = self._layers[-1]
            self._layers[-1] = (
                torch.nn.functional.pad(weight_t, (0, padding)),
                torch.nn.functional.pad(bias, (0, padding)),
            )
        self._batched = [(weight_t.unsqueeze(0), bias.view(1, 1, -1)) for weight_t, bias in self._layers]

    @property
    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each linear layer's ``(weight (in, out), bias (out,))``, input layer first; the last
        layer's ``out`` is :attr:`out_features` zero-padded to a multiple of :data:`OUTPUT_QUANTUM`."""
        return self._layers

    @property
    def activations(self) -> list[Callable[[torch.Tensor], torch.Tensor]]:
        """The in-place activation after each hidden layer (one fewer than :attr:`layers`)."""
        return self._activations

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """The network's output ``(B, out)`` for inputs ``(B, in)`` (no gradient)."""
        last = len(self._batched) - 1
        batch = rows.unsqueeze(0)
        for index, (weight_t, bias) in enumerate(self._batched):
            batch = torch.baddbmm(bias, batch, weight_t)
            if index < last:
                batch = self._activations[index](batch)  # in place on the fresh product
        return batch.squeeze(0)[:, : self.out_features]


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs over the same (normalised) observation.

    Args:
        obs_dim: ``D``, observation width.
        action_dim: ``A``, action width.
        hidden_sizes: hidden-layer widths, shared by actor and critic (each has its own weights).
        activation: hidden-layer nonlinearity.
        seed: seeds the initial weights (drawn on the CPU, so identical on every device).
    """

    def __init__(
        self, obs_dim: int, action_dim: int, hidden_sizes: tuple[int, ...], activation: Activation, seed: int
    ) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        generator = torch.Generator().manual_seed(seed)
        self.actor = mlp(obs_dim, hidden_sizes, 2 * action_dim, activation, ACTOR_HEAD_INIT_GAIN, generator)
        self.critic = mlp(obs_dim, hidden_sizes, 1, activation, CRITIC_HEAD_INIT_GAIN, generator)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``(B,)`` for observations ``(B, D)`` (in units of discounted reward)."""
        return self.critic(obs).squeeze(-1)

    def distribution(self, obs: torch.Tensor) -> BetaPolicyDistribution:
        """The policy's action distribution for observations ``(B, D)``."""
        return self.distribution_of(self.actor(obs))

    def distribution_and_value(self, obs: torch.Tensor) -> tuple[BetaPolicyDistribution, torch.Tensor]:
        """:meth:`distribution` and :meth:`value` of the same observations ``(B, D)``."""
        return self.distribution(obs), self.value(obs)

    @property
    def value_with_policy(self) -> bool:
        """False: the critic is a network of its own, so a rollout's values are cheaper in a few
        large batches after the rollout than with each step's policy call."""
        return False

    def mean_action_of(self, logits: torch.Tensor) -> torch.Tensor:
        """The mean unit action ``(B, A)`` of :meth:`distribution_of` (the deterministic action), in
        four ops for evaluation loops (equal to it to float32 rounding)."""
        concentrations = nn.functional.softplus(logits).add_(1.0)
        alpha, beta = concentrations.split(self.action_dim, dim=-1)
        return alpha / (alpha + beta)

    def distribution_of(self, logits: torch.Tensor) -> BetaPolicyDistribution:
        """The action distribution of the actor's output ``(B, 2A)``: Betas with both concentrations
        ``1 + softplus(.)``."""
        alpha_logits, beta_logits = logits.split(self.action_dim, dim=-1)
        return BetaPolicyDistribution(
            1.0 + nn.functional.softplus(alpha_logits), 1.0 + nn.functional.softplus(beta_logits)
        )

    def matmul_flops_per_row(self) -> tuple[int, int]:
        """Multiply-add FLOPs of one forward pass for one observation row.

        Returns:
            ``(total, first_layers)``: ``total`` is ``2 * sum(in * out)`` over every linear layer of
            actor and critic; ``first_layers`` is the part spent in the two input layers (their
            backward pass needs no gradient with respect to the observation).
        """
        linears = [m for m in self.modules() if isinstance(m, nn.Linear)]
        total = sum(2 * m.in_features * m.out_features for m in linears)
        firsts = [net[0] for net in (self.actor, self.critic)]
        first = sum(2 * m.in_features * m.out_features for m in firsts if isinstance(m, nn.Linear))
        return total, first
