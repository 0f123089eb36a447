"""The orchestrator: the loop of an elastic, scheduled, resumable tournament of pods.

The loop keeps the training pool full while budget remains. Every pod round runs on the backend;
rounds run concurrently, and each finished round is judged alone: leaderboard admission, the pool
schedule, the lagging check. The pod is then resubmitted, retired, or replaced by a child of a better
live pod's latest state (exploit) or by a pod from scratch (explore, rarer as the budget runs out).
Before every submission the loop reads ``backend.slots()``; the pool is the smaller of that and the
schedule's size. When it grows, retired pods restart from their last snapshots first, then new pods
come from the generator; when it shrinks, the worst pods are retired as their rounds end, their last
snapshots kept. A round that raises is logged, not fatal: the pod is restored from its last
snapshot, or replaced by a new pod if it crashes again straight after. Rounds start while budget
(env steps, wall time) remains; rounds in flight when it runs out finish and count.

Determinism: every draw (pod seeds, fresh-or-donor, donor, perturbations) comes from one generator
seeded by ``seed``, and with ``judge_order = "submission"`` (the default) finished rounds are judged
in the order they were submitted, whatever order they finish in. A run with an env-step budget is
then reproducible at a fixed ``torch_threads_per_pod`` on one machine, for any pool size (the same
pods, scores and leaderboard; ``created_at`` and timings aside).

The pieces, each in its own module; this one is the loop that ties them together:

* :mod:`podracer.judge`: the decisions, pure functions of scores and counts (promote, lagging and
  exploit, retire, crash); :mod:`podracer.schedule`: the budget and the pool's size over it;
* :mod:`podracer.ledger`: the pool (live, retiring and parked pods, where new ones come from);
* :mod:`podracer.rundir`: the run directory (lock, state, snapshots, events, resume), with the
  files' formats in :mod:`podracer.runfiles`;
* :mod:`podracer.generator` and :mod:`podracer.spawn` (a new pod's origin and building it),
  :mod:`podracer.events` (events and results), :mod:`podracer.config` (the settings).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from types import TracebackType
from typing import Any

from podracer.backends import Backend, LocalBackend, LockstepBackend, RoundTask
from podracer.config import TournamentConfig
from podracer.errors import TournamentError
from podracer.events import (
    EVENT_KINDS,
    EVENTS_NAME,
    EventCallback,
    HistoryRecord,
    TournamentEvent,
    TournamentResult,
    read_events,
)
from podracer.generator import Generator
from podracer.judge import idle_reason, judge_crash, judge_round
from podracer.ledger import PoolLedger
from podracer.pod import AgentFactory, EnvFactory, Evaluate, Pod, PodAgent, RoundResult, check_agent_config
from podracer.rundir import RunDirectory
from podracer.runfiles import CONFIG_NAME, LEADERBOARD_DIR, PODS_DIR, STATE_NAME, pod_record, read_config
from podracer.schedule import pool_target

__all__ = [
    "CONFIG_NAME",
    "EVENTS_NAME",
    "EVENT_KINDS",
    "LEADERBOARD_DIR",
    "PODS_DIR",
    "STATE_NAME",
    "HistoryRecord",
    "Tournament",
    "TournamentConfig",
    "TournamentEvent",
    "TournamentResult",
    "read_events",
]


class Tournament:
    """A tournament of pods in a run directory; see the module docstring.

    One constructor: a new run, or with ``resume=True`` the run in ``run_dir`` reopened (also after
    the process was killed; :meth:`resume` reads its settings for you). It holds the run directory's
    OS lock until :meth:`close` (or the end of a ``with`` block), so one process at a time writes a run.

    Args:
        config: the tournament settings (with ``resume``: the ones the run was started with).
        run_dir: an empty or missing folder for the run's files (with ``resume``: the run's folder).
        agent_factory: ``(agent_config, seed) -> agent`` (e.g. a ``PPOAgent``).
        base_agent_config: hyper-parameters of pods from scratch (a dataclass with ``PERTURBABLE``).
        env_factory: ``seed -> TensorVectorEnv``, each pod's own training env.
        evaluate: ``policy -> score`` (higher is better), called from backend workers.
        backend: runs the rounds; ``None`` for a ``LocalBackend(config.pool_size,
            config.torch_threads_per_pod)`` of the tournament's own, made afresh by each :meth:`run`
            and shut down at its end.
        resume: continue the run in ``run_dir``: the leaderboard and budget used are read back, and
            the pods of the pool restart from their last snapshots as slots allow (a pod that had
            not finished a round yet is dropped: the generator refills its slot). At most one round
            per pod is redone.

    Raises:
        TournamentError: a bad config; ``run_dir`` already holds a run (without ``resume``) or was
            started with another ``config`` or ``base_agent_config`` (with ``resume``); the folder
            is open in another tournament.
        SnapshotError: with ``resume``, a run file is missing, corrupt or foreign.
    """

    def __init__(
        self,
        config: TournamentConfig,
        run_dir: Path,
        agent_factory: AgentFactory,
        base_agent_config: Any,
        env_factory: EnvFactory,
        evaluate: Evaluate,
        backend: Backend | None = None,
        *,
        resume: bool = False,
    ) -> None:
        """See the class docstring."""
        check_agent_config(base_agent_config, config.perturb_bounds)
        self.config = config
        self._agent_factory = agent_factory
        self._env_factory = env_factory
        self._evaluate = evaluate
        self._given_backend = backend
        self.backend: Backend = self._own_backend() if backend is None else backend
        self._last_crash: BaseException | None = None
        """The exception of the last crashed round (a failure shared by many rounds counts once)."""
        generator = Generator(
            base_agent_config=base_agent_config,
            perturb_scale=config.perturb_scale,
            softmax_temperature=config.softmax_temperature,
            perturb_bounds=config.perturb_bounds,
            resample_prob=config.resample_prob,
        )
        opener = RunDirectory.open if resume else RunDirectory.create
        self._run = opener(Path(run_dir), config, base_agent_config)  # last: it takes the folder's lock
        self.run_dir = self._run.path
        self.leaderboard = self._run.leaderboard
        self.archive = self._run.archive
        self._ledger = PoolLedger(self._run, generator, agent_factory, env_factory)

    @classmethod
    def resume(
        cls,
        run_dir: Path,
        agent_factory: AgentFactory,
        base_agent_config: Any,
        env_factory: EnvFactory,
        evaluate: Evaluate,
        backend: Backend | None = None,
    ) -> Tournament:
        """``Tournament(config, run_dir, ..., resume=True)`` with the ``config`` the run was started
        with (its ``config.json``); continue with :meth:`run`.

        Raises:
            SnapshotError: a run file is missing, corrupt or foreign.
            TournamentError: ``base_agent_config`` is not the one the run was started with, or the
                folder is open in another tournament.
        """
        config, _ = read_config(Path(run_dir).resolve())
        return cls(
            config, run_dir, agent_factory, base_agent_config, env_factory, evaluate, backend, resume=True
        )

    def _own_backend(self) -> LocalBackend:
        return LocalBackend(self.config.pool_size, self.config.torch_threads_per_pod)

    def close(self) -> None:
        """Release the run directory's lock (idempotent); the object cannot :meth:`run` after it."""
        self._run.release()

    def __enter__(self) -> Tournament:
        """The tournament itself."""
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        """:meth:`close`."""
        self.close()

    def agent_of(self, pod_id: int) -> PodAgent:
        """The agent of live pod ``pod_id``, as its latest finished round left it (every backend
        loads a round's trained state into it before the round is judged): for an ``on_event``
        callback to look at the policy a ``round_finished`` event scored, wherever the round ran.

        Raises:
            TournamentError: no live pod has that id.
        """
        pod = self._ledger.pods.get(pod_id)
        if pod is None:
            raise TournamentError(
                f"no live pod {pod_id}; an on_event callback sees a pod's agent until the pod leaves"
            )
        return pod.agent

    # ------------------------------------------------------------------ the loop

    def exclude_seconds(self, seconds: float) -> None:
        """Leave ``seconds`` of wall time out of the budget: work that a caller's callbacks did
        during :meth:`run` and that is not the tournament's (a benchmark's own measurements in its
        scorer), so a wall budget buys the same training with or without it."""
        if not (math.isfinite(seconds) and seconds >= 0.0):
            raise TournamentError(f"exclude_seconds needs a finite number of seconds >= 0, got {seconds}")
        self._run.budget.exclude(seconds)

    def run(self, on_event: EventCallback | None = None) -> TournamentResult:
        """Train until the budget is spent; returns the leaderboard and its history.

        It also returns, budget left, when the backend reports 0 slots and no round is in flight;
        calling ``run`` again (or :meth:`resume`) continues. When ``run`` raises (a crash limit, an
        interrupt), the tournament is closed: continue with :meth:`resume`.

        Args:
            on_event: called in this thread with every :class:`TournamentEvent`.

        Raises:
            TournamentError: the tournament was closed, or too many rounds crashed in a row.
        """
        run, ledger = self._run, self._ledger
        if not run.is_open:
            raise TournamentError(f"the tournament of {self.run_dir} is closed; use Tournament.resume")
        if self._given_backend is None:
            self.backend = self._own_backend()
        run.budget.restart()
        in_flight: dict[Future[RoundResult], int] = {}
        run.open_events(on_event)
        try:
            if not run.finished:
                self._fill_pool(in_flight, ready=[])
                ledger.save()
                self._run_lockstep()
            while in_flight:
                ready: list[Pod] = []
                for future in self._next_finished(in_flight):
                    pod_id = in_flight.pop(future)
                    self._judge(ledger.pods[pod_id], future, ready, in_flight)
                self._fill_pool(in_flight, ready)
                ledger.save()
                ledger.remove_stale_files()
                self._run_lockstep()
            run.finished = not run.budget.left(0)
            ledger.save()
            run.flush_writes()  # returns with every snapshot and state.json on disk
            run.emit(
                "tournament_finished",
                None,
                rounds=run.progress.rounds,
                best_score=self._best(),
                budget_spent=run.finished,
            )
            ledger.save()  # the state names the log with that event: a resume keeps it
            run.flush_writes()
        except BaseException:
            with contextlib.suppress(Exception):  # the first error is the one to report
                self.close()
            raise
        finally:
            for future in in_flight:
                future.cancel()
            if self._given_backend is None:
                self.backend.shutdown()
            run.close_events()
        return TournamentResult(
            leaderboard=self.leaderboard,
            history=list(run.progress.history),
            env_steps=run.progress.env_steps,
            seconds=run.budget.elapsed(),
            rounds=run.progress.rounds,
            crashes=run.progress.crashes,
        )

    def _run_lockstep(self) -> None:
        """Let a lockstep backend (:class:`LockstepBackend`) run the rounds just submitted, as one."""
        if isinstance(self.backend, LockstepBackend):
            self.backend.run_submitted()

    def _next_finished(self, in_flight: Mapping[Future[RoundResult], int]) -> list[Future[RoundResult]]:
        """The rounds to judge next, in submission order (``in_flight`` keeps that order).

        A lockstep backend has finished every round in flight: all are judged, then the pool refills.
        """
        if isinstance(self.backend, LockstepBackend):
            wait(in_flight)
            return list(in_flight)
        if self.config.judge_order == "submission":
            oldest = next(iter(in_flight))
            wait([oldest])
            return [oldest]
        done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
        return [future for future in in_flight if future in done]

    def _judge(
        self, pod: Pod, future: Future[RoundResult], ready: list[Pod], in_flight: Mapping[Future[Any], int]
    ) -> None:
        """Account for a finished round of ``pod``; put it (or its replacement) in ``ready``, or retire it."""
        error = future.exception()
        if error is not None:
            self._crashed(pod, error, ready)
            return
        result = future.result()
        run, ledger, board = self._run, self._ledger, self.leaderboard
        run.progress.count_round(result.env_steps)
        state, encoded = ledger.record_round(pod, result)
        # Before leaderboard_after the board ranks nothing. It cannot end empty: a round starts while
        # the budget is not spent, so the last one finishes with all of it spent.
        ranked = run.budget.fraction() >= self.config.leaderboard_after
        if run.archive is not None and (ranked or run.archive.rule == "even"):  # a score archive ranks too
            run.archive.offer(run.progress.rounds, ledger.candidate(pod, result.score), state, encoded)
        steps_per_s = result.env_steps / result.train_seconds if result.train_seconds > 0 else 0.0
        run.emit(
            "round_finished",
            pod.pod_id,
            score=result.score,
            smoothed_score=pod.smoothed_score,
            round_env_steps=result.env_steps,
            steps_per_s=steps_per_s,
            train_seconds=result.train_seconds,
            eval_seconds=result.eval_seconds,
            policy_version=pod.policy_version,
            lineage_env_steps=pod.env_steps,
            metrics=dict(result.metrics),
        )
        entry = board.offer(ledger.candidate(pod, result.score), state, encoded) if ranked else None
        if entry is not None:
            run.emit("entry_admitted", pod.pod_id, rank=board.rank_of(entry), score=entry.score)
        record = HistoryRecord(
            run.budget.elapsed(), run.progress.env_steps, self._best(), tuple(board.scores())
        )
        run.progress.history.append(record)
        ledger.mark_retirees(self._target())
        verdict = judge_round(
            pod,
            ledger.others(pod),
            self.config,
            retiring=pod.pod_id in ledger.retiring,
            fraction=run.budget.fraction(),
            budget_left=run.budget.left(len(in_flight)),
        )
        if verdict.action == "retire":
            ledger.retire(pod, reason=str(verdict.reason))
        elif verdict.action == "replace":
            ledger.drop(pod)
            better = [ledger.pods[pod_id] for pod_id in verdict.donors]
            successor = ledger.new_pod(ledger.donors(better, fallback=False))
            run.emit("pod_replaced", pod.pod_id, reason=verdict.reason, by=successor.pod_id)
            ready.append(successor)
        else:
            ready.append(pod)

    def _crashed(self, pod: Pod, error: BaseException, ready: list[Pod]) -> None:
        """Account for a crashed round of ``pod``; put its restored self or its replacement in ``ready``."""
        run, ledger, progress = self._run, self._ledger, self._run.progress
        # A lockstep backend fails every pod of a failed computation (a population round, a lost
        # worker) with one exception object: one failure, counted once towards giving up.
        progress.count_crash(same_failure=error is self._last_crash and progress.consecutive_crashes > 0)
        self._last_crash = error
        run.emit("pod_crashed", pod.pod_id, error=f"{type(error).__name__}: {error}")
        ledger.drop(pod)
        action = judge_crash(
            progress.consecutive_crashes,
            self.config,
            has_snapshot=pod.snapshot_name is not None,
            restored_after_crash=pod.restored_after_crash,
        )
        if action == "give_up":
            ledger.park(pod)  # kept for the resume the error message asks for
            ledger.save()
            raise TournamentError(
                f"{progress.consecutive_crashes} pod rounds crashed in a row (last: {type(error).__name__}: "
                f"{error}); fix the agent, env or evaluate function, then resume"
            ) from error
        if action == "restore":
            successor = ledger.restore(pod_record(pod), reason="crash")
        else:
            successor = ledger.new_pod(ledger.donors(list(ledger.pods.values()), fallback=True))
            run.emit("pod_replaced", pod.pod_id, reason="crash", by=successor.pod_id)
        successor.restored_after_crash = pod.snapshot_name is not None and successor.pod_id == pod.pod_id
        ready.append(successor)

    # ------------------------------------------------------------------ the pool

    def _target(self) -> int:
        """Pods the pool should hold now: the smaller of the backend's slots and the schedule's size."""
        target = pool_target(self.config, self._run.budget.fraction(), self.backend.slots())
        self._ledger.resize(target)
        return target

    def _fill_pool(self, in_flight: dict[Future[RoundResult], int], ready: list[Pod]) -> None:
        """Submit ready pods, retire the ones the pool has no room or budget for, start new ones."""
        target, ledger, budget = self._target(), self._ledger, self._run.budget

        def room() -> bool:
            return ledger.running(in_flight.values()) < target and budget.left(len(in_flight))

        for pod in ready:
            if room():
                self._submit(pod, in_flight)
            else:
                ledger.retire(pod, reason=idle_reason(budget.left(len(in_flight))))
        while room():
            pod = ledger.unpark(reason="pool grew") or ledger.new_pod(
                ledger.donors(list(ledger.pods.values()), fallback=True)
            )
            self._submit(pod, in_flight)

    def _submit(self, pod: Pod, in_flight: dict[Future[RoundResult], int]) -> None:
        task = RoundTask(
            pod,
            self.config.eval_every_rounds,
            self._evaluate,
            self._agent_factory,
            self._env_factory,
            budget_spent=self._run.budget.schedule_fraction(),
        )
        in_flight[self.backend.submit(task)] = pod.pod_id

    def _best(self) -> float | None:
        scores = self.leaderboard.scores()
        return scores[0] if scores else None
