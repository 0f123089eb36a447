"""The population backend: every pod of the pool trains in lockstep as one batched computation.

The orchestrator submits one :class:`~podracer.backends.base.RoundTask` per pod as usual, then
calls :meth:`PopulationBackend.run_submitted`. The backend groups the tasks whose agents can train
together (:func:`podracer.population.structure_key`: one architecture and env shape, the same
rounds per evaluation), runs each group's rounds with
:func:`podracer.population.train_population_round` (``P`` pods, one env batch of ``P x N``, one
network call per step), scores the pods with the application's ``evaluate`` (all in one batched
pass when it is a :class:`~podracer.api.ScoresMany`) and resolves the futures. A task that
cannot join a population (another agent type, learner fusion) runs alone.

Everything else is the orchestrator's, unchanged: leaderboard, lineage, exploit/explore (which
changes an agent's weights or config between rounds), snapshots, resume, elastic pool size. The
pods' agents and envs stay the pods' own; a population is rebuilt from them every round, so a pod
that joins, leaves or is re-seeded needs nothing special.

Runs in the orchestrator's thread with ``torch_threads`` intra-op threads (default: every core),
so there is no thread contention between pods: one bigger computation uses the machine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import torch

from podracer.api import ScoresMany
from podracer.backends.base import RoundTask
from podracer.errors import TournamentError
from podracer.pod import RoundResult, check_score, pod_policy
from podracer.population import PopulationPolicy, structure_key, train_population_round

T = TypeVar("T")


class PopulationBackend:
    """Runs the submitted pod rounds as populations trained in lockstep (see the module docstring).

    Args:
        slots: pods in the pool (>= 1): the population size when every pod fits one structure.
        torch_threads: torch intra-op threads for the population's computation, or ``None`` for
            every core of the machine.
    """

    lockstep = True
    """The orchestrator runs the pool in lockstep here: it submits all, then calls :meth:`run_submitted`."""

    def __init__(self, slots: int, torch_threads: int | None = None) -> None:
        """See the class docstring."""
        if slots < 1:
            raise TournamentError(f"PopulationBackend slots is {slots}; it must be at least 1")
        if torch_threads is not None and torch_threads < 1:
            raise TournamentError(f"torch_threads is {torch_threads}; use >= 1 or None")
        self._slots = slots
        self.torch_threads = torch_threads or max(1, os.cpu_count() or 1)
        self._pending: list[tuple[Callable[[], Any], Future[Any]]] = []

    def slots(self) -> int:
        """Pods the pool may hold."""
        return self._slots

    def set_slots(self, slots: int) -> None:
        """Resize the pool (0 lets it drain).

        Raises:
            TournamentError: ``slots`` < 0.
        """
        if slots < 0:
            raise TournamentError(f"slots is {slots}; it must be >= 0")
        self._slots = slots

    def submit(self, task: Callable[[], T]) -> Future[T]:
        """Queue ``task`` until :meth:`run_submitted`; returns its future."""
        future: Future[T] = Future()
        self._pending.append((task, future))
        return future

    def run_submitted(self) -> None:
        """Run every queued task: population rounds for the groups, alone for the rest."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        if torch.get_num_threads() != self.torch_threads:
            torch.set_num_threads(self.torch_threads)
        groups: dict[tuple[Any, ...], list[tuple[RoundTask, Future[Any]]]] = {}
        for task, future in pending:
            key = structure_key(task.pod.agent) if isinstance(task, RoundTask) else None
            if key is None or not isinstance(task, RoundTask):
                _run_alone(task, future)
            else:
                groups.setdefault((task.train_rounds, *key), []).append((task, future))
        for members in groups.values():
            _run_group(members)

    def shutdown(self) -> None:
        """Run whatever is still queued (nothing, after the orchestrator's loop), then stop."""
        self.run_submitted()


def _run_alone(task: Callable[[], Any], future: Future[Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(task())
    except BaseException as error:  # the orchestrator judges it as a crashed round
        future.set_exception(error)


def _run_group(members: list[tuple[RoundTask, Future[Any]]]) -> None:
    """``train_rounds`` population rounds of the members' pods, then each pod's evaluation."""
    members = [(task, future) for task, future in members if future.set_running_or_notify_cancel()]
    if not members:
        return
    tasks = [task for task, _ in members]
    agents = [task.pod.agent for task in tasks]
    envs = [task.pod.env for task in tasks]
    started = time.perf_counter()
    env_steps = [0] * len(tasks)
    metrics: list[dict[str, float]] = [{} for _ in tasks]
    try:
        for _ in range(tasks[0].train_rounds):
            for index, stats in enumerate(train_population_round(agents, envs)):  # type: ignore[arg-type]
                env_steps[index] += stats.env_steps
                metrics[index] = dict(stats.metrics)
    except BaseException as error:  # every pod of the group crashed this round
        for _, future in members:
            future.set_exception(error)
        return
    train_seconds = time.perf_counter() - started
    scores = _scores(tasks)
    eval_seconds = time.perf_counter() - started - train_seconds
    for index, (task, future) in enumerate(members):
        score = scores[index]
        if isinstance(score, BaseException):
            future.set_exception(score)
            continue
        future.set_result(
            RoundResult(
                pod_id=task.pod.pod_id,
                env_steps=env_steps[index],
                train_seconds=train_seconds,
                eval_seconds=eval_seconds,
                score=score,
                metrics=metrics[index],
            )
        )


def _scores(tasks: list[RoundTask]) -> list[float | BaseException]:
    """Each task's pod scored by its ``evaluate``: in one batched pass when they share a
    :class:`~podracer.api.ScoresMany` evaluate, else one by one; an error stands in for a score."""
    evaluate = tasks[0].evaluate
    agents = [task.pod.agent for task in tasks]
    policies = [pod_policy(agent) for agent in agents]
    if len(tasks) > 1 and isinstance(evaluate, ScoresMany) and all(t.evaluate is evaluate for t in tasks):
        try:
            raw = evaluate.score_many(policies, PopulationPolicy(agents))  # type: ignore[arg-type]
        except BaseException as error:  # every pod's round crashed in its evaluation
            return [error] * len(tasks)
        checked: list[float | BaseException] = []
        for task, score in zip(tasks, raw, strict=True):
            try:
                checked.append(check_score(score, task.pod.pod_id))
            except BaseException as error:
                checked.append(error)
        return checked
    scores: list[float | BaseException] = []
    for task, policy in zip(tasks, policies, strict=True):
        try:
            scores.append(check_score(task.evaluate(policy), task.pod.pod_id))
        except BaseException as error:
            scores.append(error)
    return scores


__all__ = ["PopulationBackend"]
