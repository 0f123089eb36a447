"""Populations on Ray: each Ray actor trains up to ``pods_per_worker`` pods in lockstep, as one batched
computation on its device (Anakin on every GPU of a cluster).

:class:`RayPopulationBackend` is a lockstep backend (:class:`~podracer.backends.base.LockstepBackend`):
the orchestrator submits every ready pod's round, then calls :meth:`RayPopulationBackend.run_submitted`,
which splits the rounds into groups of at most ``pods_per_worker`` pods, sends each group to a
:class:`~podracer.backends.ray_worker.PopulationWorker` and returns when all are back. A worker
reserves ``pods_per_worker`` times ``cpus_per_pod`` CPUs and ``gpus_per_pod`` of a GPU, so
``gpus_per_pod = 1 / pods_per_worker`` puts one population on each GPU; the pool is the cluster's room
for such workers times ``pods_per_worker`` (capped by ``max_slots``), so it grows and shrinks with
the cluster as :class:`~podracer.backends.ray_backend.RayBackend`'s does.

A pod stays on the worker that holds it while it can (its agent and env are kept there between
rounds; only a new or restored pod, or one that moved, sends its state), and every trained state
comes back to the driver before the round's future resolves, so the orchestrator's snapshots,
leaderboard, exploit/explore and resume work as with the other backends. A worker that dies
mid-round fails the rounds of all its pods with
:class:`~podracer.backends.pod_host.WorkerLostError`; the orchestrator restores them from their
snapshots on another worker. A failure that fails a whole group reaches the orchestrator as one
exception shared by its pods, so it counts once towards ``max_consecutive_crashes``. Each pod's
numbers are those it would have in the driver's own population
(:class:`~podracer.backends.population.PopulationBackend`: a pod's slice of a batched computation
does not depend on the others), whichever group it trains in, as long as it stays on its worker: a
pod that moves (its worker stopped as the cluster shrank) starts a fresh env on the next, as with
:class:`~podracer.backends.ray_backend.RayBackend`. ``pods_per_worker`` is capped at ``max_slots``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

# First: importing ray_cluster sets Ray's environment, which Ray reads once when it is imported.
from podracer.backends import ray_cluster  # noqa: F401

# isort: split
import ray
import ray.exceptions

from podracer.backends.base import RoundTask, settle
from podracer.backends.pod_host import WorkerLostError, pack_state, unpack_state
from podracer.backends.population_host import pod_round
from podracer.backends.ray_actors import RESOURCE_EPSILON, ActorPool, check_reservation
from podracer.backends.ray_worker import PopulationWorker
from podracer.errors import TournamentError
from podracer.pod import Pod, RoundResult

T = TypeVar("T")


@dataclass(eq=False)
class _Held:
    """A pod a worker holds: the driver's pod object, its incarnation, its agent's env steps then."""

    pod_ref: weakref.ref[Pod]
    incarnation: int
    agent_env_steps: int


@dataclass(eq=False)
class _Worker:
    actor: Any
    where_ref: Any
    held: dict[int, _Held] = field(default_factory=dict)
    busy: bool = False
    last_used: float = field(default_factory=time.monotonic)
    node_id: str | None = None
    pid: int | None = None

    def holds(self, pod: Pod) -> bool:
        """Whether this worker holds ``pod``'s current agent (no state needs to travel)."""
        held = self.held.get(pod.pod_id)
        return held is not None and held.pod_ref() is pod and held.agent_env_steps == pod.agent.env_steps


@dataclass(frozen=True)
class PopulationWorkerInfo:
    """A population worker as :meth:`RayPopulationBackend.workers` reports it.

    Attributes:
        pid: its process id on its node (``None`` until the actor has started).
        node_id: the Ray node it runs on (``None`` until started).
        busy: a population round is running on it.
        pod_ids: the pods whose agents and envs it holds.
    """

    pid: int | None
    node_id: str | None
    busy: bool
    pod_ids: tuple[int, ...]


