"""podracer: an asynchronous, elastic tournament of RL agents ("pods").

Domain-free: it knows tensors, envs, scores and snapshots, nothing about markets. It imports no
pandas, no finpod and no broker client, and ``tests/engine/test_domain_free.py`` proves it.

The package re-exports the most used names of its public face, :mod:`podracer.api`; an application
imports from ``podracer.api`` itself.
"""

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
