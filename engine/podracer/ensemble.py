"""An ensemble policy: the mean of the deterministic actions of several agents (distinct lineages).

For actions that are already target weights (non-negative, summing to one) the mean is again such
a vector, so the ensemble trades like one agent whose allocation is the leaders' average. Actions
that an env normalises itself (e.g. scores ``a`` with weights ``a / sum(a)``) are NOT averaged as
weights by this mean: an agent with larger scores would dominate. Normalise each agent's actions
first (an application's own ensemble policy) when the average must be over weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from podracer.errors import TournamentError
from podracer.leaderboard import Leaderboard
from podracer.pod import AgentFactory
from podracer.protocols import Agent, deterministic_policy


class EnsemblePolicy:
    """A :data:`podracer.api.Policy` averaging the deterministic actions of ``agents``.

    Args:
        agents: at least one agent; all must take the same observations and give the same action size.
    """

    def __init__(self, agents: Sequence[Agent]) -> None:
        """See the class docstring."""
        if not agents:
            raise TournamentError("an ensemble needs at least one agent; pass k >= 1 or a non-empty list")
        self.agents = tuple(agents)
        self._policies = tuple(deterministic_policy(agent) for agent in self.agents)

    @classmethod
    def from_leaderboard(
        cls, leaderboard: Leaderboard, k: int, agent_factory: AgentFactory
    ) -> EnsemblePolicy:
        """The ensemble of the best entries of ``leaderboard``'s (up to) ``k`` best DISTINCT lineages.

        Each member is the best entry of its lineage (see
        :meth:`~podracer.leaderboard.Leaderboard.top_lineage_ranks`), rebuilt with ``agent_factory``;
        a board holding fewer than ``k`` lineages gives an ensemble of that many members.

        Raises:
            TournamentError: ``k`` < 1 or the leaderboard is empty.
        """
        if k < 1 or not leaderboard.entries:
            raise TournamentError(
                f"ensemble size k={k} of a leaderboard of {len(leaderboard.entries)} entries; "
                "use k >= 1 on a leaderboard with entries"
            )
        return cls([leaderboard.load_agent(rank, agent_factory) for rank in leaderboard.top_lineage_ranks(k)])

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Mean deterministic action ``(N, A)`` of the agents, as they were when the ensemble was made,
        for observations ``(N, D)``."""
        return torch.stack([policy(obs) for policy in self._policies]).mean(dim=0)
