"""The orchestrator: an asynchronous, elastic, resumable tournament of pods.

The loop keeps the training pool full while budget remains. Every pod round runs on the backend; the
orchestrator waits for whichever round finishes first (no barrier, no generations), judges that pod
alone (leaderboard admission, lagging check), and resubmits it or a replacement at once. Before every
submission it reads ``backend.slots()``: when slots grow, new pods start (retired pods first, from
their last snapshots, then pods from the generator); when they shrink, pods are retired as their
current round ends, their last snapshot kept. A round that raises is logged, not fatal: the pod is
restored from its last snapshot, or replaced by a generator pod if it crashes again straight after.

Run directory (all writes atomic; see :mod:`podracer.snapshot`):

* ``config.json``: the :class:`TournamentConfig` and the base agent config.
* ``state.json``: budget used, counters, RNG state, history, and the pool (pods with the file names
  of their last snapshots). Written after every round, after that round's snapshot files.
* ``pods/``: each pod's latest snapshot (immutable, content-named; superseded ones deleted after
  ``state.json`` stops naming them).
* ``leaderboard/``: the :class:`~podracer.leaderboard.Leaderboard`.
* ``events.jsonl``: one JSON event per line (a log; a kill may cut its last line).

Budget: a round is started only while the env steps used plus those expected from the rounds in
flight (the last round's size each) stay below ``budget_env_steps``, and while the wall time used
(summed over resumes) is below ``budget_seconds``. Rounds in flight when it runs out finish and count.

Determinism: with one slot every draw (pod seeds, fresh-or-parent, parent rank, perturbations) comes
from one generator seeded by ``seed``, in submission order, and rounds finish in submission order,
so the same seed gives the same pods, scores and leaderboard (``created_at`` aside) on one machine.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from podracer.backends import Backend, LocalBackend, RoundTask
from podracer.errors import SnapshotError, TournamentError
from podracer.generator import Generator, Origin
from podracer.leaderboard import AGENT_STATE_KEY, INDEX_NAME, Candidate, Leaderboard
from podracer.pod import (
    AgentFactory,
    EnvFactory,
    Evaluate,
    Pod,
    RoundResult,
    check_agent_config,
    config_from_record,
    config_to_record,
)
from podracer.snapshot import (
    SNAPSHOT_SUFFIX,
    TEMP_SUFFIX,
    atomic_write_json,
    fsync_directory,
    load_snapshot,
    read_json_record,
    save_snapshot,
)
from podracer.updater import is_lagging

CONFIG_NAME = "config.json"
STATE_NAME = "state.json"
EVENTS_NAME = "events.jsonl"
PODS_DIR = "pods"
LEADERBOARD_DIR = "leaderboard"
CONFIG_FORMAT = "podracer.tournament-config"
STATE_FORMAT = "podracer.tournament-state"
RUN_FORMAT_VERSION = 1
"""``version`` of ``config.json`` and ``state.json``."""

EVENT_KINDS = (
    "pod_started",
    "round_finished",
    "entry_admitted",
    "pod_replaced",
    "pod_crashed",
    "pod_retired",
    "pool_resized",
    "tournament_finished",
)
"""Kinds of :class:`TournamentEvent`, in no particular order."""


@dataclass(frozen=True)
class TournamentConfig:
    """Settings of a tournament; every field is required but the last two, documented with theirs.

    Attributes:
        pool_size: slots of the default :class:`~podracer.backends.LocalBackend` (used when no
            backend is given); with a backend, the pool follows ``backend.slots()`` instead.
        leaderboard_size: ``K``, snapshots kept on the leaderboard.
        budget_env_steps: total env transitions the tournament may train on, or ``None``.
        budget_seconds: total wall time, summed over resumes, or ``None``. At least one budget is set.
        fresh_pod_prob: probability that a new pod starts from scratch instead of from a leader.
        perturb_scale: ``s``; inherited hyper-parameters are scaled by factors in ``[1/(1+s), 1+s]``.
        softmax_temperature: temperature of the rank-softmax choice of a parent (> 0).
        eval_every_rounds: agent training rounds per pod round (each pod round ends in one evaluation).
        seed: seeds the tournament's generator (pod seeds, parent choices, perturbations).
        lagging_rounds: pod rounds before a pod may be judged lagging (below the leaderboard median)
            and replaced; default 2.
        max_consecutive_crashes: rounds in a row, across the pool, that may crash before the
            tournament gives up with :class:`~podracer.errors.TournamentError`; default 5.
    """

    pool_size: int
    leaderboard_size: int
    budget_env_steps: int | None
    budget_seconds: float | None
    fresh_pod_prob: float
    perturb_scale: float
    softmax_temperature: float
    eval_every_rounds: int
    seed: int
    lagging_rounds: int = 2
    max_consecutive_crashes: int = 5

    def __post_init__(self) -> None:
        """Reject settings the tournament cannot run with; each message names the field and the fix."""
        checks = [
            (self.pool_size >= 1, f"pool_size is {self.pool_size}; use at least 1"),
            (self.leaderboard_size >= 1, f"leaderboard_size is {self.leaderboard_size}; use at least 1"),
            (
                self.budget_env_steps is not None or self.budget_seconds is not None,
                "no budget: set budget_env_steps and/or budget_seconds",
            ),
            (
                self.budget_env_steps is None or self.budget_env_steps > 0,
                f"budget_env_steps is {self.budget_env_steps}; use a positive count or None",
            ),
            (
                self.budget_seconds is None
                or (math.isfinite(self.budget_seconds) and self.budget_seconds > 0),
                f"budget_seconds is {self.budget_seconds}; use a positive number of seconds or None",
            ),
            (
                0.0 <= self.fresh_pod_prob <= 1.0,
                f"fresh_pod_prob is {self.fresh_pod_prob}; use a value in [0, 1]",
            ),
            (
                math.isfinite(self.perturb_scale) and self.perturb_scale >= 0.0,
                f"perturb_scale is {self.perturb_scale}; use a value >= 0",
            ),
            (
                math.isfinite(self.softmax_temperature) and self.softmax_temperature > 0.0,
                f"softmax_temperature is {self.softmax_temperature}; use a value > 0",
            ),
            (self.eval_every_rounds >= 1, f"eval_every_rounds is {self.eval_every_rounds}; use at least 1"),
            (self.seed >= 0, f"seed is {self.seed}; use a non-negative integer"),
            (self.lagging_rounds >= 1, f"lagging_rounds is {self.lagging_rounds}; use at least 1"),
            (
                self.max_consecutive_crashes >= 1,
                f"max_consecutive_crashes is {self.max_consecutive_crashes}; use at least 1",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise TournamentError(f"TournamentConfig: {message}")


@dataclass(frozen=True)
class TournamentEvent:
    """Something that happened, for progress bars and logs.

    Attributes:
        kind: one of :data:`EVENT_KINDS`.
        elapsed_s: tournament wall time so far (summed over resumes), seconds.
        env_steps: tournament env steps used so far.
        pod_id: the pod concerned, if any.
        data: details by kind, JSON-ready: ``round_finished``: ``score``, ``round_env_steps``,
            ``steps_per_s``, ``policy_version``, ``metrics`` (the agent's round diagnostics, e.g. PPO's
            losses, entropy, approximate KL, clip fraction, explained variance, learning rate);
            ``entry_admitted``: ``rank``, ``score``;
            ``pod_started``: ``origin`` (``scratch``/``leaderboard``/``snapshot``), ``parent_id``,
            ``generation``, ``agent_config`` (and ``reason`` for ``snapshot``); ``pod_replaced``:
            ``reason``, ``by``; ``pod_crashed``: ``error``; ``pod_retired``: ``reason``;
            ``pool_resized``: ``old``, ``new``;
            ``tournament_finished``: ``rounds``, ``best_score``, ``budget_spent``.
    """

    kind: str
    elapsed_s: float
    env_steps: int
    pod_id: int | None
    data: Mapping[str, Any]


@dataclass(frozen=True)
class HistoryRecord:
    """The leaderboard after one pod round.

    Attributes:
        elapsed_s: tournament wall time, seconds.
        env_steps: tournament env steps used.
        best_score: the leaderboard's best score, ``None`` while empty.
        scores: all leaderboard scores, best first.
    """

    elapsed_s: float
    env_steps: int
    best_score: float | None
    scores: tuple[float, ...]


@dataclass(frozen=True)
class TournamentResult:
    """What :meth:`Tournament.run` returns.

    Attributes:
        leaderboard: the final leaderboard.
        history: the leaderboard over time, one record per pod round.
        env_steps: env steps used in total.
        seconds: wall time used in total (over resumes), seconds.
        rounds: pod rounds finished.
        crashes: pod rounds that raised.
    """

    leaderboard: Leaderboard
    history: list[HistoryRecord]
    env_steps: int
    seconds: float
    rounds: int
    crashes: int


EventCallback = Callable[[TournamentEvent], None]


@dataclass
class _Progress:
    env_steps: int = 0
    seconds: float = 0.0
    rounds: int = 0
    crashes: int = 0
    consecutive_crashes: int = 0
    next_pod_id: int = 0
    last_round_env_steps: int = 0
    history: list[HistoryRecord] = field(default_factory=list)


class Tournament:
    """A tournament of pods in a run directory; see the module docstring.

    Args:
        config: the tournament settings.
        run_dir: an empty or missing folder for the run's files.
        agent_factory: ``(agent_config, seed) -> agent`` (e.g. a ``PPOAgent``).
        base_agent_config: hyper-parameters of pods from scratch (a dataclass with ``PERTURBABLE``).
        env_factory: ``seed -> TensorVectorEnv``, each pod's own training env.
        evaluate: ``policy -> score`` (higher is better), called from backend workers.
        backend: runs the rounds; ``None`` for a ``LocalBackend(config.pool_size)`` of the
            tournament's own, made afresh by each :meth:`run` and shut down at its end.

    Raises:
        TournamentError: ``run_dir`` already holds a run (use :meth:`resume`), or a bad config.
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
        if (run_dir / STATE_NAME).exists():
            raise TournamentError(
                f"{run_dir} already holds a tournament; use Tournament.resume or a new folder"
            )
        check_agent_config(base_agent_config)
        (run_dir / PODS_DIR).mkdir(parents=True, exist_ok=True)
        self._setup(config, run_dir, agent_factory, base_agent_config, env_factory, evaluate, backend)
        self.leaderboard = self._empty_leaderboard(run_dir / LEADERBOARD_DIR, config.leaderboard_size)
        self._rng = np.random.default_rng(config.seed)
        self._progress = _Progress()
        self._parked: list[dict[str, Any]] = []
        self._finished = False
        atomic_write_json(
            run_dir / CONFIG_NAME,
            {
                "format": CONFIG_FORMAT,
                "version": RUN_FORMAT_VERSION,
                "tournament": dataclasses.asdict(config),
                "base_agent_config": config_to_record(base_agent_config),
            },
        )
        self._save_state()

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
        self.backend: Backend = LocalBackend(config.pool_size) if backend is None else backend
        self._generator = Generator(
            base_agent_config=base_agent_config,
            fresh_pod_prob=config.fresh_pod_prob,
            perturb_scale=config.perturb_scale,
            softmax_temperature=config.softmax_temperature,
        )
        self._pods: dict[int, Pod] = {}
        self._on_event: EventCallback | None = None
        self._events: TextIO | None = None
        self._clock_start = time.perf_counter()
        self._seconds_before = 0.0
        self._last_slots: int | None = None

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
            TournamentError: ``base_agent_config`` is not the one the run was started with.
        """
        run_dir = Path(run_dir).resolve()
        config_record = read_json_record(run_dir / CONFIG_NAME, CONFIG_FORMAT, RUN_FORMAT_VERSION)
        state = read_json_record(run_dir / STATE_NAME, STATE_FORMAT, RUN_FORMAT_VERSION)
        try:
            config = TournamentConfig(**config_record["tournament"])
            check_agent_config(base_agent_config)
            stored_base = config_record["base_agent_config"]
            if config_to_record(base_agent_config) != stored_base:
                raise TournamentError(
                    f"base_agent_config differs from the one {run_dir / CONFIG_NAME} was started with "
                    f"({stored_base.get('fields') if isinstance(stored_base, dict) else stored_base!r}); "
                    "resume with that one, or start a new run"
                )
            self = cls.__new__(cls)
            self._setup(config, run_dir, agent_factory, base_agent_config, env_factory, evaluate, backend)
            self.leaderboard = Leaderboard.open(run_dir / LEADERBOARD_DIR)
            self._rng = np.random.default_rng()
            self._rng.bit_generator.state = state["rng"]
            self._progress = _Progress(
                env_steps=int(state["env_steps"]),
                seconds=float(state["seconds"]),
                rounds=int(state["rounds"]),
                crashes=int(state["crashes"]),
                consecutive_crashes=int(state["consecutive_crashes"]),
                next_pod_id=int(state["next_pod_id"]),
                last_round_env_steps=int(state["last_round_env_steps"]),
                history=[
                    HistoryRecord(r["elapsed_s"], r["env_steps"], r["best_score"], tuple(r["scores"]))
                    for r in state["history"]
                ],
            )
            self._parked = [dict(record) for record in state["pool"]]
            self._finished = bool(state["finished"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(
                f"{run_dir / STATE_NAME} is malformed ({exc!r}): corrupt or foreign"
            ) from None
        self._seconds_before = self._progress.seconds
        self.leaderboard.remove_unreferenced()
        self._remove_stale_pod_files()
        return self

    # ------------------------------------------------------------------ the loop

    def run(self, on_event: EventCallback | None = None) -> TournamentResult:
        """Train until the budget is spent; returns the leaderboard and its history.

        It also returns, budget left, when the backend reports 0 slots and no round is in flight;
        calling ``run`` again (or :meth:`resume`) continues.

        Args:
            on_event: called in this thread with every :class:`TournamentEvent`.
        """
        self._on_event = on_event
        if self._given_backend is None:
            self.backend = LocalBackend(self.config.pool_size)
        self._clock_start = time.perf_counter()
        self._seconds_before = self._progress.seconds
        in_flight: dict[Future[RoundResult], int] = {}
        events_path = self.run_dir / EVENTS_NAME
        with events_path.open("a", encoding="utf-8") as events:
            if _ends_mid_line(events_path):
                events.write("\n")
            self._events = events
            try:
                if not self._finished:
                    self._fill_pool(in_flight, ready=[])
                while in_flight:
                    done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                    ready: list[Pod] = []
                    for future in sorted(done, key=lambda f: in_flight[f]):
                        pod_id = in_flight.pop(future)
                        self._judge(self._pods[pod_id], future, ready, len(in_flight))
                    self._fill_pool(in_flight, ready)
                    self._save_state()
                    self._remove_stale_pod_files()
                self._finished = not self._budget_left(0)
                self._save_state()
                self._emit(
                    "tournament_finished",
                    None,
                    rounds=self._progress.rounds,
                    best_score=self._best(),
                    budget_spent=self._finished,
                )
            finally:
                for future in in_flight:
                    future.cancel()
                if self._given_backend is None:
                    self.backend.shutdown()
                self._events = None
        return TournamentResult(
            leaderboard=self.leaderboard,
            history=list(self._progress.history),
            env_steps=self._progress.env_steps,
            seconds=self._elapsed(),
            rounds=self._progress.rounds,
            crashes=self._progress.crashes,
        )

    def _judge(self, pod: Pod, future: Future[RoundResult], ready: list[Pod], rounds_in_flight: int) -> None:
        """Account for a finished round of ``pod``; put it (or its replacement) in ``ready``.

        A lagging pod is replaced only while budget is left (else it is retired like the others).
        """
        error = future.exception()
        if error is not None:
            self._crashed(pod, error, ready)
            return
        result = future.result()
        progress = self._progress
        progress.env_steps += result.env_steps
        progress.rounds += 1
        progress.consecutive_crashes = 0
        progress.last_round_env_steps = result.env_steps
        pod.policy_version += self.config.eval_every_rounds
        pod.env_steps += result.env_steps
        pod.rounds_since_start += 1
        pod.last_score = result.score
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
            round_env_steps=result.env_steps,
            steps_per_s=steps_per_s,
            policy_version=pod.policy_version,
            metrics=dict(result.metrics),
        )
        entry = self.leaderboard.offer(
            Candidate(
                pod_id=pod.pod_id,
                parent_id=pod.parent_id,
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
        lagging = is_lagging(
            result.score, pod.rounds_since_start, self.leaderboard, self.config.lagging_rounds
        )
        if lagging and self._budget_left(rounds_in_flight):
            del self._pods[pod.pod_id]
            successor = self._new_pod()
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
        if progress.consecutive_crashes > self.config.max_consecutive_crashes:
            if pod.snapshot_name is not None:  # kept for the resume the error message asks for
                self._parked.append(self._pod_record(pod))
            self._save_state()
            raise TournamentError(
                f"{progress.consecutive_crashes} pod rounds crashed in a row (last: {type(error).__name__}: "
                f"{error}); fix the agent, env or evaluate function, then resume"
            ) from error
        if pod.snapshot_name is not None and not pod.restored_after_crash:
            successor = self._restore(self._pod_record(pod), reason="crash")
        else:
            successor = self._new_pod()
            self._emit("pod_replaced", pod.pod_id, reason="crash", by=successor.pod_id)
        successor.restored_after_crash = pod.snapshot_name is not None and successor.pod_id == pod.pod_id
        ready.append(successor)

    def _fill_pool(self, in_flight: dict[Future[RoundResult], int], ready: list[Pod]) -> None:
        """Submit ready pods, retire the ones the pool has no room or budget for, start new ones."""
        slots = self.backend.slots()
        if slots != self._last_slots:
            if self._last_slots is not None:
                self._emit("pool_resized", None, old=self._last_slots, new=slots)
            self._last_slots = slots
        for pod in ready:
            if len(in_flight) < slots and self._budget_left(len(in_flight)):
                self._submit(pod, in_flight)
            else:
                self._retire(pod, reason="pool shrank" if len(in_flight) >= slots else "budget spent")
        while len(in_flight) < slots and self._budget_left(len(in_flight)):
            pod = self._restore(self._parked.pop(0), reason="pool grew") if self._parked else self._new_pod()
            self._submit(pod, in_flight)

    def _submit(self, pod: Pod, in_flight: dict[Future[RoundResult], int]) -> None:
        task = RoundTask(
            pod, self.config.eval_every_rounds, self._evaluate, self._agent_factory, self._env_factory
        )
        in_flight[self.backend.submit(task)] = pod.pod_id

    def _budget_left(self, rounds_in_flight: int) -> bool:
        config, progress = self.config, self._progress
        if config.budget_env_steps is not None:
            expected = progress.env_steps + rounds_in_flight * progress.last_round_env_steps
            if expected >= config.budget_env_steps:
                return False
        return config.budget_seconds is None or self._elapsed() < config.budget_seconds

    # ------------------------------------------------------------------ pods

    def _new_pod(self) -> Pod:
        """A pod from the generator (from scratch or from a leader, hyper-parameters perturbed)."""
        origin: Origin = self._generator.propose(self.leaderboard, self._rng)
        pod_id = self._progress.next_pod_id
        self._progress.next_pod_id += 1
        agent = self._agent_factory(origin.agent_config, origin.seed)
        parent = origin.parent
        if parent is not None:
            agent.load_weights_from(
                self.leaderboard.load_state(self.leaderboard.rank_of(parent)), keep_optimizer=True
            )
        pod = Pod(
            pod_id=pod_id,
            parent_id=None if parent is None else parent.pod_id,
            generation=0 if parent is None else parent.generation + 1,
            seed=origin.seed,
            agent_config=origin.agent_config,
            agent=agent,
            env=self._env_factory(origin.seed),
            policy_version=0 if parent is None else parent.policy_version,
            env_steps=0 if parent is None else parent.env_steps,
        )
        self._pods[pod_id] = pod
        self._emit(
            "pod_started",
            pod_id,
            origin="scratch" if parent is None else "leaderboard",
            parent_id=pod.parent_id,
            generation=pod.generation,
            agent_config=config_to_record(origin.agent_config)["fields"],
        )
        return pod

    def _restore(self, record: Mapping[str, Any], reason: str) -> Pod:
        """Rebuild a pod from its record and last snapshot (same id, config, seed and lineage)."""
        config = config_from_record(record["agent_config"])
        seed = int(record["seed"])
        agent = self._agent_factory(config, seed)
        payload = load_snapshot(self.run_dir / PODS_DIR / str(record["snapshot_name"]))
        agent.load_state_dict(payload[AGENT_STATE_KEY])
        pod = Pod(
            pod_id=int(record["pod_id"]),
            parent_id=record["parent_id"],
            generation=int(record["generation"]),
            seed=seed,
            agent_config=config,
            agent=agent,
            env=self._env_factory(seed),
            policy_version=int(record["policy_version"]),
            env_steps=int(record["env_steps"]),
            rounds_since_start=0,
            last_score=record["last_score"],
            snapshot_name=str(record["snapshot_name"]),
        )
        self._pods[pod.pod_id] = pod
        self._emit(
            "pod_started",
            pod.pod_id,
            origin="snapshot",
            reason=reason,
            parent_id=pod.parent_id,
            generation=pod.generation,
            agent_config=record["agent_config"]["fields"],
        )
        return pod

    def _retire(self, pod: Pod, reason: str) -> None:
        del self._pods[pod.pod_id]
        if pod.snapshot_name is not None:
            self._parked.append(self._pod_record(pod))
        self._emit("pod_retired", pod.pod_id, reason=reason)

    @staticmethod
    def _pod_record(pod: Pod) -> dict[str, Any]:
        return {
            "pod_id": pod.pod_id,
            "parent_id": pod.parent_id,
            "generation": pod.generation,
            "seed": pod.seed,
            "agent_config": config_to_record(pod.agent_config),
            "policy_version": pod.policy_version,
            "env_steps": pod.env_steps,
            "last_score": pod.last_score,
            "snapshot_name": pod.snapshot_name,
        }

    # ------------------------------------------------------------------ files and events

    def _pool_records(self) -> list[dict[str, Any]]:
        """Pods to restart on resume: the live pool (with a snapshot) then the retired, by order."""
        live = [
            self._pod_record(pod) for _, pod in sorted(self._pods.items()) if pod.snapshot_name is not None
        ]
        return live + self._parked

    def _save_state(self) -> None:
        self._progress.seconds = self._elapsed()
        progress = self._progress
        atomic_write_json(
            self.run_dir / STATE_NAME,
            {
                "format": STATE_FORMAT,
                "version": RUN_FORMAT_VERSION,
                "finished": self._finished,
                "env_steps": progress.env_steps,
                "seconds": progress.seconds,
                "rounds": progress.rounds,
                "crashes": progress.crashes,
                "consecutive_crashes": progress.consecutive_crashes,
                "next_pod_id": progress.next_pod_id,
                "last_round_env_steps": progress.last_round_env_steps,
                "rng": self._rng.bit_generator.state,
                "pool": self._pool_records(),
                "history": [dataclasses.asdict(record) for record in progress.history],
            },
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
            self._events.write(json.dumps(dataclasses.asdict(event), sort_keys=True) + "\n")
            self._events.flush()
        if self._on_event is not None:
            self._on_event(event)


def _ends_mid_line(path: Path) -> bool:
    """Whether a non-empty text file's last line lacks its newline (a write cut by a kill)."""
    with path.open("rb") as handle:
        if handle.seek(0, os.SEEK_END) == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """The events of a run directory's ``events.jsonl``; a line cut by a kill is skipped."""
    path = Path(run_dir) / EVENTS_NAME
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
