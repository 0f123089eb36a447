"""The local backend: the embedded default, pods as tasks of a thread pool in this process.

Pod rounds spend their time in torch ops, which release the GIL, so ``slots`` worker threads train
that many pods at once. Each worker sets torch's intra-op thread count to ``torch_threads_per_slot``
before a round, so the slots share the cores instead of oversubscribing them. Note that torch's
thread count is process-wide: the application's own torch work runs with the same setting.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import torch

from podracer.errors import TournamentError

T = TypeVar("T")

THREAD_NAME_PREFIX = "podracer-pod"
"""Name prefix of the worker threads."""


def default_torch_threads_per_slot(slots: int) -> int:
    """The machine's cores divided evenly among ``slots`` workers, at least one each."""
    return max(1, (os.cpu_count() or 1) // max(1, slots))


class LocalBackend:
    """Runs pod rounds on ``slots`` worker threads; :meth:`set_slots` resizes it while it runs.

    Args:
        slots: rounds run at once (>= 1).
        torch_threads_per_slot: torch intra-op threads per worker, or ``None`` to divide the
            machine's cores evenly among the current slots (recomputed after :meth:`set_slots`).
    """

    def __init__(self, slots: int, torch_threads_per_slot: int | None = None) -> None:
        """See the class docstring."""
        if slots < 1:
            raise TournamentError(f"LocalBackend slots is {slots}; it must be at least 1")
        if torch_threads_per_slot is not None and torch_threads_per_slot < 1:
            raise TournamentError(f"torch_threads_per_slot is {torch_threads_per_slot}; use >= 1 or None")
        self._lock = threading.Lock()
        self._slots = slots
        self._threads_per_slot = torch_threads_per_slot
        self._capacity = slots
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix=THREAD_NAME_PREFIX)
        self._retired: list[ThreadPoolExecutor] = []

    def slots(self) -> int:
        """The current number of slots."""
        with self._lock:
            return self._slots

    def set_slots(self, slots: int) -> None:
        """Resize (callable from any thread, also while a tournament runs); 0 lets the pool drain.

        Raises:
            TournamentError: ``slots`` < 0.
        """
        if slots < 0:
            raise TournamentError(f"slots is {slots}; it must be >= 0")
        with self._lock:
            if slots > self._capacity:
                self._retired.append(self._executor)
                self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix=THREAD_NAME_PREFIX)
                self._capacity = slots
            self._slots = slots

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Run ``task`` on a worker thread with torch's thread count set for this pool size."""
        with self._lock:
            threads = self._threads_per_slot or default_torch_threads_per_slot(self._slots)
            return self._executor.submit(_with_torch_threads, task, threads)

    def shutdown(self) -> None:
        """Wait for running rounds and stop the workers."""
        with self._lock:
            executors = [*self._retired, self._executor]
            self._retired = []
        for executor in executors:
            executor.shutdown(wait=True)


def _with_torch_threads(task: Callable[[], T], threads: int) -> T:
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return task()
