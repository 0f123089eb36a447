"""podracer: an asynchronous, elastic tournament of RL agents ("pods").

Domain-free: it knows tensors, envs, scores and snapshots, nothing about markets. It imports no
pandas, no finpod and no broker client, and ``tests/engine/test_domain_free.py`` proves it.

The package re-exports the most used names of its public face, :mod:`podracer.api`, on first use
(PEP 562), so importing a light module such as :mod:`podracer.errors` does not load torch; an
application imports from ``podracer.api`` itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from podracer.api import (
        Agent,
        AgentFactory,
        Backend,
        EnsemblePolicy,
        EnvFactory,
        Evaluate,
        HistoryRecord,
        Leaderboard,
        LeaderboardEntry,
        LocalBackend,
        PodAgent,
        PodracerError,
        Policy,
        PopulationBackend,
        RoundStats,
        SnapshotError,
        TensorVectorEnv,
        Tournament,
        TournamentConfig,
        TournamentError,
        TournamentEvent,
        TournamentResult,
        read_events,
    )

__all__ = [
    "Agent",
    "AgentFactory",
    "Backend",
    "EnsemblePolicy",
    "EnvFactory",
    "Evaluate",
    "HistoryRecord",
    "Leaderboard",
    "LeaderboardEntry",
    "LocalBackend",
    "PodAgent",
    "PodracerError",
    "Policy",
    "PopulationBackend",
    "RoundStats",
    "SnapshotError",
    "TensorVectorEnv",
    "Tournament",
    "TournamentConfig",
    "TournamentError",
    "TournamentEvent",
    "TournamentResult",
    "read_events",
]


def __getattr__(name: str) -> Any:
    """``podracer.Tournament`` and the rest of :data:`__all__`, from :mod:`podracer.api` when first asked."""
    if name in __all__:
        return getattr(importlib.import_module("podracer.api"), name)
    raise AttributeError(f"module 'podracer' has no attribute {name!r}")
