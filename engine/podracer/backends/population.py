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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

import torch

from podracer.backends.base import RoundTask
from podracer.errors import TournamentError
from podracer.pod import RoundResult, check_score, pod_policy
from podracer.population import PopulationPolicy, structure_key, train_population_round
from podracer.protocols import ScoresMany, follow_budget

T = TypeVar("T")


class PopulationBackend:
    """Runs the submitted pod rounds as populations trained in lockstep (see the module docstring).

    Args:
        slots: pods in the pool (>= 1): the population size when every pod fits one structure.
        torch_threads: torch intra-op threads for the population's computation, or ``None`` for
            every core of the machine.
        workers: sub-populations trained side by side in threads of this process (each pod's
            numbers are the same whichever sub-population it trains in: one pod's slice of a
            batched matmul does not depend on the others), or ``None`` for
            ``cores // torch_threads`` on a CPU and 1 on a GPU. Threads, unlike a bigger intra-op
            count, share a small CPU without waiting on each other's slowest core.
    """

    lockstep = True
    """The orchestrator runs the pool in lockstep here: it submits all, then calls :meth:`run_submitted`."""

    def __init__(self, slots: int, torch_threads: int | None = None, workers: int | None = None) -> None:
        """See the class docstring."""
        if slots < 1:
            raise TournamentError(f"PopulationBackend slots is {slots}; it must be at least 1")
        if torch_threads is not None and torch_threads < 1:
            raise TournamentError(f"torch_threads is {torch_threads}; use >= 1 or None")
        if workers is not None and workers < 1:
            raise TournamentError(f"workers is {workers}; use >= 1 or None")
        self._slots = slots
        cores = max(1, os.cpu_count() or 1)
        self.torch_threads = torch_threads or cores
        self.workers = workers
        """Sub-populations side by side (``None``: ``cores // torch_threads`` on a CPU, 1 on a GPU)."""
        self._cpu_workers = max(1, cores // self.torch_threads)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
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
            _run_group(members, self._workers_for(members[0][0]))

    def _workers_for(self, task: RoundTask) -> _Workers | None:
        """The worker threads a group trains its sub-populations on (``None``: one population here)."""
        device = getattr(task.pod.agent, "device", None)
        count = self.workers or (self._cpu_workers if getattr(device, "type", "cpu") == "cpu" else 1)
        if count <= 1:
            return None
        if self._pool is None or self._pool_size != count:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="podracer-population")
            self._pool_size = count
        return _Workers(self._pool, count)

    def shutdown(self) -> None:
        """Run whatever is still queued (nothing, after the orchestrator's loop), then stop the workers."""
        self.run_submitted()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _run_alone(task: Callable[[], Any], future: Future[Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(task())
    except BaseException as error:  # the orchestrator judges it as a crashed round
        future.set_exception(error)


class _Workers(NamedTuple):
    """The worker threads of a group's sub-populations and how many there are."""

    pool: ThreadPoolExecutor
    size: int


def _train_rounds(agents: list[Any], envs: list[Any], rounds: int) -> list[tuple[int, dict[str, float]]]:
    """``rounds`` population rounds of ``agents``; each pod's env steps and last round's metrics."""
    totals: list[tuple[int, dict[str, float]]] = [(0, {}) for _ in agents]
    for _ in range(rounds):
        stats = train_population_round(agents, envs)
        totals = [(steps + s.env_steps, dict(s.metrics)) for (steps, _), s in zip(totals, stats, strict=True)]
    return totals


def _run_group(members: list[tuple[RoundTask, Future[Any]]], workers: _Workers | None) -> None:
    """``train_rounds`` population rounds of the members' pods (split into one sub-population per
    worker thread when ``workers`` is given), then the pods' evaluation."""
    members = [(task, future) for task, future in members if future.set_running_or_notify_cancel()]
    if not members:
        return
    tasks = [task for task, _ in members]
    agents = [task.pod.agent for task in tasks]
    envs = [task.pod.env for task in tasks]
    for task in tasks:
        follow_budget(task.pod.agent, task.budget_spent)
    started = time.perf_counter()
    rounds = tasks[0].train_rounds
    try:
        if workers is None or len(tasks) == 1:
            totals = _train_rounds(agents, envs, rounds)
        else:
            parts = [part.tolist() for part in torch.arange(len(tasks)).tensor_split(workers.size)]
            jobs = [
                workers.pool.submit(_train_rounds, [agents[i] for i in part], [envs[i] for i in part], rounds)
                for part in parts
                if part
            ]
            totals = [total for job in jobs for total in job.result()]
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
                env_steps=totals[index][0],
                train_seconds=train_seconds,
                eval_seconds=eval_seconds,
                score=score,
                metrics=totals[index][1],
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
