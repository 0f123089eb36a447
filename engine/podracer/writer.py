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


class OrderedWriter:
    """Runs submitted writes one at a time, in submission order, on a background thread.

    Args:
        name: the thread's name prefix (seen in a profiler or a stack dump).
    """

    def __init__(self, name: str = "podracer-writer") -> None:
        """See the class docstring."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: deque[Future[None]] = deque()
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def submit(self, write: Callable[..., Any], *args: Any) -> None:
        """Queue ``write(*args)`` behind every write submitted before it.

        Raises:
            BaseException: the error of an earlier write that failed (nothing more is queued).
        """
        self._raise_failure()
        self._pending.append(self._pool.submit(self._run, write, args))
        while self._pending and self._pending[0].done():
            self._pending.popleft()

    def flush(self) -> None:
        """Wait until every queued write has run.

        Raises:
            BaseException: the error of a write that failed.
        """
        while self._pending:
            self._pending.popleft().result()
        self._raise_failure()

    def close(self) -> None:
        """Run what is queued, then stop the thread (idempotent); a failed write's error is raised."""
        try:
            self.flush()
        finally:
            self._pool.shutdown(wait=True)

    @property
    def pending(self) -> int:
        """Writes submitted and not yet finished."""
        return sum(1 for future in self._pending if not future.done())

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
