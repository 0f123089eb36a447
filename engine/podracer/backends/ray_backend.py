"""The Ray backend: pod rounds run on Ray actors, on a laptop, a cluster, or Kubernetes (KubeRay).

Each actor (a *pod worker*) holds one pod's agent and env on its device (CPU cores, or a GPU
fraction with ``gpus_per_pod``) and keeps them between that pod's rounds, so a pod's env runs on
where it was. The orchestrator stays where it was started and keeps everything durable (leaderboard,
snapshots, budget, events) on storage it owns; workers hold nothing that cannot be rebuilt.

What travels:

* the application's code, once per tournament: ``(agent_factory, env_factory, evaluate)`` is put in
  the object store and cached by each worker (Ray pickles functions; that is how code reaches it);
* the pod's agent state, as tensors: ``state_dict`` bytes written by ``torch.save`` and read back
  with ``torch.load(weights_only=True)`` (:func:`pack_state`, :func:`unpack_state`), so an arbitrary
  pickled object is refused on either side. A worker gets the state only when it does not hold the
  pod's current one already (a new or restored pod, or a pod that moved worker) and returns the
  trained state after every round; :meth:`RayBackend.submit` loads it into ``task.pod.agent`` before
  the round's future resolves, so the orchestrator's snapshots and leaderboard see every round.

Elasticity: :meth:`RayBackend.slots` counts, over the cluster's live nodes, the pod workers each can
host (``floor(node CPUs / cpus_per_pod)``, and GPUs alike), so the pool grows when a node joins and
shrinks when one leaves. Failures: a worker that dies mid-round (its node lost, out of memory,
killed) fails that round with :class:`WorkerLostError`; the orchestrator counts it as a crashed round
and restores the pod from its last snapshot on a new worker, which Ray places on a live node.

Loopback by default: importing this module sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` unless it is
set already (before Ray is imported), so a Ray started here (:func:`connect` with no address) binds
127.0.0.1 only, without the dashboard; it also sets ``RAY_USAGE_STATS_ENABLED=0`` unless set (no usage
report leaves the machine). Connecting to an existing cluster needs the same
``RAY_AUTH_MODE`` (and token, ``RAY_AUTH_TOKEN``) as every process of that cluster.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import math
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

if "ray" not in sys.modules:  # must precede Ray's import: its constants read them once
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray
import ray.exceptions
import torch

from podracer.backends.base import RoundTask
from podracer.errors import SnapshotError, TournamentError
from podracer.pod import AgentFactory, EnvFactory, Evaluate, Pod, RoundResult, run_round

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
"""Address a Ray started by :func:`connect` binds."""
CONNECT_TIMEOUT_S = 5.0
"""How long :func:`connect` waits for a cluster's head to accept a connection, seconds."""
EMPTY_CLUSTER_GRACE_S = 5.0
"""How long :meth:`RayBackend.slots` re-reads a cluster that shows no room before reporting 0, seconds."""
RESOURCE_EPSILON = 1e-9
"""Slack on resource division (Ray reports fractional resources as floats)."""


class WorkerLostError(TournamentError):
    """A pod worker died mid-round (node lost, out of memory, killed); the round's work is lost."""


def pack_state(state: Mapping[str, Any]) -> bytes:
    """An agent ``state_dict`` (tensors and plain values) as ``torch.save`` bytes."""
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    return buffer.getvalue()


def unpack_state(data: bytes) -> dict[str, Any]:
    """Read :func:`pack_state` bytes with ``torch.load(weights_only=True)`` onto the CPU.

    Raises:
        SnapshotError: the bytes hold anything but tensors and plain values (a pickled object).
    """
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise SnapshotError(
            f"an agent state from a pod worker is not tensors and plain values ({type(exc).__name__}); "
            "refusing to unpickle it"
        ) from None
    if not isinstance(state, dict):
        raise SnapshotError(f"an agent state from a pod worker is a {type(state).__name__}, not a dict")
    return state


