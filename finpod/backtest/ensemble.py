"""The ensemble trader, and the env's rule that turns weights-mode actions into target weights.

Shapes: ``K`` members, ``B`` observation rows, ``D`` observation size, ``A = M + 1`` actions.
"""

from __future__ import annotations

import torch

from podracer.api import Agent, Policy, deterministic_policy


def target_weights(actions: torch.Tensor, fully_invested: bool = False) -> torch.Tensor:
    """The target weights the env reads from weights-mode actions (its exact rule).

    Args:
        actions: ``(..., M + 1)`` scores over ``[cash, asset_1 .. asset_M]`` (clamped to ``[0, 1]``).
        fully_invested: the cash score is ignored (``EnvConfig.fully_invested``).

    Returns:
        ``(..., M + 1)`` weights ``a / sum(a)`` summing to 1; an all-zero row is all cash.
    """
    scores = actions.clamp(0.0, 1.0)
    if fully_invested:
        scores[..., 0] = 0.0
    total = scores.sum(dim=-1, keepdim=True)
    weights = scores.div_(total.clamp(min=torch.finfo(scores.dtype).tiny))  # an all-zero row stays 0
    weights[..., :1].add_(total == 0.0)  # ... and becomes all cash; + 0.0 leaves the others' bits
    return weights


class EnsemblePolicy:
    """The distinct-lineage ensemble: the average of its members' TARGET WEIGHTS (DESIGN.md, the
    final trader), as a :data:`Policy` ``obs (B, D) -> actions (B, A)``.

    In ``weights`` mode each member's deterministic action is first turned into the weights the env
    would trade (clamp, normalise; with ``fully_invested``, the cash score ignored first), so a
    member's vote does not depend on the scale of its raw scores and is the book that member would
    hold; the mean of weights is itself a weights action the env trades unchanged. In
    ``share_delta`` mode the share orders are averaged.

    Args:
        members: the members' deterministic policies.
        action_mode: the env's action mode (``"weights"`` or ``"share_delta"``).
        fully_invested: the env ignores the cash score (``EnvConfig.fully_invested``): so does each
            member's vote, before the average (averaging first would let one member's cash weight
            scale the others' books).
    """

    def __init__(self, members: list[Policy], action_mode: str, fully_invested: bool = False) -> None:
        self.members = members
        self.action_mode = action_mode
        self.fully_invested = fully_invested

    def combine(self, actions: torch.Tensor) -> torch.Tensor:
        """The ensemble's action ``(B, A)`` from its members' actions ``(K, B, A)`` (members in order)."""
        if self.action_mode == "weights":
            actions = target_weights(actions, self.fully_invested)
        return actions.mean(dim=0)

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """The ensemble's action ``(B, A)`` for observations ``(B, D)``."""
        return self.combine(torch.stack([member(obs) for member in self.members]))


def ensemble_policy(agents: list[Agent], action_mode: str, fully_invested: bool = False) -> EnsemblePolicy:
    """:class:`EnsemblePolicy` of the agents' frozen deterministic policies."""
    return EnsemblePolicy([deterministic_policy(agent) for agent in agents], action_mode, fully_invested)
