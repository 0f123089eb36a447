"""The H-term (Hamiltonian term): an optional extra policy update over whole trajectories.

ElegantRL's stability add-on for model-free agents (its ``docs/source/tutorial/hterm.rst`` and
``AgentPPO_H``), adapted to podracer's batched PPO. Besides the clipped-PPO minibatch updates, the
policy takes one extra step per update epoch on a batch of *whole trajectories* (not of single
transitions) that pushes it toward the trajectories with the best normalised returns:

``H = -lambda * mean_{l, k}( pi(a_lk | s_lk) * r_norm_lk )``, with
``r_norm = (r - min r) / (max r - min r)``

where ``pi(a | s) = exp(log_prob)`` is the policy's joint density of the stored raw action (the
reference's ``logprob.exp().prod(dim=1)`` over per-dimension log-densities), ``r`` the stored
per-step returns (PPO's value targets) and the min and max are over every step in the buffer;
``lambda`` is :attr:`podracer.ppo.PPOConfig.h_term_coef` (the reference's ``lambda_h_term``,
2^-3 there).

Shapes: ``T`` rollout steps per round (a trajectory's length ``K``), ``N`` envs, ``L`` trajectories
kept (:attr:`podracer.ppo.PPOConfig.h_term_trajectories`), ``D`` observation size, ``A`` action size.

Adaptation to a batched rollout: a trajectory is one env's ``T`` consecutive steps of a round (an
episode that ends inside it continues with the next one: the returns are per step and reset at the
episode end). Each round the better half of the round's ``N`` trajectories by mean return (the
reference keeps the above-mean segments) enter a ring of ``L`` trajectories, oldest out (the
reference's newer code drops its oldest entries). The buffer is experience, like the rollout: it is
not part of a snapshot, and a restored or re-seeded pod refills it from its next round. Observations
are stored as the policy saw them (normalised with the statistics of their round).

:func:`h_term_loss` is a pure function of tensors, so a backend that stacks P pods' parameters can
apply it per pod.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import torch

from podracer.adam import FusedAdam
from podracer.entity import CrossSectionalActorCritic
from podracer.grad_step import ClippedStep
from podracer.networks import ActorCritic
from podracer.ppo_config import PPOConfig
from podracer.rollout import Rollout

KEPT_PER_ROUND: Final[float] = 0.5
"""Share of a round's trajectories (the best by mean return) that enter the buffer."""
MAX_LOG_DENSITY: Final[float] = 80.0
"""Log-densities are capped here (nats) before ``exp``: float32 overflows past about 88.7, and a
joint density over many action dimensions gets there once the policy is narrow (100 dimensions at
a per-dimension log-density of 0.9). A capped row passes no gradient; uncapped rows are unchanged."""


def normalized_returns(returns: torch.Tensor) -> torch.Tensor:
    """Min-max normalised returns over every element: ``(r - min r) / (max r - min r)``.

    Args:
        returns: ``(L, K)`` per-step returns (reward units).

    Returns:
        ``(L, K)`` in ``[0, 1]``; all zeros when every return is equal (nothing to prefer).
    """
    low, high = returns.min(), returns.max()
    span = high - low
    return torch.where(span > 0, (returns - low) / span, torch.zeros_like(returns))


def h_term_loss(
    log_probs: torch.Tensor, normalized: torch.Tensor, coef: float | torch.Tensor
) -> torch.Tensor:
    """The H-term objective ``-coef * mean(exp(log_probs) * normalized)`` (to minimise).

    The density ``exp(log_probs)`` is a joint density over all action dimensions, so its scale
    follows the policy's spread: tiny for a broad policy over many dimensions (the term then barely
    moves it), large for a narrow one (gradient clipping bounds the step). Log-densities above
    :data:`MAX_LOG_DENSITY` are capped so the loss stays finite.

    Args:
        log_probs: ``(L, K)`` the current policy's joint log-densities (nats) of the stored actions,
            with gradient.
        normalized: ``(L, K)`` normalised returns (:func:`normalized_returns`), no gradient.
        coef: ``lambda`` (a float, or a 0-d tensor per pod).

    Returns:
        0-d loss.
    """
    return -coef * (log_probs.clamp(max=MAX_LOG_DENSITY).exp() * normalized).mean()


