"""podracer: an asynchronous, elastic tournament of RL agents ("pods").

Domain-free: it knows tensors, envs, scores and snapshots, nothing about markets. It imports no
pandas, no finpod and no broker client, and ``tests/engine/test_domain_free.py`` proves it.
"""

from podracer.api import Agent, Policy, RoundStats, TensorVectorEnv
from podracer.backends import Backend, LocalBackend, PopulationBackend
from podracer.config import TournamentConfig
from podracer.ensemble import EnsemblePolicy
from podracer.errors import PodracerError, SnapshotError, TournamentError
from podracer.events import HistoryRecord, TournamentEvent, TournamentResult, read_events
from podracer.leaderboard import Leaderboard, LeaderboardEntry
from podracer.orchestrator import Tournament
from podracer.pod import AgentFactory, EnvFactory, Evaluate, PodAgent

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
