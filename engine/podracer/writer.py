"""Run-directory writes in order on one background thread, so a run's disk I/O overlaps its training.

A pod's snapshot is tens of megabytes at the paper's minute shape (a (512, 512) MLP over 1,302
inputs with its Adam state: 22 MB), and each one is written durably (temp file, fsync, rename,
directory fsync). Done in the orchestrator's thread between rounds, 16 pods' snapshots kept a GPU
idle for seconds a round. :class:`OrderedWriter` runs those writes on one thread, in the order they
were submitted, while the next round trains: what is on disk is always a state the run passed
through (``state.json`` is written after the snapshots it names, stale files are deleted after the
``state.json`` that stopped naming them), at most the writes still queued behind the latest one.

After a write fails, the writes queued behind it are skipped (a later ``state.json`` must not name a
snapshot that was never written), and the error is raised by the next :meth:`~OrderedWriter.submit`
or :meth:`~OrderedWriter.flush`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

MAX_QUEUED_BYTES = 1 << 30
"""Bytes of queued writes (as their callers size them) above which :meth:`OrderedWriter.submit`
waits for the oldest: a disk slower than the training cannot grow the queue without bound."""


class OrderedWriter:
    """Runs submitted writes one at a time, in submission order, on a background thread.

    Args:
        name: the thread's name prefix (seen in a profiler or a stack dump).
        max_queued_bytes: the queue's size above which :meth:`submit` waits (see
            :data:`MAX_QUEUED_BYTES`).
    """

    def __init__(self, name: str = "podracer-writer", max_queued_bytes: int = MAX_QUEUED_BYTES) -> None:
        """See the class docstring."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._queued_bytes = 0
        self._max_queued_bytes = max_queued_bytes
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def submit(self, write: Callable[..., Any], *args: Any, size: int = 0) -> None:
        """Queue ``write(*args)`` behind every write submitted before it; ``size``: the bytes it
        holds (its data), counted against ``max_queued_bytes``.

        Raises:
            BaseException: the error of an earlier write that failed (nothing more is queued).
        """
        self._raise_failure()
        self._pending.append((self._pool.submit(self._run, write, args), size))
        self._queued_bytes += size
        while self._pending and (self._pending[0][0].done() or self._queued_bytes > self._max_queued_bytes):
            future, done_size = self._pending.popleft()
            future.result()  # waits when the queue is over its size
            self._queued_bytes -= done_size
        self._raise_failure()

    def flush(self) -> None:
        """Wait until every queued write has run.

        Raises:
            BaseException: the error of a write that failed.
        """
        while self._pending:
            future, size = self._pending[0]
            future.result()
            self._pending.popleft()
            self._queued_bytes -= size
        self._raise_failure()

    def close(self) -> None:
        """Run what is queued, then stop the thread (idempotent); a failed write's error is raised."""
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True)
        self._raise_failure()  # a write that failed while an interrupt cut flush() short

    @property
    def pending(self) -> int:
        """Writes submitted and not yet finished."""
        return sum(1 for future, _ in self._pending if not future.done())

    @property
    def queued_bytes(self) -> int:
        """Bytes of the writes still held in the queue (as submitted with ``size``)."""
        return self._queued_bytes

    def _run(self, write: Callable[..., Any], args: tuple[Any, ...]) -> None:
        with self._lock:
            if self._failure is not None:
                return  # a write before this one failed: skip, so nothing later names what is missing
        try:
            write(*args)
        except BaseException as error:
            with self._lock:
                self._failure = error

    def _raise_failure(self) -> None:
        with self._lock:
            failure = self._failure
        if failure is not None:
            raise failure


__all__ = ["OrderedWriter"]
