"""The orchestrator: the loop of an elastic, scheduled, resumable tournament of pods.

The loop keeps the training pool full while budget remains. Every pod round runs on the backend;
rounds run concurrently, and each finished round is judged alone: leaderboard admission, the pool
schedule (:mod:`podracer.schedule`), the lagging check (:mod:`podracer.updater`). The pod is then
resubmitted, retired, or replaced by a child of a better live pod's latest state (exploit) or by a
pod from scratch (explore, rarer as the budget runs out). Before every submission the orchestrator
reads ``backend.slots()``; the pool is the smaller of that and the schedule's size. When it grows,
retired pods restart from their last snapshots first, then new pods come from the generator; when it
shrinks, the worst pods are retired as their rounds end, their last snapshots kept. A round that
raises is logged, not fatal: the pod is restored from its last snapshot, or replaced by a new pod if
it crashes again straight after.

Budget: a round is started only while the env steps used plus those expected from the rounds in
flight (the last round's size each) stay below ``budget_env_steps``, and while the wall time used
(summed over resumes) is below ``budget_seconds``. Rounds in flight when it runs out finish and count.

Determinism: every draw (pod seeds, fresh-or-donor, donor, perturbations) comes from one generator
seeded by ``seed``, and with ``judge_order = "submission"`` (the default) finished rounds are judged
in the order they were submitted, whatever order they finish in. A run with an env-step budget is
then reproducible at a fixed ``torch_threads_per_pod`` on one machine, for any pool size (the same
pods, scores and leaderboard; ``created_at`` and timings aside).

Pieces: settings in :mod:`podracer.config`, events and results in :mod:`podracer.events`, run
files (lock, config, state) in :mod:`podracer.runfiles`, the pool schedule in :mod:`podracer.schedule`,
judging in :mod:`podracer.updater`, where a new pod comes from in :mod:`podracer.generator`, and
building pods in :mod:`podracer.spawn`; this module is the loop that ties them together.

A :class:`Tournament` holds its run directory's OS lock from construction (or
:meth:`Tournament.resume`) to :meth:`Tournament.close`, so one process at a time writes a run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from podracer.backends import Backend, LocalBackend, LockstepBackend, RoundTask
from podracer.config import TournamentConfig
from podracer.errors import TournamentError
from podracer.events import (
    EVENT_KINDS,
    EVENTS_NAME,
    EventCallback,
    EventLog,
    HistoryRecord,
    TournamentEvent,
    TournamentResult,
    read_events,
)
from podracer.generator import Donor, Generator
from podracer.leaderboard import AGENT_STATE_KEY, INDEX_NAME, Candidate, Leaderboard
from podracer.pod import (
    AgentFactory,
    EnvFactory,
    Evaluate,
    Pod,
    RoundResult,
    check_agent_config,
    config_to_record,
)
from podracer.runfiles import (
    CONFIG_NAME,
    LEADERBOARD_DIR,
    PODS_DIR,
    STATE_NAME,
    Progress,
    RunLock,
    RunState,
    pod_record,
    read_config,
    read_state,
    write_config,
    write_state,
)
from podracer.schedule import budget_fraction, fresh_probability, pool_target, retirees, schedule_phase
from podracer.snapshot import SNAPSHOT_SUFFIX, TEMP_SUFFIX, fsync_directory, save_snapshot
from podracer.spawn import leaderboard_donors, live_donors, restore_pod, spawn_pod
from podracer.updater import is_lagging, smooth

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

    Use it as a context manager, or call :meth:`close`, to release the run directory's lock.

    Args:
        config: the tournament settings.
        run_dir: an empty or missing folder for the run's files.
        agent_factory: ``(agent_config, seed) -> agent`` (e.g. a ``PPOAgent``).
        base_agent_config: hyper-parameters of pods from scratch (a dataclass with ``PERTURBABLE``).
        env_factory: ``seed -> TensorVectorEnv``, each pod's own training env.
        evaluate: ``policy -> score`` (higher is better), called from backend workers.
        backend: runs the rounds; ``None`` for a ``LocalBackend(config.pool_size,
            config.torch_threads_per_pod)`` of the tournament's own, made afresh by each :meth:`run`
            and shut down at its end.

    Raises:
        TournamentError: ``run_dir`` already holds a run (use :meth:`resume`) or is open in
            another tournament, or a bad config.
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
    ) -> None:
        """See the class docstring."""
        run_dir = Path(run_dir).resolve()
        check_agent_config(base_agent_config, config.perturb_bounds)
        lock = RunLock(run_dir)
        try:
            if (run_dir / STATE_NAME).exists():
                raise TournamentError(
                    f"{run_dir} already holds a tournament; use Tournament.resume or a new folder"
                )
            (run_dir / PODS_DIR).mkdir(parents=True, exist_ok=True)
            self._setup(config, run_dir, agent_factory, base_agent_config, env_factory, evaluate, backend)
            self._lock: RunLock | None = lock
            self.leaderboard = self._empty_leaderboard(run_dir / LEADERBOARD_DIR, config.leaderboard_size)
            self._rng = np.random.default_rng(config.seed)
            self._progress = Progress()
            self._parked: list[dict[str, Any]] = []
            self._finished = False
            write_config(run_dir, config, base_agent_config)
            self._save_state()
        except BaseException:
            lock.release()
            raise

    @staticmethod
    def _empty_leaderboard(directory: Path, capacity: int) -> Leaderboard:
        """A new board, or the empty one a constructor killed before writing ``state.json`` left."""
        if not (directory / INDEX_NAME).exists():
            return Leaderboard.create(directory, capacity)
        board = Leaderboard.open(directory)
        if board.entries or board.capacity != capacity:
            raise TournamentError(f"{directory} holds another leaderboard; pick a new run folder")
        return board

    def _setup(
        self,
        config: TournamentConfig,
        run_dir: Path,
        agent_factory: AgentFactory,
        base_agent_config: Any,
        env_factory: EnvFactory,
        evaluate: Evaluate,
        backend: Backend | None,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self._agent_factory = agent_factory
        self._env_factory = env_factory
        self._evaluate = evaluate
        self._given_backend = backend
        self.backend: Backend = self._own_backend() if backend is None else backend
        self._generator = Generator(
            base_agent_config=base_agent_config,
            perturb_scale=config.perturb_scale,
            softmax_temperature=config.softmax_temperature,
            perturb_bounds=config.perturb_bounds,
            resample_prob=config.resample_prob,
        )
        self._pods: dict[int, Pod] = {}
        self._retiring: set[int] = set()
        self._on_event: EventCallback | None = None
        self._events: EventLog | None = None
        self._clock_start = time.perf_counter()
        self._seconds_before = 0.0
        self._last_target: int | None = None

    def _own_backend(self) -> LocalBackend:
        return LocalBackend(self.config.pool_size, self.config.torch_threads_per_pod)

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
        """Reopen a run directory (also after the process was killed) to continue with :meth:`run`.

        The leaderboard and budget used are read back; the pods of the pool restart from their
        last snapshots as slots allow (a pod that had not finished a round yet is dropped: the
        generator refills its slot). At most one round per pod is redone.

        Raises:
            SnapshotError: a run file is missing, corrupt or foreign.
            TournamentError: ``base_agent_config`` is not the one the run was started with, or the
                folder is open in another tournament.
        """
        run_dir = Path(run_dir).resolve()
        read_config(run_dir)  # a folder that holds no run is refused before a lock file is made in it
        lock = RunLock(run_dir)
        try:
            config, stored_base = read_config(run_dir)
            state = read_state(run_dir)
            check_agent_config(base_agent_config, config.perturb_bounds)
            if config_to_record(base_agent_config) != stored_base:
                raise TournamentError(
                    f"base_agent_config differs from the one {run_dir / CONFIG_NAME} was started with "
                    f"({stored_base.get('fields') if isinstance(stored_base, dict) else stored_base!r}); "
                    "resume with that one, or start a new run"
                )
            self = cls.__new__(cls)
            self._setup(config, run_dir, agent_factory, base_agent_config, env_factory, evaluate, backend)
            self._lock = lock
            self.leaderboard = Leaderboard.open(run_dir / LEADERBOARD_DIR)
            self._rng = np.random.default_rng()
            self._rng.bit_generator.state = state.rng
            self._progress = state.progress
            self._parked = state.pool
            self._finished = state.finished
            self._seconds_before = self._progress.seconds
            self.leaderboard.remove_unreferenced()
            self._remove_stale_pod_files()
        except BaseException:
            lock.release()
            raise
        return self

    def close(self) -> None:
        """Release the run directory's lock (idempotent); the object cannot :meth:`run` after it."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Tournament:
        """The tournament itself."""
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        """:meth:`close`."""
        self.close()

    # ------------------------------------------------------------------ the loop

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
        if self._lock is None:
            raise TournamentError(f"the tournament of {self.run_dir} is closed; use Tournament.resume")
        self._on_event = on_event
        if self._given_backend is None:
            self.backend = self._own_backend()
        self._clock_start = time.perf_counter()
        self._seconds_before = self._progress.seconds
        in_flight: dict[Future[RoundResult], int] = {}
        self._events = EventLog(self.run_dir)
        try:
            if not self._finished:
                self._fill_pool(in_flight, ready=[])
                self._save_state()
                self._run_lockstep()
            while in_flight:
                ready: list[Pod] = []
                for future in self._next_finished(in_flight):
                    pod_id = in_flight.pop(future)
                    self._judge(self._pods[pod_id], future, ready, in_flight)
                self._fill_pool(in_flight, ready)
                self._save_state()
                self._remove_stale_pod_files()
                self._run_lockstep()
            self._finished = not self._budget_left(0)
            self._save_state()
            self._emit(
                "tournament_finished",
                None,
                rounds=self._progress.rounds,
                best_score=self._best(),
                budget_spent=self._finished,
            )
        except BaseException:
            self.close()
            raise
        finally:
            for future in in_flight:
                future.cancel()
            if self._given_backend is None:
                self.backend.shutdown()
            self._events.close()
            self._events = None
            self._on_event = None
        return TournamentResult(
            leaderboard=self.leaderboard,
            history=list(self._progress.history),
            env_steps=self._progress.env_steps,
            seconds=self._elapsed(),
            rounds=self._progress.rounds,
            crashes=self._progress.crashes,
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
        progress, config = self._progress, self.config
        progress.env_steps += result.env_steps
        progress.rounds += 1
        progress.consecutive_crashes = 0
        progress.last_round_env_steps = result.env_steps
        pod.policy_version += config.eval_every_rounds
        pod.env_steps += result.env_steps
        pod.rounds_since_start += 1
        pod.last_score = result.score
        pod.smoothed_score = smooth(pod.smoothed_score, result.score, config.score_smoothing)
        pod.restored_after_crash = False
        state = pod.agent.state_dict()
        pod.snapshot_name = save_snapshot(
            self.run_dir / PODS_DIR,
            f"pod-{pod.pod_id:06d}-v{pod.policy_version:06d}",
            {AGENT_STATE_KEY: state},
        ).name
        steps_per_s = result.env_steps / result.train_seconds if result.train_seconds > 0 else 0.0
        self._emit(
            "round_finished",
            pod.pod_id,
            score=result.score,
            smoothed_score=pod.smoothed_score,
            round_env_steps=result.env_steps,
            steps_per_s=steps_per_s,
            policy_version=pod.policy_version,
            lineage_env_steps=pod.env_steps,
            metrics=dict(result.metrics),
        )
        entry = self.leaderboard.offer(
            Candidate(
                pod_id=pod.pod_id,
                parent_id=pod.parent_id,
                lineage_id=pod.lineage_id,
                generation=pod.generation,
                policy_version=pod.policy_version,
                score=result.score,
                env_steps=pod.env_steps,
                seed=pod.seed,
                agent_config=config_to_record(pod.agent_config),
            ),
            state,
        )
        if entry is not None:
            self._emit("entry_admitted", pod.pod_id, rank=self.leaderboard.rank_of(entry), score=entry.score)
        scores = tuple(self.leaderboard.scores())
        progress.history.append(HistoryRecord(self._elapsed(), progress.env_steps, self._best(), scores))
        self._mark_retirees()
        if pod.pod_id in self._retiring:
            self._retire(pod, reason=self._shrink_reason())
            return
        others = [p for p in self._pods.values() if p is not pod and p.pod_id not in self._retiring]
        if is_lagging(pod, others, config) and self._budget_left(len(in_flight)):
            better = [
                p for p in others if p.smoothed_score is not None and p.smoothed_score > pod.smoothed_score
            ]
            del self._pods[pod.pod_id]
            successor = self._new_pod(self._donors(better, fallback=False))
            self._emit("pod_replaced", pod.pod_id, reason="lagging", by=successor.pod_id)
            ready.append(successor)
        else:
            ready.append(pod)

    def _crashed(self, pod: Pod, error: BaseException, ready: list[Pod]) -> None:
        progress = self._progress
        progress.crashes += 1
        progress.consecutive_crashes += 1
        self._emit("pod_crashed", pod.pod_id, error=f"{type(error).__name__}: {error}")
        del self._pods[pod.pod_id]
        self._retiring.discard(pod.pod_id)
        if progress.consecutive_crashes > self.config.max_consecutive_crashes:
            if pod.snapshot_name is not None:  # kept for the resume the error message asks for
                self._parked.append(pod_record(pod))
            self._save_state()
            raise TournamentError(
                f"{progress.consecutive_crashes} pod rounds crashed in a row (last: {type(error).__name__}: "
                f"{error}); fix the agent, env or evaluate function, then resume"
            ) from error
        if pod.snapshot_name is not None and not pod.restored_after_crash:
            successor = self._restore(pod_record(pod), reason="crash")
        else:
            successor = self._new_pod(self._donors(list(self._pods.values()), fallback=True))
            self._emit("pod_replaced", pod.pod_id, reason="crash", by=successor.pod_id)
        successor.restored_after_crash = pod.snapshot_name is not None and successor.pod_id == pod.pod_id
        ready.append(successor)

    # ------------------------------------------------------------------ the pool

    def _target(self) -> int:
        """Pods the pool should hold now: the smaller of the backend's slots and the schedule's size."""
        target = pool_target(self.config, self._fraction(), self.backend.slots())
        if target != self._last_target:
            if self._last_target is not None:
                self._emit("pool_resized", None, old=self._last_target, new=target)
            self._last_target = target
        return target

    def _shrink_reason(self) -> str:
        return "schedule" if schedule_phase(self.config, self._fraction()) > 0 else "pool shrank"

    def _mark_retirees(self) -> None:
        """Mark the worst live pods for retirement (at the end of their rounds) while the pool is too big."""
        active = [p for p in self._pods.values() if p.pod_id not in self._retiring]
        for pod in retirees(active, len(active) - self._target()):
            self._retiring.add(pod.pod_id)

    def _fill_pool(self, in_flight: dict[Future[RoundResult], int], ready: list[Pod]) -> None:
        """Submit ready pods, retire the ones the pool has no room or budget for, start new ones."""
        target = self._target()

        def room() -> bool:
            running = sum(1 for pod_id in in_flight.values() if pod_id not in self._retiring)
            return running < target and self._budget_left(len(in_flight))

        for pod in ready:
            if room():
                self._submit(pod, in_flight)
            else:
                self._retire(
                    pod, reason="pool shrank" if self._budget_left(len(in_flight)) else "budget spent"
                )
        while room():
            if self._parked:
                pod = self._restore(self._parked.pop(0), reason="pool grew")
            else:
                pod = self._new_pod(self._donors(list(self._pods.values()), fallback=True))
            self._submit(pod, in_flight)

    def _submit(self, pod: Pod, in_flight: dict[Future[RoundResult], int]) -> None:
        task = RoundTask(
            pod, self.config.eval_every_rounds, self._evaluate, self._agent_factory, self._env_factory
        )
        in_flight[self.backend.submit(task)] = pod.pod_id

    def _fraction(self) -> float:
        return budget_fraction(self.config, self._progress.env_steps, self._elapsed())

    def _budget_left(self, rounds_in_flight: int) -> bool:
        config, progress = self.config, self._progress
        if config.budget_env_steps is not None:
            expected = progress.env_steps + rounds_in_flight * progress.last_round_env_steps
            if expected >= config.budget_env_steps:
                return False
        return config.budget_seconds is None or self._elapsed() < config.budget_seconds

    # ------------------------------------------------------------------ pods

    def _donors(self, pods: list[Pod], fallback: bool) -> list[Donor]:
        """Donors from ``pods``' latest states; with ``fallback``, the leaderboard's if none can donate."""
        donors = live_donors(pods, self.run_dir / PODS_DIR, self._retiring)
        return leaderboard_donors(self.leaderboard) if fallback and not donors else donors

    def _new_pod(self, donors: list[Donor]) -> Pod:
        """A pod from the generator: from scratch, or a child of a donor's state (perturbed).

        Its id is made durable (``state.json`` written) before the pod can write anything, so no
        kill can hand the same id to two agents.
        """
        pod_id = self._progress.next_pod_id
        origin = self._generator.propose(
            donors, fresh_probability(self.config, self._fraction()), self._rng, first=pod_id == 0
        )
        self._progress.next_pod_id += 1
        self._save_state()
        pod = spawn_pod(pod_id, origin, self._agent_factory, self._env_factory)
        self._pods[pod_id] = pod
        parent = origin.parent
        from_leaderboard = parent is not None and parent.snapshot.parent.name == LEADERBOARD_DIR
        self._emit_started(
            pod, origin="scratch" if parent is None else ("leaderboard" if from_leaderboard else "pod")
        )
        return pod

    def _restore(self, record: Mapping[str, Any], reason: str) -> Pod:
        """Rebuild a pod from its record and last snapshot (same id, config, seed and lineage)."""
        pod = restore_pod(record, self.run_dir / PODS_DIR, self._agent_factory, self._env_factory)
        self._pods[pod.pod_id] = pod
        self._emit_started(pod, origin="snapshot", reason=reason)
        return pod

    def _emit_started(self, pod: Pod, **data: Any) -> None:
        self._emit(
            "pod_started",
            pod.pod_id,
            **data,
            parent_id=pod.parent_id,
            lineage_id=pod.lineage_id,
            generation=pod.generation,
            env_steps=pod.env_steps,
            seed=pod.seed,
            agent_config=config_to_record(pod.agent_config)["fields"],
        )

    def _retire(self, pod: Pod, reason: str) -> None:
        del self._pods[pod.pod_id]
        self._retiring.discard(pod.pod_id)
        if pod.snapshot_name is not None:
            self._parked.append(pod_record(pod))
        self._emit("pod_retired", pod.pod_id, reason=reason)

    # ------------------------------------------------------------------ files and events

    def _pool_records(self) -> list[dict[str, Any]]:
        """Pods to restart on resume: the live pool (with a snapshot) then the retired, by order."""
        live = [pod_record(pod) for _, pod in sorted(self._pods.items()) if pod.snapshot_name is not None]
        return live + self._parked

    def _save_state(self) -> None:
        self._progress.seconds = self._elapsed()
        write_state(
            self.run_dir,
            RunState(self._progress, self._finished, self._rng.bit_generator.state, self._pool_records()),
        )

    def _remove_stale_pod_files(self) -> None:
        """Delete pod snapshots ``state.json`` no longer names (call only after saving it)."""
        folder = self.run_dir / PODS_DIR
        used = {record["snapshot_name"] for record in self._pool_records()}
        used |= {pod.snapshot_name for pod in self._pods.values() if pod.snapshot_name is not None}
        stale = [p for p in folder.glob(f"*{SNAPSHOT_SUFFIX}") if p.name not in used]
        stale += list(folder.glob(f".*{TEMP_SUFFIX}"))
        for path in stale:
            path.unlink(missing_ok=True)
        if stale:
            fsync_directory(folder)

    def _elapsed(self) -> float:
        return self._seconds_before + (time.perf_counter() - self._clock_start)

    def _best(self) -> float | None:
        scores = self.leaderboard.scores()
        return scores[0] if scores else None

    def _emit(self, kind: str, pod_id: int | None, **data: Any) -> None:
        event = TournamentEvent(kind, self._elapsed(), self._progress.env_steps, pod_id, data)
        if self._events is not None:
            self._events.write(event)
        if self._on_event is not None:
            self._on_event(event)
