"""The actions of several traders, each on its own env's observation row, in one pass per bar.

A backtest steps ``N`` traders side by side (one env each, :func:`finpod.backtest.runner.run_policies`).
When every trader is a frozen flat-MLP policy, or an ensemble of them, all their networks (every
member of every ensemble) run as one :class:`~podracer.frozen.StackedActors` pass: one ``baddbmm``
per layer and one pass of the elementwise ops for all of them, instead of a call per network. Each
network still sees one row, so every trader's action equals the one it computes alone, bit for bit.
Any other policy (the cross-sectional network, a user's function) is called once per bar on its row.

Shapes: ``N`` traders, ``G`` networks in all, ``D`` observation size, ``A`` action size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from finpod.backtest.ensemble import EnsemblePolicy
from podracer.api import FrozenActorPolicy, Policy, StackedActors


class TraderBatch:
    """``N`` traders' actions ``(N, A)`` from their envs' observations ``(N, D)``: row ``i`` is
    trader ``i``'s.

    Args:
        policies: one deterministic policy per trader (an :class:`EnsemblePolicy` counts its members).
    """

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies = list(policies)
        members: list[Policy] = []
        owners: list[int] = []
        self._spans: list[tuple[int, int]] = []
        for index, policy in enumerate(self.policies):
            own = policy.members if isinstance(policy, EnsemblePolicy) else [policy]
            self._spans.append((len(members), len(members) + len(own)))
            members += own
            owners += [index] * len(own)
        frozen = [member for member in members if isinstance(member, FrozenActorPolicy)]
        stackable = len(members) > 1 and len(frozen) == len(members) and StackedActors.compatible(frozen)
        self.stacked = StackedActors(frozen) if stackable else None
        """All networks as one pass, or None when some policy cannot be stacked."""
        self._owners = torch.tensor(owners)
        self._weights = frozen[0].actor.layers[0][0] if frozen else None

    def _fits(self, obs: torch.Tensor) -> bool:
        weights = self._weights
        return weights is not None and obs.dtype == weights.dtype and obs.device == weights.device

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(N, A)``: row ``i`` is ``policies[i](obs[i : i + 1])``."""
        if self.stacked is None or not self._fits(obs):
            if len(self.policies) == 1:
                return self.policies[0](obs)
            return torch.cat([policy(obs[i : i + 1]) for i, policy in enumerate(self.policies)])
        if self._owners.device != obs.device:
            self._owners = self._owners.to(obs.device)
        member_actions = self.stacked(obs.index_select(0, self._owners))  # (G, A)
        actions = []
        for policy, (start, stop) in zip(self.policies, self._spans, strict=True):
            own = member_actions[start:stop]
            actions.append(policy.combine(own.unsqueeze(1)) if isinstance(policy, EnsemblePolicy) else own)
        return torch.cat(actions)
