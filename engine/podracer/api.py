"""The engine's public face: everything an application needs from podracer, in one module.

An application (finpod) imports podracer only from here (``tests/test_import_graph.py`` checks it),
so the engine's modules can be split and moved behind this face without touching the application.
The engine's own modules never import this one: they import each other (the protocols from
:mod:`podracer.protocols`), so the face sits above the whole engine and closes no import circle.

What is here:

* the seams (:mod:`podracer.protocols`): :class:`TensorVectorEnv`, :class:`Agent`, :data:`Policy`,
  :class:`RoundStats`, :func:`deterministic_policy`, :class:`ScoresMany`, :class:`CapturableEnv`
  (an env whose step a CUDA graph can record) and :data:`CAPTURE_LOCK` (held by whoever records a
  CUDA graph in the process);
* the tournament: :class:`Tournament`, :class:`TournamentConfig` (:func:`budget_fraction`: how
  much of its budget is spent), its events and result, the
  :class:`Leaderboard` and the run directory's files (:func:`leaderboard_of`,
  :func:`has_leaderboard`, :func:`tournament_exists`), its :class:`TrajectoryArchive`
  (:func:`archive_of`);
* where pods train: :class:`LocalBackend`, :class:`ProcessBackend` (:func:`default_start_method`:
  how its workers start here), :class:`PopulationBackend`, :func:`ray_backend` (Ray is imported only
  when it is called);
* the agent: :class:`PPOAgent`, :class:`PPOConfig`, the cross-sectional :class:`EntityLayout`, frozen
  evaluation copies (:class:`FrozenActorPolicy`, :class:`StackedActors`, :class:`RowWisePolicy`),
  learner fusion (:func:`fused_agent_factory`);
* durable writes (:func:`atomic_write_bytes`, :func:`fsync_directory`) and the errors.
"""

from __future__ import annotations

from pathlib import Path

from podracer.archive import TrajectoryArchive
from podracer.backends import Backend, LocalBackend, PopulationBackend, ProcessBackend
from podracer.backends.processes import default_start_method
from podracer.config import ArchiveRule, PoolSchedule, TournamentConfig
from podracer.cuda_capture import CAPTURE_LOCK
from podracer.ensemble import EnsemblePolicy
from podracer.entity import EntityLayout
from podracer.errors import PodracerError, SnapshotError, TournamentError
from podracer.events import HistoryRecord, TournamentEvent, TournamentResult, read_events
from podracer.frozen import FrozenActorPolicy, RowWisePolicy, StackedActors
from podracer.fusion import fused_agent_factory
from podracer.leaderboard import INDEX_NAME, Leaderboard, LeaderboardEntry
from podracer.orchestrator import Tournament
from podracer.pod import AgentFactory, EnvFactory, Evaluate, PodAgent
from podracer.ppo import PPOAgent
from podracer.ppo_config import MIN_MINIBATCH_SIZE, PPOConfig
from podracer.protocols import (
    Agent,
    CapturableEnv,
    FreezesPolicy,
    Policy,
    RoundStats,
    ScoresMany,
    TensorVectorEnv,
    deterministic_policy,
)
from podracer.runfiles import ARCHIVE_DIR, LEADERBOARD_DIR, STATE_NAME
from podracer.schedule import budget_fraction
from podracer.snapshot import atomic_write_bytes, fsync_directory

__all__ = [
    "CAPTURE_LOCK",
    "LEADERBOARD_DIR",
    "MIN_MINIBATCH_SIZE",
    "STATE_NAME",
    "Agent",
    "AgentFactory",
    "ArchiveRule",
    "Backend",
    "CapturableEnv",
    "EnsemblePolicy",
    "EntityLayout",
    "EnvFactory",
    "Evaluate",
    "FreezesPolicy",
    "FrozenActorPolicy",
    "HistoryRecord",
    "Leaderboard",
    "LeaderboardEntry",
    "LocalBackend",
    "PPOAgent",
    "PPOConfig",
    "PodAgent",
    "PodracerError",
    "Policy",
    "PoolSchedule",
    "PopulationBackend",
    "ProcessBackend",
    "RoundStats",
    "RowWisePolicy",
    "ScoresMany",
    "SnapshotError",
    "StackedActors",
    "TensorVectorEnv",
    "Tournament",
    "TournamentConfig",
    "TournamentError",
    "TournamentEvent",
    "TournamentResult",
    "TrajectoryArchive",
    "archive_of",
    "atomic_write_bytes",
    "budget_fraction",
    "default_start_method",
    "deterministic_policy",
    "fsync_directory",
    "fused_agent_factory",
    "has_leaderboard",
    "leaderboard_of",
    "ray_backend",
    "read_events",
    "tournament_exists",
]


def tournament_exists(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a tournament that :meth:`Tournament.resume` can continue (its state
    file has been written)."""
    return (run_dir / STATE_NAME).is_file()


def has_leaderboard(run_dir: Path) -> bool:
    """Whether the tournament in ``run_dir`` has made its leaderboard folder."""
    return (run_dir / LEADERBOARD_DIR).is_dir()


def leaderboard_of(run_dir: Path) -> Leaderboard:
    """The leaderboard of the tournament in ``run_dir``, read from disk (:meth:`Leaderboard.open`).

    Raises:
        SnapshotError: the tournament has no leaderboard index, or it is corrupt or foreign.
    """
    return Leaderboard.open(run_dir / LEADERBOARD_DIR)


def archive_of(run_dir: Path) -> TrajectoryArchive | None:
    """The trajectory archive of the tournament in ``run_dir`` (:meth:`TrajectoryArchive.open`), or
    ``None`` when the run keeps none (``archive_size`` 0, or a run from before archives).

    Raises:
        SnapshotError: its index is corrupt or foreign.
    """
    directory = run_dir / ARCHIVE_DIR
    return TrajectoryArchive.open(directory) if (directory / INDEX_NAME).exists() else None


def ray_backend(
    address: str | None,
    *,
    cpus_per_pod: float,
    gpus_per_pod: float,
    max_slots: int | None,
    pods_per_worker: int = 1,
) -> Backend:
    """Pods on Ray actors (:class:`podracer.backends.ray_backend.RayBackend`), or with
    ``pods_per_worker`` > 1 populations of that many pods on each actor
    (:class:`podracer.backends.ray_population.RayPopulationBackend`); Ray is imported here, on the
    call, so that importing podracer never imports Ray.

    Args:
        address: the Ray cluster to join (``"auto"`` or ``"host:port"``); ``None`` starts a private
            Ray on 127.0.0.1.
        cpus_per_pod: CPUs each pod's actor reserves (> 0).
        gpus_per_pod: share of a GPU each pod's actor reserves (>= 0).
        max_slots: cap on the pods trained at once; ``None`` follows the cluster.
        pods_per_worker: pods one actor trains in lockstep as a population (1: a pod an actor).

    Raises:
        TournamentError: a bad reservation, or Ray cannot be reached.
    """
    if pods_per_worker > 1:
        from podracer.backends.ray_population import RayPopulationBackend

        return RayPopulationBackend(
            address,
            pods_per_worker=pods_per_worker,
            cpus_per_pod=cpus_per_pod,
            gpus_per_pod=gpus_per_pod,
            max_slots=max_slots,
        )
    from podracer.backends.ray_backend import RayBackend

    return RayBackend(address, cpus_per_pod=cpus_per_pod, gpus_per_pod=gpus_per_pod, max_slots=max_slots)
