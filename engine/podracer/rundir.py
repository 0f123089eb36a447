"""A tournament's run directory held open: its lock, its state, its files, a new run or a resumed one.

:meth:`RunDirectory.create` starts a run in an empty or missing folder; :meth:`RunDirectory.open`
reopens one (also after the process was killed). Either takes the folder's OS lock first
(:class:`~podracer.runfiles.RunLock`) and releases it again if anything fails; the lock is then held
until :meth:`RunDirectory.release`. The open directory holds what ``state.json`` stores (the
counters, the finished flag, the tournament's random generator; the pool is the ledger's,
:mod:`podracer.ledger`), the clock that measures the budget, and the event log. The files' layout
and formats are in :mod:`podracer.runfiles`.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from podracer.archive import TrajectoryArchive
from podracer.config import TournamentConfig
from podracer.errors import SnapshotError, TournamentError
from podracer.events import EventCallback, EventLog, TournamentEvent, events_size, truncate_events
from podracer.leaderboard import INDEX_NAME, Leaderboard, encode_agent_state
from podracer.pod import config_to_record
from podracer.runfiles import (
    ARCHIVE_DIR,
    CONFIG_NAME,
    LEADERBOARD_DIR,
    PODS_DIR,
    STATE_NAME,
    Progress,
    RunLock,
    RunState,
    read_config,
    read_state,
    state_record,
    write_config,
)
from podracer.schedule import budget_fraction, budget_left, schedule_fraction
from podracer.snapshot import (
    SNAPSHOT_SUFFIX,
    TEMP_SUFFIX,
    EncodedSnapshot,
    atomic_write_json,
    fsync_directory,
    write_snapshot_file,
)
from podracer.writer import OrderedWriter


class RunDirectory:
    """An open, locked run directory; use :meth:`create` or :meth:`open`.

    Attributes:
        path: the folder (absolute).
        config: the tournament settings the run was started with.
        leaderboard: its :class:`~podracer.leaderboard.Leaderboard`.
        archive: its :class:`~podracer.archive.TrajectoryArchive` (``None`` when ``archive_size`` is 0).
        progress: the counters and history, updated by the tournament, saved by :meth:`save_state`.
        finished: the budget was spent.
        rng: the tournament's generator (pod seeds, donor choices, perturbations), its state saved too.
        parked: records of the pods to restart, as ``state.json`` held them when the run was opened.
        budget: the budget as it is spent (its clock counts wall time over resumes).
    """

    def __init__(
        self,
        path: Path,
        config: TournamentConfig,
        lock: RunLock,
        leaderboard: Leaderboard,
        state: RunState,
        *,
        resuming: bool = False,
    ) -> None:
        """Use :meth:`create` or :meth:`open`."""
        self.path = path
        self.config = config
        self.leaderboard = leaderboard
        self.archive = _archive(path, config, state.progress.rounds, resuming=resuming)
        self.progress = state.progress
        self.finished = state.finished
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = state.rng
        self.parked = list(state.pool)
        self.budget = BudgetClock(config, self.progress)
        self._lock: RunLock | None = lock
        self._writer = OrderedWriter()
        leaderboard.write_through(self._writer)
        if self.archive is not None:
            self.archive.write_through(self._writer)
        self._events: EventLog | None = None
        self._on_event: EventCallback | None = None

    @classmethod
    def create(cls, path: Path, config: TournamentConfig, base_agent_config: Any) -> RunDirectory:
        """Start a run in ``path`` (created if missing): lock, ``pods/``, an empty leaderboard,
        ``config.json``, then the first ``state.json`` (no pod yet, the generator seeded by ``config.seed``).

        Raises:
            TournamentError: ``path`` already holds a run (open it instead) or another leaderboard,
                or is open in another tournament.
        """
        path = Path(path).resolve()
        lock = RunLock(path)
        directory: RunDirectory | None = None
        try:
            if (path / STATE_NAME).exists():
                raise TournamentError(
                    f"{path} already holds a tournament; use Tournament.resume or a new folder"
                )
            (path / PODS_DIR).mkdir(parents=True, exist_ok=True)
            leaderboard = _empty_leaderboard(path / LEADERBOARD_DIR, config.leaderboard_size)
            write_config(path, config, base_agent_config)
            rng = np.random.default_rng(config.seed).bit_generator.state
            directory = cls(path, config, lock, leaderboard, RunState(Progress(), False, rng, []))
            directory.save_state([])
            directory.flush_writes()
        except BaseException:
            if directory is not None:
                with contextlib.suppress(Exception):
                    directory._writer.close()  # no write may run on once the lock is gone
            lock.release()
            raise
        return directory

    @classmethod
    def open(cls, path: Path, config: TournamentConfig, base_agent_config: Any) -> RunDirectory:
        """Reopen the run in ``path``: lock, check it was started with these settings, read its state,
        and delete what a kill left behind: snapshots neither the leaderboard nor the state names, temp
        files of interrupted writes (``state.json``'s and ``config.json``'s among them), and
        the events logged after the state was saved (the resumed run redoes their work and logs it
        again, so each judged round is logged once: the DSR counts them as trials).

        Raises:
            SnapshotError: a run file is missing, corrupt or foreign.
            TournamentError: ``config`` or ``base_agent_config`` is not the one the run was started
                with, or the folder is open in another tournament.
        """
        path = Path(path).resolve()
        read_config(path)  # a folder that holds no run is refused before a lock file is made in it
        lock = RunLock(path)
        directory: RunDirectory | None = None
        try:
            stored, stored_base = read_config(path)
            state = read_state(path)
            if stored != config:
                raise TournamentError(
                    f"the tournament config differs from the one {path / CONFIG_NAME} was started with; "
                    "resume with that one (Tournament.resume reads it), or start a new run"
                )
            if config_to_record(base_agent_config) != stored_base:
                raise TournamentError(
                    f"base_agent_config differs from the one {path / CONFIG_NAME} was started with "
                    f"({stored_base.get('fields') if isinstance(stored_base, dict) else stored_base!r}); "
                    "resume with that one, or start a new run"
                )
            if state.progress.events_bytes is not None:
                truncate_events(path, state.progress.events_bytes)
            directory = cls(
                path, config, lock, Leaderboard.open(path / LEADERBOARD_DIR), state, resuming=True
            )
            directory.leaderboard.remove_unreferenced()
            if directory.archive is not None:
                directory.archive.remove_unreferenced()
            directory.remove_stale_pod_files({record["snapshot_name"] for record in state.pool})
            directory._writer.submit(_remove_run_file_temps, path)
            directory.flush_writes()
        except BaseException:
            if directory is not None:
                with contextlib.suppress(Exception):
                    directory._writer.close()  # no write may run on once the lock is gone
            lock.release()
            raise
        return directory

    @property
    def is_open(self) -> bool:
        """Whether this object still holds the folder's lock."""
        return self._lock is not None

    def release(self) -> None:
        """Finish the queued writes, then release the folder's lock (idempotent).

        Raises:
            BaseException: the error of a queued write that failed (the lock is released anyway).
        """
        if self._lock is not None:
            try:
                self._writer.close()
            finally:
                self.leaderboard.write_through(None)
                if self.archive is not None:
                    self.archive.write_through(None)
                self._lock.release()
                self._lock = None

    def flush_writes(self) -> None:
        """Wait until every queued write (snapshots, ``state.json``, deletions) is on disk.

        Raises:
            BaseException: the error of a queued write that failed.
        """
        self._writer.flush()

    # ------------------------------------------------------------------ files

    @property
    def pods_dir(self) -> Path:
        """``pods/``: each pod's latest snapshot."""
        return self.path / PODS_DIR

    def save_state(self, pool: list[dict[str, Any]]) -> None:
        """Queue ``state.json``'s write (after every write queued before it): the counters (wall
        time up to now), the finished flag, the generator's state, and ``pool``, the records of the
        pods to restart on resume. Its content is taken now."""
        self.progress.seconds = self.budget.elapsed()
        self.progress.events_bytes = self._events.size if self._events is not None else events_size(self.path)
        record = state_record(RunState(self.progress, self.finished, self.rng.bit_generator.state, pool))
        self._writer.submit(atomic_write_json, self.path / STATE_NAME, record, None)

    def save_pod_snapshot(
        self,
        pod_id: int,
        policy_version: int,
        agent_state: dict[str, Any],
        encoded: EncodedSnapshot | None = None,
    ) -> str:
        """Queue a pod's snapshot for ``pods/``; returns its file name.

        The bytes are made now (the agent trains on afterwards), or taken from ``encoded`` (the
        same state already encoded, :func:`~podracer.snapshot.encode_agent_state`); the file is
        written in the background, before any ``state.json`` queued later (:meth:`flush_writes`
        waits for it).
        """
        encoded = encoded or encode_agent_state(agent_state)
        path = encoded.path(self.pods_dir, f"pod-{pod_id:06d}-v{policy_version:06d}")
        self._writer.submit(write_snapshot_file, path, encoded.data, size=len(encoded.data))
        return path.name

    def remove_stale_pod_files(self, used: set[str]) -> None:
        """Queue the deletion of the pod snapshots not named in ``used`` and of temp files of
        interrupted writes (call only after :meth:`save_state` stopped naming them)."""
        self._writer.submit(_remove_stale_pod_files, self.pods_dir, frozenset(used))

    # ------------------------------------------------------------------ events

    def open_events(self, on_event: EventCallback | None) -> None:
        """Append events to ``events.jsonl`` (and pass them to ``on_event``) until :meth:`close_events`."""
        self._on_event = on_event
        self._events = EventLog(self.path)

    def close_events(self) -> None:
        """Close the event log."""
        if self._events is not None:
            self._events.close()
        self._events = None
        self._on_event = None

    def emit(self, kind: str, pod_id: int | None, **data: Any) -> None:
        """Record a :class:`~podracer.events.TournamentEvent`, stamped with the budget's clock and steps."""
        event = TournamentEvent(kind, self.budget.elapsed(), self.progress.env_steps, pod_id, data)
        if self._events is not None:
            self._events.write(event)
        if self._on_event is not None:
            self._on_event(event)


