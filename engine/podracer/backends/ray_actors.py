"""What both Ray backends do with their actors (driver side): read the cluster's room, find where
each actor runs, drop the ones on dead nodes or beyond need, put the application's code in the
object store once, and stop them.

:class:`~podracer.backends.ray_backend.RayBackend` (a pod an actor) and
:class:`~podracer.backends.ray_population.RayPopulationBackend` (a population an actor) share it;
each keeps its own record of what an actor holds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from typing import Any, Protocol

# First: importing ray_cluster sets Ray's environment, which Ray reads once when it is imported.
from podracer.backends.ray_cluster import connect

# isort: split
import ray
import ray.exceptions

from podracer.backends.base import RoundTask
from podracer.errors import TournamentError

EMPTY_CLUSTER_GRACE_S = 5.0
"""How long a cluster that shows no room is read again before it counts as empty, seconds."""
RESOURCE_EPSILON = 1e-9
"""Slack on resource division (Ray reports fractional resources as floats)."""


def check_reservation(cpus_per_pod: float, gpus_per_pod: float, max_slots: int | None) -> None:
    """Refuse a pod's CPU or GPU reservation, or a pool cap, that no Ray backend can use.

    Raises:
        TournamentError: naming the setting and what to use.
    """
    if not (math.isfinite(cpus_per_pod) and cpus_per_pod > 0):
        raise TournamentError(f"cpus_per_pod is {cpus_per_pod}; use a number of CPUs > 0, e.g. 1")
    if not (math.isfinite(gpus_per_pod) and gpus_per_pod >= 0):
        raise TournamentError(f"gpus_per_pod is {gpus_per_pod}; use 0 (CPU pods) or a GPU share > 0")
    if max_slots is not None and max_slots < 1:
        raise TournamentError(f"max_slots is {max_slots}; use at least 1 or None")


class Actor(Protocol):
    """The fields of a backend's record of one actor that :class:`ActorPool` reads and writes."""

    actor: Any
    where_ref: Any
    busy: bool
    last_used: float
    node_id: str | None
    pid: int | None


class ActorPool:
    """The actors of a Ray backend (see the module docstring).

    Args:
        address: passed to :func:`~podracer.backends.ray_cluster.connect` when this process is not
            connected to Ray yet (``None``: start a local, loopback-only Ray).
        cpus: CPUs each actor reserves (> 0).
        gpus: GPUs (or a share of one) each actor reserves (>= 0).
    """

    def __init__(self, address: str | None, cpus: float, gpus: float) -> None:
        """See the class docstring."""
        self._actor_cpus, self._actor_gpus = cpus, gpus
        self._owns_ray = connect(address)
        self._lock = threading.Lock()
        self._workers: list[Any] = []
        self._code: tuple[tuple[Any, ...], Any] | None = None

    def _room(self) -> tuple[int, set[str]]:
        """Actors the cluster's live nodes can host now, and those nodes' ids; a cluster that reads
        as empty is read again for up to :data:`EMPTY_CLUSTER_GRACE_S` (a node table caught
        mid-update must not end a tournament, which stops at 0 slots)."""
        deadline = time.monotonic() + EMPTY_CLUSTER_GRACE_S
        while True:
            alive = [node for node in ray.nodes() if node.get("Alive")]
            total = sum(self._capacity(node.get("Resources", {})) for node in alive)
            if total > 0 or time.monotonic() >= deadline:
                return total, {str(node["NodeID"]) for node in alive}
            time.sleep(0.25)

    def _capacity(self, resources: Mapping[str, float]) -> int:
        """Actors a node with ``resources`` can host."""
        capacity = int(resources.get("CPU", 0.0) / self._actor_cpus + RESOURCE_EPSILON)
        if self._actor_gpus > 0:
            capacity = min(capacity, int(resources.get("GPU", 0.0) / self._actor_gpus + RESOURCE_EPSILON))
        return capacity

    def _prune(self, alive_nodes: set[str], keep: int) -> None:
        """Forget idle actors on dead nodes; stop the least recently used idle ones beyond ``keep``.

        An actor on a dead node died with it and is only forgotten: ``ray.kill`` waits for the GCS to
        answer, and for an actor of a removed node it was seen to wait forever (the tournament hung in
        ``slots()``, where no signal reaches it).
        """
        with self._lock:
            self._locate()
            gone = [
                w
                for w in self._workers
                if not w.busy and w.node_id is not None and w.node_id not in alive_nodes
            ]
            idle = sorted(
                (w for w in self._workers if not w.busy and w not in gone), key=lambda w: w.last_used
            )
            surplus = idle[: max(0, len(self._workers) - len(gone) - keep)]
            for worker in gone:
                self._workers.remove(worker)
            for worker in surplus:
                self._workers.remove(worker)
                ray.kill(worker.actor, no_restart=True)

    def _locate(self) -> None:
        """Fill in pid and node of started actors (non-blocking; called under the lock)."""
        waiting = [w for w in self._workers if w.node_id is None]
        if not waiting:
            return
        ready, _ = ray.wait([w.where_ref for w in waiting], num_returns=len(waiting), timeout=0)
        ready_ids = {ref.hex() for ref in ready}
        for worker in waiting:
            if worker.where_ref.hex() in ready_ids:
                try:
                    where = ray.get(worker.where_ref)
                except ray.exceptions.RayError:
                    continue
                worker.pid, worker.node_id = int(where["pid"]), str(where["node_id"])

    def _code_ref(self, task: RoundTask) -> Any:
        """The object-store copy of the task's factories (put once per distinct set of them).

        Raises:
            TournamentError: they cannot be pickled.
        """
        code = (task.agent_factory, task.env_factory, task.evaluate)
        with self._lock:
            if self._code is not None and all(a is b for a, b in zip(self._code[0], code, strict=True)):
                return self._code[1]
        try:
            ref = ray.put(code)
        except Exception as exc:
            raise TournamentError(
                f"the agent factory, env factory or evaluate function cannot be sent to Ray workers "
                f"({type(exc).__name__}: {exc}); make them picklable (module-level functions, or "
                "closures over tensors and plain values)"
            ) from None
        with self._lock:
            self._code = (code, ref)
        return ref

    def _stop(self) -> None:
        """Stop every actor (never one on a dead node, see :meth:`_prune`), and leave Ray if this
        backend joined it."""
        with self._lock:
            workers, self._workers = self._workers, []
            self._code = None
        alive = {str(node["NodeID"]) for node in ray.nodes() if node.get("Alive")}
        for worker in workers:
            if worker.node_id is None or worker.node_id in alive:
                ray.kill(worker.actor, no_restart=True)
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


__all__ = ["EMPTY_CLUSTER_GRACE_S", "RESOURCE_EPSILON", "Actor", "ActorPool", "check_reservation"]
