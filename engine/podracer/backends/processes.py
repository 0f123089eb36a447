"""The process backend: pods as worker processes on this machine, one round at a time each.

Threads (:class:`~podracer.backends.local.LocalBackend`) share one interpreter: a pod round of small
networks is thousands of short torch calls, and the pod threads take turns holding the interpreter
between them, so on a CPU a second core adds little. Here every pod trains in its own Python process
(:mod:`podracer.backends.process_worker`, started with this interpreter), which keeps the pod's
agent and env between its rounds as a Ray actor does (:class:`~podracer.backends.pod_host.PodHost`),
and the orchestrator keeps everything durable in its own process.

What travels (over a local socket pair per worker): the application's code, ``cloudpickle`` bytes of
``(agent_factory, env_factory, evaluate)``, once per worker; a pod's agent state as tensors and plain
values only (:func:`~podracer.backends.pod_host.pack_state`: one flat buffer whose header names no
class), sent when the worker does not hold the pod's current state already and returned after every
round, loaded into ``task.pod.agent`` before the round's future resolves. A pod stays on the worker
that holds it, so its env's episode continues as in the orchestrator's process: with
``judge_order = "submission"``, the same seeds give the same leaderboard as the thread backend
(tested on the toy task).

Workers start when the backend is made, one per slot. On Linux they are forked from this process
(``start = "fork"``, the default there), so they start in milliseconds with every module this process
has imported, before the backend starts any thread of its own; elsewhere, and for a worker that
replaces a lost one, a fresh interpreter runs :mod:`podracer.backends.process_worker` (``"spawn"``:
importing torch and the application's modules, seconds per worker). A worker that dies mid-round
fails that round with :class:`~podracer.backends.pod_host.WorkerLostError`, one that dies between
rounds fails its pod's next round alike (its env's episode died with it); the orchestrator restores
the pod from its snapshot on another worker. When the driver dies, its workers read the
socket's end and exit.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Literal, Protocol, TypeVar

import cloudpickle  # type: ignore[import-untyped]
import torch

from podracer.backends import process_worker
from podracer.backends.base import RoundTask, settle, wait_all
from podracer.backends.pod_host import WorkerLostError, pack_state, round_arguments, unpack_state
from podracer.errors import TournamentError
from podracer.pod import Pod, RoundResult

T = TypeVar("T")

STOP_TIMEOUT_S = 10.0
"""How long :meth:`ProcessBackend.shutdown` waits for a worker to exit before killing it, seconds."""


StartMethod = Literal["fork", "spawn"]
"""How a worker process starts: forked from this one, or a fresh interpreter."""


def default_start_method(torch_threads_per_worker: int = 1) -> StartMethod:
    """``fork`` on Linux for workers of one torch thread; ``spawn`` elsewhere (macOS's system
    libraries are not fork-safe), for workers of several threads (OpenMP's thread pool is not
    fork-safe once this process has used it) and once this process has initialised CUDA (a forked
    child cannot use it)."""
    linux = sys.platform.startswith("linux") and hasattr(os, "fork")
    forkable = linux and torch_threads_per_worker == 1 and not torch.cuda.is_initialized()
    return "fork" if forkable else "spawn"


class _Process(Protocol):
    """What the backend needs of a worker process (``subprocess.Popen`` has it)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


