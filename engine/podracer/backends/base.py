"""The backend interface: the seam between the orchestrator and whatever runs pod rounds.

The orchestrator keeps all state (leaderboard, pods' lineage, budget, RNG) in its own process and
only hands a backend self-contained tasks: "run one round of this pod and return its result". A
backend runs them somewhere and reports how many it can run at once.

A Ray backend plugs in here: ``submit`` calls a pod actor's ``run_round.remote()`` and returns
``object_ref.future()`` (a ``concurrent.futures.Future``); ``slots`` reports the pod actors the
cluster can host now (e.g. from ``ray.available_resources()``), so the pool follows the cluster as it
grows and shrinks; the leaderboard becomes a named actor writing the same durable files.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@runtime_checkable
class Backend(Protocol):
    """Runs pod rounds; the orchestrator waits on the returned futures in completion order."""

    def slots(self) -> int:
        """How many rounds may run at once right now (>= 0); the pool size follows it."""
        ...

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Start ``task`` and return a future of its result (or of the exception it raised)."""
        ...

    def shutdown(self) -> None:
        """Wait for running tasks and release the workers."""
        ...
