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

    The traders whose networks are all frozen flat MLPs (a :class:`FrozenActorPolicy`, or an
    :class:`EnsemblePolicy` of them) run as one stacked pass when there are two networks or more
    (on a CPU: :meth:`StackedActors.compatible` refuses other devices); the others (the linear
    baseline, the cross-sectional network, a user's function) are called on their own rows.

    Args:
        policies: one deterministic policy per trader (an :class:`EnsemblePolicy` counts its members).
    """

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies = list(policies)
        members: list[FrozenActorPolicy] = []
        owners: list[int] = []
        spans: dict[int, tuple[int, int]] = {}
        for index, policy in enumerate(self.policies):
            own = policy.members if isinstance(policy, EnsemblePolicy) else [policy]
            if all(isinstance(member, FrozenActorPolicy) for member in own):
                spans[index] = (len(members), len(members) + len(own))
                members += own  # type: ignore[arg-type]
                owners += [index] * len(own)
        stackable = len(members) > 1 and StackedActors.compatible(members)
        self.stacked = StackedActors(members) if stackable else None
        """The frozen networks as one pass, or None when fewer than two can be stacked."""
        self._spans = spans if stackable else {}
        """Trader index -> its networks' rows of the stacked pass."""
        self.all_stacked = stackable and len(spans) == len(self.policies)
        """Whether every trader's action comes from the stacked pass (its numbers are then the same
        at any torch thread count; a mixed batch's other policies are not known to be)."""
        self._owners = torch.tensor(owners)
        self._weights = members[0].actor.layers[0][0] if members else None

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
        for index, policy in enumerate(self.policies):
            span = self._spans.get(index)
            if span is None:
                actions.append(policy(obs[index : index + 1]))
                continue
            own = member_actions[span[0] : span[1]]
            actions.append(policy.combine(own.unsqueeze(1)) if isinstance(policy, EnsemblePolicy) else own)
        return torch.cat(actions)