def connect(address: str | None = None, *, include_dashboard: bool = False) -> bool:
    """Connect this process to Ray, or start a single-node Ray bound to 127.0.0.1.

    Args:
        address: ``None`` starts a local Ray (loopback only); ``"auto"`` joins the cluster this
            machine belongs to (started with ``ray start``); ``"host:port"`` joins that head's GCS.
        include_dashboard: start Ray's dashboard too (local start only).

    Returns:
        Whether this call started or joined Ray (``False``: it was connected already); the caller
        that gets ``True`` owns the connection and ends it with ``ray.shutdown()``.

    Raises:
        TournamentError: Ray cannot be reached, or a local start would bind a non-loopback address.
    """
    if ray.is_initialized():
        return False
    from ray._private import ray_constants

    try:
        if address is None:
            if ray_constants.ENABLE_RAY_CLUSTER:
                raise TournamentError(
                    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1 would make a local Ray bind a public address; "
                    "unset it, or start a cluster with `ray start --head` and pass its address"
                )
            ray.init(
                address="local",
                _node_ip_address=LOOPBACK,
                include_dashboard=include_dashboard,
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
        else:
            _check_reachable(address)
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except TournamentError:
        raise
    except Exception as exc:
        where = "a local Ray" if address is None else f"the Ray cluster at {address!r}"
        raise TournamentError(
            f"cannot start or join {where} ({type(exc).__name__}: {exc}); check the address and that "
            "RAY_AUTH_MODE / RAY_AUTH_TOKEN match the cluster's"
        ) from None
    return True


def _check_reachable(address: str) -> None:
    """Fail fast when a ``host:port`` address accepts no connection (``ray.init`` retries for minutes).

    Raises:
        ConnectionError: nothing listens there within :data:`CONNECT_TIMEOUT_S`.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "ray://...", or a name Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or exc})") from None


class PodWorker:
    """A Ray actor that runs rounds of the pod it holds (its agent and env stay between rounds).

    Args:
        torch_threads: torch intra-op threads of this worker (its CPU share).
    """

    def __init__(self, torch_threads: int) -> None:
        """See the class docstring."""
        torch.set_num_threads(torch_threads)
        self._code_key: str | None = None
        self._code: tuple[AgentFactory, EnvFactory, Evaluate] | None = None
        self._incarnation: int | None = None
        self._pod: Pod | None = None

    def where(self) -> dict[str, Any]:
        """``pid`` and ``node_id`` of this worker."""
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def run_round(
        self,
        code: list[Any],
        incarnation: int,
        pod_id: int,
        agent_config: Any,
        seed: int,
        train_rounds: int,
        state: bytes | None,
    ) -> tuple[dict[str, Any], bytes]:
        """Run one round of pod ``incarnation``; returns the :class:`RoundResult` fields and the new state.

        Args:
            code: ``[ObjectRef]`` of ``(agent_factory, env_factory, evaluate)`` (boxed: fetched once).
            incarnation: the backend's id of this pod object; a new one builds a new agent and env.
            pod_id: the pod's id (for messages).
            agent_config: the pod's hyper-parameters.
            seed: the pod's seed (its agent's and env's).
            train_rounds: agent rounds before the evaluation.
            state: :func:`pack_state` bytes of the agent to start from; ``None`` to continue with the
                agent this worker holds (only for the incarnation it holds).
        """
        key = code[0].hex()
        if key != self._code_key:
            self._code = ray.get(code[0])
            self._code_key = key
        assert self._code is not None
        agent_factory, env_factory, evaluate = self._code
        if incarnation != self._incarnation or self._pod is None:
            if state is None:
                raise TournamentError(
                    f"pod worker holds no agent for pod {pod_id}; the backend must send one"
                )
            self._incarnation, self._pod = None, None
            agent = agent_factory(agent_config, seed)
            agent.load_state_dict(unpack_state(state))
            self._pod = Pod(
                pod_id=pod_id,
                parent_id=None,
                lineage_id=pod_id,
                generation=0,
                seed=seed,
                agent_config=agent_config,
                agent=agent,
                env=env_factory(seed),
                policy_version=0,
                env_steps=0,
            )
            self._incarnation = incarnation
        elif state is not None:
            self._pod.agent.load_state_dict(unpack_state(state))
        pod = self._pod
        try:
            result = run_round(pod, train_rounds, evaluate)
        except BaseException:
            self._incarnation, self._pod = None, None  # half-trained: rebuild from the orchestrator's state
            raise
        return asdict(result), pack_state(pod.agent.state_dict())


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


class RayBackend:
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
        if not (math.isfinite(cpus_per_pod) and cpus_per_pod > 0):
            raise TournamentError(f"cpus_per_pod is {cpus_per_pod}; use a number of CPUs > 0, e.g. 1")
        if not (math.isfinite(gpus_per_pod) and gpus_per_pod >= 0):
            raise TournamentError(f"gpus_per_pod is {gpus_per_pod}; use 0 (CPU pods) or a GPU share > 0")
        if max_slots is not None and max_slots < 1:
            raise TournamentError(f"max_slots is {max_slots}; use at least 1 or None")
        self.cpus_per_pod = cpus_per_pod
        self.gpus_per_pod = gpus_per_pod
        self.max_slots = max_slots
        self._owns_ray = connect(address)
        self._actor_class = ray.remote(PodWorker).options(
            num_cpus=cpus_per_pod, num_gpus=gpus_per_pod, max_restarts=0, max_task_retries=0
        )
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._incarnations = itertools.count()
        self._code: tuple[tuple[Any, ...], Any] | None = None
        self._pending: set[Future[Any]] = set()

    # ------------------------------------------------------------------ capacity

    def slots(self) -> int:
        """Pod workers the cluster's live nodes can host now (capped by ``max_slots``).

        A cluster that reads as empty is read again for up to :data:`EMPTY_CLUSTER_GRACE_S` (a node
        table caught mid-update must not end a tournament, which stops at 0 slots).
        """
        deadline = time.monotonic() + EMPTY_CLUSTER_GRACE_S
        while True:
            alive = [node for node in ray.nodes() if node.get("Alive")]
            total = sum(self._capacity(node.get("Resources", {})) for node in alive)
            if total > 0 or time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        slots = total if self.max_slots is None else min(total, self.max_slots)
        self._prune({str(node["NodeID"]) for node in alive}, slots)
        return slots

    def _capacity(self, resources: Mapping[str, float]) -> int:
        capacity = math.floor(resources.get("CPU", 0.0) / self.cpus_per_pod + RESOURCE_EPSILON)
        if self.gpus_per_pod > 0:
            capacity = min(
                capacity, math.floor(resources.get("GPU", 0.0) / self.gpus_per_pod + RESOURCE_EPSILON)
            )
        return capacity

    def _prune(self, alive_nodes: set[str], slots: int) -> None:
        """Forget idle workers on dead nodes; stop the least recently used idle ones beyond ``slots``.

        A worker on a dead node died with it and is only forgotten: ``ray.kill`` waits for the GCS to
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
            surplus = idle[: max(0, len(self._workers) - len(gone) - slots)]
            for worker in gone:
                self._workers.remove(worker)
            for worker in surplus:
                self._workers.remove(worker)
                ray.kill(worker.actor, no_restart=True)

    def _locate(self) -> None:
        """Fill in pid and node of started workers (non-blocking)."""
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
        ref = worker.actor.run_round.remote(
            [code], worker.incarnation, pod.pod_id, pod.agent_config, pod.seed, task.train_rounds, state
        )
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

    def _code_ref(self, task: RoundTask) -> Any:
        """The object-store copy of the task's factories (put once per distinct set of them)."""
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
        if not outer.set_running_or_notify_cancel():
            return
        if isinstance(outcome, RoundResult):
            outer.set_result(outcome)
        else:
            outer.set_exception(outcome)

    def shutdown(self) -> None:
        """Wait for running rounds, stop every pod worker, and leave Ray if this backend joined it."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            with contextlib.suppress(CancelledError):  # cancelled: nothing to wait for
                future.exception()
        with self._lock:
            workers, self._workers = self._workers, []
            self._code = None
        alive = {str(node["NodeID"]) for node in ray.nodes() if node.get("Alive")}
        for worker in workers:
            if worker.node_id is None or worker.node_id in alive:  # see _prune: never kill on a dead node
                ray.kill(worker.actor, no_restart=True)
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def _alive(ref: weakref.ref[Pod] | None) -> Pod | None:
    return None if ref is None else ref()