class BudgetClock:
    """The budget as a run spends it: env steps from its progress, wall time summed over resumes.

    Args:
        config: the budgets.
        progress: the run's counters (read live; ``progress.seconds`` is the time used before).
    """

    def __init__(self, config: TournamentConfig, progress: Progress) -> None:
        """See the class docstring; the clock starts now."""
        self._config = config
        self._progress = progress
        self.restart()

    def restart(self) -> None:
        """Start counting again from ``progress.seconds`` (at the start of every run)."""
        self._started = time.perf_counter()
        self._before = self._progress.seconds

    def elapsed(self) -> float:
        """Wall time used, seconds (summed over resumes)."""
        return self._before + (time.perf_counter() - self._started)

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` (>= 0) of the wall time since the last restart out of the budget."""
        self._before -= seconds

    def fraction(self) -> float:
        """Spent share of the budget (:func:`budget_fraction`)."""
        return budget_fraction(self._config, self._progress.env_steps, self.elapsed())

    def schedule_fraction(self) -> float:
        """Spent share a learning-rate schedule follows (:func:`schedule_fraction`)."""
        return schedule_fraction(self._config, self._progress.env_steps, self.elapsed())

    def left(self, rounds_in_flight: int) -> bool:
        """Whether a round may start with ``rounds_in_flight`` running (:func:`budget_left`)."""
        progress = self._progress
        return budget_left(
            self._config, progress.env_steps, progress.last_round_env_steps, rounds_in_flight, self.elapsed()
        )


def _remove_stale_pod_files(folder: Path, used: frozenset[str]) -> None:
    stale = [p for p in folder.glob(f"*{SNAPSHOT_SUFFIX}") if p.name not in used]
    stale += list(folder.glob(f".*{TEMP_SUFFIX}"))
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        fsync_directory(folder)


def _remove_run_file_temps(folder: Path) -> None:
    """Delete the temp files of interrupted writes of ``state.json`` and ``config.json`` (a kill
    between a temp file's creation and its rename leaves one, and ``state.json`` is written every round)."""
    stale = [p for name in (STATE_NAME, CONFIG_NAME) for p in folder.glob(f".{name}.*{TEMP_SUFFIX}")]
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        fsync_directory(folder)


def _empty_leaderboard(directory: Path, capacity: int) -> Leaderboard:
    """A new board, or the empty one a constructor killed before writing ``state.json`` left."""
    if not (directory / INDEX_NAME).exists():
        return Leaderboard.create(directory, capacity)
    board = Leaderboard.open(directory)
    if board.entries or board.capacity != capacity:
        raise TournamentError(f"{directory} holds another leaderboard; pick a new run folder")
    return board


def _archive(
    path: Path, config: TournamentConfig, judged_rounds: int, *, resuming: bool
) -> TrajectoryArchive | None:
    """The run's trajectory archive (``None`` when ``archive_size`` is 0).

    A new run creates it (refused when the folder holds a non-empty one). A resumed run opens it and
    drops the entries of rounds after the ``judged_rounds`` its saved state counts (a kill between
    the archive's write and the state's: those rounds are judged again).

    Raises:
        SnapshotError: a resumed run that has judged rounds has no archive index (it was deleted).
        TournamentError: the folder holds another archive.
    """
    if config.archive_size == 0:
        return None
    directory = path / ARCHIVE_DIR
    if not resuming or not (directory / INDEX_NAME).exists():
        if resuming and judged_rounds > 0:
            raise SnapshotError(
                f"{directory / INDEX_NAME} is missing although the run has judged {judged_rounds} "
                "rounds: its trajectory archive was deleted; restore the folder or start a new run"
            )
        return TrajectoryArchive.create(directory, config.archive_size, config.archive_rule)
    archive = TrajectoryArchive.open(directory)
    if archive.capacity != config.archive_size or archive.rule != config.archive_rule:
        raise TournamentError(f"{directory} holds another archive; pick a new run folder")
    archive.forget_after(judged_rounds)
    return archive