@dataclass
class TrajectoryBuffer:
    """The best recent whole trajectories, a ring of ``L`` slots on the rollout's device.

    Attributes:
        obs: ``(L, K, D)`` observations the policy saw.
        unit_actions: ``(L, K, A)`` raw actions taken (the distribution's space).
        returns: ``(L, K)`` per-step returns (PPO's value targets).
        filled: slots holding a trajectory (``<= L``).
        next_slot: the slot the next trajectory goes to (the oldest once full).
        last_loss: the last H-term step's loss (0-d, no gradient), ``None`` before the first.
    """

    obs: torch.Tensor
    unit_actions: torch.Tensor
    returns: torch.Tensor
    filled: int = 0
    next_slot: int = 0
    last_loss: torch.Tensor | None = None

    @classmethod
    def for_rollout(
        cls, previous: TrajectoryBuffer | None, rollout: Rollout, capacity: int
    ) -> TrajectoryBuffer:
        """``previous`` if it fits ``rollout``'s trajectory shape and ``capacity``, else an empty buffer."""
        steps, _, obs_dim = rollout.obs.shape
        action_dim, device = rollout.unit_actions.shape[2], rollout.obs.device
        if (
            previous is not None
            and previous.unit_actions.shape == (capacity, steps, action_dim)
            and previous.obs.shape[2] == obs_dim
            and previous.obs.device == device
        ):
            return previous
        return cls(
            obs=torch.zeros(capacity, steps, obs_dim, device=device),
            unit_actions=torch.zeros(capacity, steps, action_dim, device=device),
            returns=torch.zeros(capacity, steps, device=device),
        )

    @property
    def capacity(self) -> int:
        """``L``."""
        return self.returns.shape[0]

    def push(self, rollout: Rollout) -> None:
        """Store the better half (:data:`KEPT_PER_ROUND`) of ``rollout``'s ``N`` trajectories by mean return.

        Args:
            rollout: a round with advantages and returns computed, ``(T, N, ...)``.
        """
        num_envs = rollout.returns.shape[1]
        count = min(max(1, int(num_envs * KEPT_PER_ROUND)), self.capacity)
        best = rollout.returns.mean(0).topk(count).indices
        slots = (self.next_slot + torch.arange(count)) % self.capacity
        slots = slots.to(self.returns.device)
        self.obs.index_copy_(0, slots, rollout.obs[:, best].transpose(0, 1))
        self.unit_actions.index_copy_(0, slots, rollout.unit_actions[:, best].transpose(0, 1))
        self.returns.index_copy_(0, slots, rollout.returns[:, best].T)
        self.next_slot = (self.next_slot + count) % self.capacity
        self.filled = min(self.filled + count, self.capacity)

    def loss(self, model: ActorCritic | CrossSectionalActorCritic, coef: float) -> torch.Tensor:
        """:func:`h_term_loss` of ``model``'s policy over every stored trajectory (0-d, with gradient)."""
        obs, actions = self.obs[: self.filled], self.unit_actions[: self.filled]
        log_probs = model.distribution(obs.flatten(0, 1)).log_prob(actions.flatten(0, 1))
        normalized = normalized_returns(self.returns[: self.filled])
        return h_term_loss(log_probs.view(normalized.shape), normalized, coef)

    def epoch_hook(
        self,
        model: ActorCritic | CrossSectionalActorCritic,
        optimizer: FusedAdam,
        cfg: PPOConfig,
        then: Callable[[torch.Tensor], torch.Tensor] | None,
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """An epoch hook for :func:`podracer.ppo_update.ppo_update`: one H-term step, then ``then``.

        The step minimises :meth:`loss` at ``cfg.h_term_coef`` with ``optimizer`` (at the round's
        learning rate) and gradient-norm clipping at ``cfg.max_grad_norm``; only the policy's
        parameters get gradients. ``then`` (learner fusion) runs after it, so fused learners stay
        averaged.
        """

        step = ClippedStep(optimizer, cfg.max_grad_norm)

        def hook(epoch_kl: torch.Tensor) -> torch.Tensor:
            loss = self.loss(model, cfg.h_term_coef)
            step.zero_grad()
            loss.backward()
            self.last_loss = loss.detach()
            step.clip_and_step()
            return epoch_kl if then is None else then(epoch_kl)

        return hook