class RayPopulationBackend(ActorPool):
    """Trains the pool as populations on Ray actors; see the module docstring.

    Args:
        address: passed to :func:`~podracer.backends.ray_cluster.connect` when this process is not
            connected to Ray yet (``None``: start a local, loopback-only Ray).
        pods_per_worker: most pods one worker trains as a population (>= 1).
        cpus_per_pod: CPUs each pod reserves on its worker (> 0); a worker's torch thread count is
            its reservation, rounded (at least 1).
        gpus_per_pod: GPU share each pod reserves (>= 0); ``1 / pods_per_worker`` is one
            population a GPU.
        max_slots: cap on the pool size, or ``None`` to follow the cluster alone.

    Raises:
        TournamentError: a bad setting, or Ray cannot be reached.
    """

    lockstep = True
    """The orchestrator runs the pool in lockstep here: it submits all, then calls :meth:`run_submitted`."""

    def __init__(
        self,
        address: str | None = None,
        *,
        pods_per_worker: int,
        cpus_per_pod: float = 1.0,
        gpus_per_pod: float = 0.0,
        max_slots: int | None = None,
    ) -> None:
        """See the class docstring."""
        if pods_per_worker < 1:
            raise TournamentError(f"pods_per_worker is {pods_per_worker}; use at least 1")
        check_reservation(cpus_per_pod, gpus_per_pod, max_slots)
        # a population never needs more room than the pool: an actor of 8 pods' CPUs for a pool of
        # 4 could find no node to fit on
        self.pods_per_worker = pods_per_worker if max_slots is None else min(pods_per_worker, max_slots)
        if gpus_per_pod * self.pods_per_worker > 1.0 + RESOURCE_EPSILON:
            raise TournamentError(
                f"gpus_per_pod {gpus_per_pod} x pods_per_worker {self.pods_per_worker} is more than one "
                f"GPU for one worker; use gpus_per_pod <= {1.0 / self.pods_per_worker:g}"
            )
        self.cpus_per_worker = cpus_per_pod * self.pods_per_worker
        self.gpus_per_worker = gpus_per_pod * self.pods_per_worker
        self.max_slots = max_slots
        super().__init__(address, self.cpus_per_worker, self.gpus_per_worker)
        self._actor_class = ray.remote(PopulationWorker).options(
            num_cpus=self.cpus_per_worker,
            num_gpus=self.gpus_per_worker,
            max_restarts=0,
            max_task_retries=0,
        )
        self._incarnations = itertools.count()
        self._submitted: list[tuple[RoundTask, Future[Any]]] = []

    # ------------------------------------------------------------------ capacity

    def slots(self) -> int:
        """Pods the cluster's live nodes can train now: its room for population workers times
        ``pods_per_worker`` (capped by ``max_slots``); an empty-looking cluster is read again for
        up to :data:`~podracer.backends.ray_actors.EMPTY_CLUSTER_GRACE_S`."""
        workers, alive = self._room()
        pods = workers * self.pods_per_worker
        slots = pods if self.max_slots is None else min(pods, self.max_slots)
        self._prune(alive, math.ceil(slots / self.pods_per_worker))
        return slots

    def workers(self) -> list[PopulationWorkerInfo]:
        """The population workers this backend holds now (their pids once started)."""
        with self._lock:
            self._locate()
            return [
                PopulationWorkerInfo(w.pid, w.node_id, w.busy, tuple(sorted(w.held))) for w in self._workers
            ]

    # ------------------------------------------------------------------ rounds

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Queue a :class:`~podracer.backends.RoundTask` until :meth:`run_submitted`; its future
        resolves after the trained state is loaded into ``task.pod.agent``.

        Raises:
            TournamentError: ``task`` is not a ``RoundTask`` (Ray runs pod rounds only).
        """
        if not isinstance(task, RoundTask):
            raise TournamentError(
                f"RayPopulationBackend runs the orchestrator's RoundTask objects only, got "
                f"{type(task).__name__}; use LocalBackend for arbitrary callables"
            )
        future: Future[T] = Future()
        self._submitted.append((task, future))
        return future

    def run_submitted(self) -> None:
        """Run every queued round: groups of at most ``pods_per_worker`` pods, one per worker, all at
        once; returns when every round's future is resolved.

        Raises:
            TournamentError: the tournament's factories cannot be sent to the workers.
        """
        submitted, self._submitted = self._submitted, []
        submitted = [(task, future) for task, future in submitted if not future.cancelled()]
        if not submitted:
            return
        try:
            code = self._code_ref(submitted[0][0])
        except BaseException as error:  # nothing was sent: the rounds fail, the error ends the run
            for _, future in submitted:
                settle(future, error)
            raise
        with self._lock:
            groups = self._assign(submitted)
        sent = []
        for worker, members in groups:
            try:
                sent.append((worker, members, self._send(code, worker, members)))
            except BaseException as error:  # a state that does not encode: the group's rounds crashed
                self._settle_group(worker, members, [error] * len(members))
        for worker, members, reply in sent:
            self._finish(worker, members, reply)

    def _assign(
        self, submitted: list[tuple[RoundTask, Future[Any]]]
    ) -> list[tuple[_Worker, list[tuple[RoundTask, Future[Any]]]]]:
        """Split the rounds into groups of at most ``pods_per_worker``, each on a worker: a pod goes
        to the idle worker that holds it where there is room, the rest fill the other idle workers,
        least recently used first, and new workers as needed (called under the lock)."""
        size = self.pods_per_worker
        idle = sorted((w for w in self._workers if not w.busy), key=lambda w: w.last_used)
        needed = math.ceil(len(submitted) / size)
        while len(idle) < needed:
            actor: Any = self._actor_class.remote(max(1, round(self.cpus_per_worker)))
            worker = _Worker(actor=actor, where_ref=actor.where.remote())
            self._workers.append(worker)
            idle.append(worker)
        chosen: dict[int, list[tuple[RoundTask, Future[Any]]]] = {id(w): [] for w in idle}
        unplaced = []
        for task, future in submitted:
            home = next((w for w in idle if _holds_object(w, task.pod)), None)
            if home is not None and len(chosen[id(home)]) < size:
                chosen[id(home)].append((task, future))
            else:
                unplaced.append((task, future))
        for item in unplaced:  # the emptiest group first: the pods spread over the idle workers
            worker = min((w for w in idle if len(chosen[id(w)]) < size), key=lambda w: len(chosen[id(w)]))
            chosen[id(worker)].append(item)
        groups = [(w, chosen[id(w)]) for w in idle if chosen[id(w)]]
        for worker, _ in groups:
            worker.busy = True
        return groups

    def _send(self, code: Any, worker: _Worker, members: list[tuple[RoundTask, Future[Any]]]) -> Any:
        """Start the group's population round on ``worker``; the reply's object ref."""
        rounds = []
        with self._lock:
            for task, _ in members:
                pod = task.pod
                if worker.holds(pod):
                    held, state = worker.held[pod.pod_id], None
                else:
                    held = _Held(weakref.ref(pod), next(self._incarnations), -1)
                    worker.held[pod.pod_id] = held
                    state = pack_state(pod.agent.state_dict())
                rounds.append(tuple(pod_round(task, held.incarnation, state)))
        return worker.actor.run_rounds.remote([code], rounds)

    def _finish(self, worker: _Worker, members: list[tuple[RoundTask, Future[Any]]], reply: Any) -> None:
        """Wait for a group's reply; load each trained state and resolve each pod's future."""
        outcomes: list[Any]
        try:
            outcomes = list(ray.get(reply))
        except ray.exceptions.RayTaskError as exc:  # the population round itself raised: all crashed
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            outcomes = [cause] * len(members)
        except ray.exceptions.RayError as exc:  # the worker is gone, with the agents it held
            if not isinstance(exc, ray.exceptions.RayActorError):  # a lost reply, the actor alive
                with contextlib.suppress(Exception):  # free its reservation for a new worker
                    ray.kill(worker.actor, no_restart=True)
            lost = WorkerLostError(
                f"the population worker (pid {worker.pid}) of pods "
                f"{', '.join(str(task.pod.pod_id) for task, _ in members)} died mid-round (node lost, "
                f"out of memory or killed): {type(exc).__name__}"
            )
            outcomes = [lost] * len(members)
        results: list[RoundResult | BaseException] = []
        for (task, _), outcome in zip(members, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                results.append(outcome)
                continue
            try:
                fields, state = outcome
                task.pod.agent.load_state_dict(unpack_state(state))
                results.append(RoundResult(**fields))
            except BaseException as exc:  # a state that does not load: a crashed round too
                results.append(exc)
        self._settle_group(worker, members, results)

    def _settle_group(
        self,
        worker: _Worker,
        members: list[tuple[RoundTask, Future[Any]]],
        results: list[RoundResult | BaseException],
    ) -> None:
        """Free ``worker``, keep what it now holds, and resolve each member's future."""
        with self._lock:
            worker.busy = False
            worker.last_used = time.monotonic()
            for (task, _), result in zip(members, results, strict=True):
                held = worker.held.get(task.pod.pod_id)
                if isinstance(result, RoundResult) and held is not None:
                    held.agent_env_steps = task.pod.agent.env_steps
                else:
                    worker.held.pop(task.pod.pod_id, None)
            placed = {task.pod.pod_id for task, _ in members}
            worker.held = {pod_id: held for pod_id, held in worker.held.items() if pod_id in placed}
            if any(isinstance(result, WorkerLostError) for result in results) and worker in self._workers:
                self._workers.remove(worker)
        for (_, future), result in zip(members, results, strict=True):
            settle(future, result)

    def shutdown(self) -> None:
        """Stop every population worker (rounds are never in flight between calls), and leave Ray
        if this backend joined it."""
        self._stop()


def _holds_object(worker: _Worker, pod: Pod) -> bool:
    """Whether ``worker`` holds ``pod``'s object (its agent's state may still need to travel)."""
    held = worker.held.get(pod.pod_id)
    return held is not None and held.pod_ref() is pod


__all__ = ["PopulationWorkerInfo", "RayPopulationBackend"]