class _ForkedProcess:
    """A forked child as :class:`_Process`."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._code: int | None = None

    @property
    def pid(self) -> int:
        return self._pid

    def poll(self) -> int | None:
        if self._code is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self._pid, os.WNOHANG)
                if pid == self._pid:
                    self._code = os.waitstatus_to_exitcode(status)
        return self._code

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pod worker {self._pid}", timeout or 0.0)
            time.sleep(0.01)
        return code

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, 9)


@dataclass(eq=False)
class _Worker:
    process: _Process
    connection: Connection
    code_key: int = -1
    incarnation: int = -1
    pod_ref: weakref.ref[Pod] | None = None
    agent_env_steps: int = -1
    busy: bool = False
    lost: bool = False
    last_used: float = field(default_factory=time.monotonic)
    reply: Callable[[tuple[Any, ...] | None], None] | None = None


class ProcessBackend:
    """Runs pod rounds in ``slots`` worker processes on this machine; see the module docstring.

    Args:
        slots: rounds run at once, and worker processes started (>= 1).
        torch_threads_per_worker: torch intra-op threads of each worker (>= 1).
        start: ``"fork"`` or ``"spawn"`` (see the module docstring); ``None``: :func:`default_start_method`.
        python: the interpreter a spawned worker runs (this one by default).

    Raises:
        TournamentError: a bad setting, or a worker cannot be started.
    """

    def __init__(
        self,
        slots: int,
        torch_threads_per_worker: int = 1,
        start: StartMethod | None = None,
        python: str | None = None,
    ) -> None:
        """See the class docstring."""
        if slots < 1:
            raise TournamentError(f"ProcessBackend slots is {slots}; it must be at least 1")
        if torch_threads_per_worker < 1:
            raise TournamentError(f"torch_threads_per_worker is {torch_threads_per_worker}; use >= 1")
        self._slots = slots
        self._threads = torch_threads_per_worker
        self._python = python or sys.executable
        self._lock = threading.Lock()
        self._incarnations = itertools.count()
        self._code: tuple[tuple[Any, ...], int, bytes] | None = None
        self._code_keys = itertools.count()
        self._pending: set[Future[Any]] = set()
        self.start: StartMethod = start or default_start_method(torch_threads_per_worker)
        if self.start not in ("fork", "spawn"):
            raise TournamentError(f"start is {self.start!r}; use 'fork' or 'spawn'")
        self._workers: list[_Worker] = []
        self._readers: list[threading.Thread] = []
        try:
            for _ in range(slots):  # forks all of them before any reader thread runs
                self._workers.append(self._fork_worker() if self.start == "fork" else self._spawn_worker())
        except BaseException:
            self._stop(self._workers)
            raise
        for worker in self._workers:
            self._start_reader(worker)

    # ------------------------------------------------------------------ workers

    def _fork_worker(self) -> _Worker:
        """Fork a worker; the child serves its socket and exits without running this process's exit code.

        The child keeps only its socket and stdin, stdout and stderr: an inherited descriptor would
        hold what this process holds after it dies (a run folder's ``flock``, which a resume after a
        kill must be able to take at once; another worker's socket, whose end tells that worker its
        driver is gone; a pipe a caller reads to its end). Its copy of this process's objects is
        frozen out of the cyclic collector (``gc.freeze``), so none that wraps a closed descriptor
        is ever finalised there.
        """
        ours, theirs = socket.socketpair()
        try:
            pid = os.fork()
        except OSError as exc:
            ours.close()
            theirs.close()
            raise TournamentError(f"cannot fork a pod worker process ({exc}); use backend 'local'") from None
        if pid == 0:  # the child
            code = 0
            try:
                gc.freeze()
                fd = theirs.detach()
                os.closerange(3, fd)
                os.closerange(fd + 1, _max_fd())
                process_worker.run_worker(fd, self._threads)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        return _Worker(process=_ForkedProcess(pid), connection=Connection(ours.detach()))

    def _spawn_worker(self) -> _Worker:
        """Start a fresh interpreter as a worker."""
        ours, theirs = socket.socketpair()
        environment = dict(os.environ)
        paths = [path or os.getcwd() for path in sys.path]  # the modules this process can import
        environment["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        module = "podracer.backends.process_worker"
        command = [self._python, "-m", module, str(theirs.fileno()), str(self._threads)]
        try:
            process = subprocess.Popen(
                command, pass_fds=[theirs.fileno()], env=environment, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            ours.close()
            raise TournamentError(f"cannot start a pod worker process ({exc}); use backend 'local'") from None
        finally:
            theirs.close()
        return _Worker(process=process, connection=Connection(ours.detach()))

    def _start_reader(self, worker: _Worker) -> None:
        name = f"podracer-process-reader-{worker.process.pid}"
        reader = threading.Thread(target=self._read, args=(worker,), name=name, daemon=True)
        self._readers.append(reader)
        reader.start()

    def _read(self, worker: _Worker) -> None:
        """Hand every reply of ``worker`` to the round waiting for it; on the socket's end, fail it
        and reap the process."""
        while True:
            reply: tuple[Any, ...] | None
            try:
                data = worker.connection.recv_bytes()
            except (EOFError, OSError):
                reply = None
            else:
                try:
                    reply = pickle.loads(data)
                except Exception as exc:  # the round's reply, not the worker, is broken
                    reply = ("error", None, f"its reply does not unpickle here ({type(exc).__name__}: {exc})")
            if reply is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.process.wait(timeout=STOP_TIMEOUT_S)  # no zombie left behind
            with self._lock:
                deliver, worker.reply = worker.reply, None
                if reply is None:
                    worker.lost = True
            if deliver is not None:
                deliver(reply)
            deliver = None  # the round's task holds its pod: keep no reference once it is delivered
            if reply is None:
                return

    def slots(self) -> int:
        """Rounds this backend runs at once."""
        return self._slots

    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        with self._lock:
            return [w.process.pid for w in self._workers if not w.lost]

    # ------------------------------------------------------------------ rounds

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Run a :class:`~podracer.backends.RoundTask` on a worker process; its future resolves after
        the trained state is loaded into ``task.pod.agent``.

        Raises:
            TournamentError: ``task`` is not a ``RoundTask``, or the tournament's factories cannot be
                pickled.
        """
        if not isinstance(task, RoundTask):
            raise TournamentError(
                f"ProcessBackend runs the orchestrator's RoundTask objects only, got {type(task).__name__}; "
                "use LocalBackend for arbitrary callables"
            )
        pod = task.pod
        code_key, code = self._code_bytes(task)
        outer: Future[Any] = Future()
        with self._lock:
            for worker in self._workers:  # an exit its reader thread has not recorded yet is one too
                if not worker.busy and not worker.lost and worker.process.poll() is not None:
                    worker.lost = True
            lost = [w for w in self._workers if w.lost and not w.busy and _alive(w.pod_ref) is pod]
            for worker in lost:  # its env went with it: the pod restarts from its snapshot, as after a crash
                worker.pod_ref = None
        if lost:
            outer.set_exception(
                WorkerLostError(
                    f"pod {pod.pod_id}'s worker process (pid {lost[0].process.pid}) died between its rounds "
                    f"(exit code {lost[0].process.poll()}; out of memory or killed)"
                )
            )
            return outer
        with self._lock:
            worker = self._pick(pod)
            fresh = _alive(worker.pod_ref) is not pod or worker.agent_env_steps != pod.agent.env_steps
            worker.busy = True  # reserved while the request is built
        try:
            incarnation = next(self._incarnations) if fresh else worker.incarnation
            state = pack_state(pod.agent.state_dict()) if fresh else None
            send_code = worker.code_key != code_key
            request = cloudpickle.dumps(
                ("round", code_key, code if send_code else None, *round_arguments(task, incarnation, state))
            )
        except BaseException:
            with self._lock:
                worker.busy = False
            raise
        with self._lock:
            died = worker.lost  # while the request was built: its reader has nobody to tell
            if died:
                worker.busy, worker.pod_ref = False, None
            else:
                if fresh:
                    worker.incarnation, worker.pod_ref = incarnation, weakref.ref(pod)
                worker.code_key = code_key
                worker.reply = lambda reply: self._finish(task, worker, reply, outer)
                self._pending.add(outer)
        if died:
            self._finish(task, worker, None, outer)
            return outer
        with contextlib.suppress(OSError):  # the worker is gone: its reader fails the round
            worker.connection.send_bytes(request)
        return outer

    def _pick(self, pod: Pod) -> _Worker:
        """The worker for a round of ``pod`` (called under the lock).

        The idle worker holding ``pod``; else an idle one whose pod is gone; else a new one. Never
        the worker of another live pod: that pod's next round would rebuild its env on another
        worker, and the leaderboard would depend on timing. A dropped pod can live on in a
        reference cycle, so a collection runs before a new worker is started.
        """
        # a lost worker that held a live pod stays until that pod's next submit reports the loss
        self._workers = [
            w for w in self._workers if not (w.lost and not w.busy and _alive(w.pod_ref) is None)
        ]
        idle = [w for w in self._workers if not w.busy and not w.lost]
        for worker in idle:
            if _alive(worker.pod_ref) is pod:
                return worker
        free = [w for w in idle if _alive(w.pod_ref) is None]
        if not free:
            gc.collect()
            free = [w for w in idle if _alive(w.pod_ref) is None]
        if free:
            return min(free, key=lambda w: w.last_used)  # a fresh agent and env: any gives the same round
        worker = self._spawn_worker()  # threads run now: a fresh interpreter, not a fork
        self._workers.append(worker)
        self._start_reader(worker)
        return worker

    def _code_bytes(self, task: RoundTask) -> tuple[int, bytes]:
        """The task's factories as ``cloudpickle`` bytes, pickled once per distinct set of them."""
        code = (task.agent_factory, task.env_factory, task.evaluate)
        with self._lock:
            if self._code is not None and all(a is b for a, b in zip(self._code[0], code, strict=True)):
                return self._code[1], self._code[2]
        try:
            data = cloudpickle.dumps(code)
        except Exception as exc:
            raise TournamentError(
                f"the agent factory, env factory or evaluate function cannot be sent to pod worker "
                f"processes ({type(exc).__name__}: {exc}); make them picklable (module-level functions, "
                "or closures over tensors and plain values), or use backend 'local'"
            ) from None
        with self._lock:
            self._code = (code, next(self._code_keys), data)
            return self._code[1], data

    def _finish(
        self, task: RoundTask, worker: _Worker, reply: tuple[Any, ...] | None, outer: Future[Any]
    ) -> None:
        """Turn a worker's reply (``None``: it died) into the round's outcome (on its reader thread)."""
        outcome: RoundResult | BaseException
        try:
            if reply is None:
                code = worker.process.poll()
                outcome = WorkerLostError(
                    f"pod {task.pod.pod_id}'s worker process (pid {worker.process.pid}) died mid-round "
                    f"(exit code {code}; out of memory or killed)"
                )
            elif reply[0] == "ok":
                task.pod.agent.load_state_dict(unpack_state(reply[2]))
                outcome = RoundResult(**reply[1])
            else:
                outcome = _exception_of(reply[1], reply[2])
        except BaseException as exc:  # a state that does not load: a crashed round too
            outcome = exc
        with self._lock:
            worker.busy = False
            worker.last_used = time.monotonic()
            if isinstance(outcome, RoundResult):
                worker.agent_env_steps = task.pod.agent.env_steps
            else:  # it may hold neither the pod nor the code (a failed load): send both again
                worker.pod_ref, worker.agent_env_steps, worker.code_key = None, -1, -1
            self._pending.discard(outer)
        settle(outer, outcome)

    def shutdown(self) -> None:
        """Wait for running rounds, then stop every worker process."""
        with self._lock:
            pending = list(self._pending)
        wait_all(pending)
        with self._lock:
            workers, self._workers = self._workers, []
            readers, self._readers = self._readers, []
            self._code = None
        self._stop(workers, readers)

    @staticmethod
    def _stop(workers: list[_Worker], readers: list[threading.Thread] | None = None) -> None:
        """Ask ``workers`` to exit (killing one that does not within :data:`STOP_TIMEOUT_S`), let
        their readers see the sockets' ends, then close the driver's ends."""
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.connection.send_bytes(pickle.dumps(("stop",)))
        for worker in workers:
            try:
                worker.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
        for reader in readers or []:
            reader.join(timeout=STOP_TIMEOUT_S)
        for worker in workers:
            worker.connection.close()


def _max_fd() -> int:
    """One above the highest descriptor this process may hold (its open-files limit)."""
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 1024)
    except (OSError, ValueError):
        return 1 << 20


def _exception_of(data: bytes | None, message: str) -> BaseException:
    """The exception a worker's round raised, or a :class:`TournamentError` with its message."""
    if data is not None:
        with contextlib.suppress(Exception):
            error = pickle.loads(data)
            if isinstance(error, BaseException):
                return error
    return TournamentError(f"a pod round failed in its worker process: {message}")


def _alive(ref: weakref.ref[Pod] | None) -> Pod | None:
    return None if ref is None else ref()
