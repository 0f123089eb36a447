"""The backend interface: the seam between the orchestrator and whatever runs pod rounds.

The orchestrator keeps all state (leaderboard, pods' lineage, budget, RNG) in its own process and
only hands a backend self-contained tasks: "run one round of this pod and return its result". A
backend runs them somewhere and reports how many it can run at once.

The tasks are :class:`RoundTask` objects. A backend in this process simply calls one
(:class:`~podracer.backends.local.LocalBackend`); a distributed backend
(:class:`~podracer.backends.ray_backend.RayBackend`) reads its fields instead, to build the pod's agent
and env on a remote worker, move the agent's ``state_dict`` there and back as tensors, and load the
trained state into ``task.pod.agent`` before the future resolves: to the orchestrator both look alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from podracer.pod import AgentFactory, EnvFactory, Evaluate, Pod, RoundResult, run_round

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class RoundTask:
    """One round of one pod: ``train_rounds`` agent rounds on the pod's env, then ``evaluate``.

    Calling it runs the round here (:func:`podracer.pod.run_round`). A remote backend rebuilds the
    pod elsewhere with ``agent_factory(pod.agent_config, pod.seed)`` and ``env_factory(pod.seed)``
    and must leave ``pod.agent`` holding the trained state when the round's future resolves.

    Attributes:
        pod: the pod; its agent holds the state the round starts from.
        train_rounds: agent training rounds before the evaluation (>= 1).
        evaluate: the application's ``policy -> score``.
        agent_factory: ``(agent_config, seed) -> agent``, as given to the tournament.
        env_factory: ``seed -> env``, as given to the tournament.
        budget_spent: the share of the tournament's budget spent when the round was submitted, in
            ``[0, 1]``, handed to an agent that follows it (:class:`~podracer.protocols.FollowsBudget`).
    """

    pod: Pod
    train_rounds: int
    evaluate: Evaluate
    agent_factory: AgentFactory
    env_factory: EnvFactory
    budget_spent: float = 0.0

    def __call__(self) -> RoundResult:
        """Run the round in this process, on ``pod.agent`` and ``pod.env``."""
        return run_round(self.pod, self.train_rounds, self.evaluate, self.budget_spent)


@runtime_checkable
class Backend(Protocol):
    """Runs pod rounds; the orchestrator waits on the returned futures in completion order."""

    def slots(self) -> int:
        """How many rounds may run at once right now (>= 0); the pool size follows it."""
        ...

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Start ``task`` (a :class:`RoundTask` from the orchestrator) and return a future of its result.

        The future holds the exception the task raised, if any; the orchestrator treats it as a
        crashed round.
        """
        ...

    def shutdown(self) -> None:
        """Wait for running tasks and release the workers."""
        ...


@runtime_checkable
class LockstepBackend(Backend, Protocol):
    """A backend that runs the pool's rounds together: the orchestrator submits every ready pod,
    then calls :meth:`run_submitted`, and judges all the rounds once it returns.

    (:class:`~podracer.backends.population.PopulationBackend` trains them as one batched computation.)
    """

    lockstep: bool

    def run_submitted(self) -> None:
        """Run every task submitted since the last call; their futures are resolved on return."""
        ...


def settle(future: Future[Any], outcome: RoundResult | BaseException) -> None:
    """Resolve a remote round's ``future`` with its result or the exception it ended in (nothing if
    the orchestrator cancelled it meanwhile)."""
    if not future.set_running_or_notify_cancel():
        return
    if isinstance(outcome, RoundResult):
        future.set_result(outcome)
    else:
        future.set_exception(outcome)


def wait_all(futures: Iterable[Future[Any]]) -> None:
    """Wait until every future has finished (a cancelled one finished already)."""
    for future in futures:
        with contextlib.suppress(CancelledError):
            future.exception()
