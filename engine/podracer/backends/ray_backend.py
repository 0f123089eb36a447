"""The Ray backend: pod rounds run on Ray actors, on a laptop, a cluster, or Kubernetes (KubeRay).

Each actor (a *pod worker*) holds one pod's agent and env on its device (CPU cores, or a GPU
fraction with ``gpus_per_pod``) and keeps them between that pod's rounds, so a pod's env runs on
where it was. The orchestrator stays where it was started and keeps everything durable (leaderboard,
snapshots, budget, events) on storage it owns; workers hold nothing that cannot be rebuilt.

What travels:

* the application's code, once per tournament: ``(agent_factory, env_factory, evaluate)`` is put in
  the object store and cached by each worker (Ray pickles functions; that is how code reaches it);
* the pod's agent state, as tensors and plain values: one flat buffer of the tensors' bytes and a
  header that names no class (:func:`pack_state`, :func:`unpack_state`, :mod:`podracer.state_codec`),
  so an arbitrary pickled object is refused on either side. A worker gets the state only when it
  does not hold the pod's current one already (a new or restored pod, or a pod that moved worker)
  and returns the trained state after every round; :meth:`RayBackend.submit` loads it into
  ``task.pod.agent`` before the round's future resolves, so the orchestrator's snapshots and
  leaderboard see every round.

Elasticity: :meth:`RayBackend.slots` counts, over the cluster's live nodes, the pod workers each can
host (``floor(node CPUs / cpus_per_pod)``, and GPUs alike), so the pool grows when a node joins and
shrinks when one leaves. Failures: a worker that dies mid-round (its node lost, out of memory,
killed) fails that round with :class:`WorkerLostError`; the orchestrator counts it as a crashed round
and restores the pod from its last snapshot on a new worker, which Ray places on a live node.

Loopback by default: a Ray started here binds 127.0.0.1 only, without the dashboard, and sends no
usage report (:mod:`podracer.backends.ray_cluster`, imported before Ray). Connecting to an existing
cluster needs the same ``RAY_AUTH_MODE`` (and token, ``RAY_AUTH_TOKEN``) as every process of that
cluster.

This module is the driver (:class:`RayBackend`, in the tournament's process); the actor is in
:mod:`podracer.backends.ray_worker`, reaching Ray in :mod:`podracer.backends.ray_cluster`. Their
names are re-exported here.
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

# First: importing ray_cluster sets Ray's environment, which Ray reads once when it is imported.
from podracer.backends.ray_cluster import CONNECT_TIMEOUT_S, LOOPBACK, connect

# isort: split
import ray
import ray.exceptions

from podracer.backends.base import RoundTask, settle, wait_all
from podracer.backends.pod_host import round_arguments
from podracer.backends.ray_actors import EMPTY_CLUSTER_GRACE_S, RESOURCE_EPSILON, ActorPool, check_reservation
from podracer.backends.ray_worker import PodWorker, WorkerLostError, pack_state, unpack_state
from podracer.errors import TournamentError
from podracer.pod import Pod, RoundResult

__all__ = [
    "CONNECT_TIMEOUT_S",
    "EMPTY_CLUSTER_GRACE_S",
    "LOOPBACK",
    "RESOURCE_EPSILON",
    "PodWorker",
    "RayBackend",
    "WorkerInfo",
    "WorkerLostError",
    "connect",
    "pack_state",
    "unpack_state",
]

T = TypeVar("T")


@dataclass(eq=False)
class _Worker:
    actor: Any
    where_ref: Any
    incarnation: int = -1
    pod_ref: weakref.ref[Pod] | None = None
    agent_env_steps: int = -1
    busy: bool = False
    last_used: float = field(default_factory=time.monotonic)
    node_id: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class WorkerInfo:
    """A pod worker as :meth:`RayBackend.workers` reports it.

    Attributes:
        pid: its process id on its node (``None`` until the actor has started).
        node_id: the Ray node it runs on (``None`` until started).
        busy: a round is running on it.
        pod_id: the pod whose agent and env it holds, if any.
    """

    pid: int | None
    node_id: str | None
    busy: bool
    pod_id: int | None


class RayBackend(ActorPool):
    """Runs pod rounds on Ray actors; see the module docstring.

    Args:
        address: passed to :func:`connect` when this process is not connected to Ray yet (``None``:
            start a local, loopback-only Ray); ignored when it is.
        cpus_per_pod: CPUs each pod worker reserves (> 0); also its torch thread count (rounded).
        gpus_per_pod: GPUs (or a fraction of one) each pod worker reserves (>= 0); give one when the
            agent and env factories put pods on ``cuda``.
        max_slots: cap on the pool size, or ``None`` to follow the cluster alone.

    Raises:
        TournamentError: a bad setting, or Ray cannot be reached.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        cpus_per_pod: float = 1.0,
        gpus_per_pod: float = 0.0,
        max_slots: int | None = None,
    ) -> None:
        """See the class docstring."""
        check_reservation(cpus_per_pod, gpus_per_pod, max_slots)
        self.cpus_per_pod = cpus_per_pod
        self.gpus_per_pod = gpus_per_pod
        self.max_slots = max_slots
        super().__init__(address, cpus_per_pod, gpus_per_pod)
        self._actor_class = ray.remote(PodWorker).options(
            num_cpus=cpus_per_pod, num_gpus=gpus_per_pod, max_restarts=0, max_task_retries=0
        )
        self._incarnations = itertools.count()
        self._pending: set[Future[Any]] = set()

    # ------------------------------------------------------------------ capacity

    def slots(self) -> int:
        """Pod workers the cluster's live nodes can host now (capped by ``max_slots``).

        A cluster that reads as empty is read again for up to :data:`EMPTY_CLUSTER_GRACE_S` (a node
        table caught mid-update must not end a tournament, which stops at 0 slots).
        """
        total, alive = self._room()
        slots = total if self.max_slots is None else min(total, self.max_slots)
        self._prune(alive, slots)
        return slots

    def workers(self) -> list[WorkerInfo]:
        """The pod workers this backend holds now (their pids once started)."""
        with self._lock:
            self._locate()
            return [
                WorkerInfo(
                    w.pid, w.node_id, w.busy, None if (pod := _alive(w.pod_ref)) is None else pod.pod_id
                )
                for w in self._workers
            ]

    # ------------------------------------------------------------------ rounds

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Run a :class:`~podracer.backends.RoundTask` on a pod worker; its future resolves after the
        trained state is loaded into ``task.pod.agent``.

        Raises:
            TournamentError: ``task`` is not a ``RoundTask`` (Ray runs pod rounds only), or the
                tournament's factories cannot be sent to the workers.
        """
        if not isinstance(task, RoundTask):
            raise TournamentError(
                f"RayBackend runs the orchestrator's RoundTask objects only, got {type(task).__name__}; "
                "use LocalBackend for arbitrary callables"
            )
        pod = task.pod
        code = self._code_ref(task)
        with self._lock:
            worker = self._pick(pod)
            fresh = _alive(worker.pod_ref) is not pod or worker.agent_env_steps != pod.agent.env_steps
            if fresh:
                worker.incarnation = next(self._incarnations)
                worker.pod_ref = weakref.ref(pod)
            worker.busy = True
        state = pack_state(pod.agent.state_dict()) if fresh else None
        ref = worker.actor.run_round.remote([code], *round_arguments(task, worker.incarnation, state))
        outer: Future[Any] = Future()
        with self._lock:
            self._pending.add(outer)
        ref.future().add_done_callback(lambda inner: self._finish(task, worker, inner, outer))
        return outer

    def _pick(self, pod: Pod) -> _Worker:
        """The idle worker holding ``pod``, else an idle one holding no live pod, else the least
        recently used idle one, else a new one (called under the lock)."""
        idle = [w for w in self._workers if not w.busy]
        for worker in idle:
            if _alive(worker.pod_ref) is pod:
                return worker
        free = [w for w in idle if _alive(w.pod_ref) is None]
        if free or idle:
            return min(free or idle, key=lambda w: w.last_used)
        actor: Any = self._actor_class.remote(max(1, round(self.cpus_per_pod)))
        worker = _Worker(actor=actor, where_ref=actor.where.remote())
        self._workers.append(worker)
        return worker

    def _finish(self, task: RoundTask, worker: _Worker, inner: Future[Any], outer: Future[Any]) -> None:
        """Turn a worker's reply into the round's outcome (called on a Ray thread)."""
        outcome: RoundResult | BaseException
        try:
            fields, state = inner.result()
            task.pod.agent.load_state_dict(unpack_state(state))
            outcome = RoundResult(**fields)
        except ray.exceptions.RayTaskError as exc:  # the round itself raised: the pod crashed
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            outcome = cause
        except ray.exceptions.RayError as exc:  # the worker is gone, with the agent it held
            outcome = WorkerLostError(
                f"pod {task.pod.pod_id}'s worker (pid {worker.pid}) died mid-round (node lost, out of "
                f"memory or killed): {type(exc).__name__}"
            )
        except BaseException as exc:  # a state that does not load: a crashed round too
            outcome = exc
        with self._lock:
            worker.busy = False
            worker.last_used = time.monotonic()
            if isinstance(outcome, RoundResult):
                worker.agent_env_steps = task.pod.agent.env_steps
            else:
                worker.pod_ref, worker.agent_env_steps = None, -1
            if isinstance(outcome, WorkerLostError) and worker in self._workers:
                self._workers.remove(worker)
            self._pending.discard(outer)
        settle(outer, outcome)

    def shutdown(self) -> None:
        """Wait for running rounds, stop every pod worker, and leave Ray if this backend joined it."""
        with self._lock:
            pending = list(self._pending)
        wait_all(pending)
        self._stop()


def _alive(ref: weakref.ref[Pod] | None) -> Pod | None:
    return None if ref is None else ref()
