"""A tournament's run directory on disk: its lock, ``config.json``, ``state.json`` and pod records.

:class:`podracer.rundir.RunDirectory` holds one open; this module is the files' layout and formats.

Layout (all writes atomic; see :mod:`podracer.snapshot`):

* ``lock``: held with ``fcntl.flock`` by the one :class:`~podracer.Tournament` that has the folder
  open (the OS drops it when that process dies); it holds that process's id.
* ``config.json``: the :class:`~podracer.TournamentConfig` and the base agent config.
* ``state.json``: budget used, counters (the next pod id among them), RNG state, history, and the
  pool (pods with the file names of their last snapshots). Written whenever a pod id is handed out,
  before that pod can write anything, and after every judged round, after that round's snapshot.
* ``pods/``: each pod's latest snapshot (immutable, content-named; superseded ones deleted after
  ``state.json`` stops naming them).
* ``leaderboard/``: the :class:`~podracer.leaderboard.Leaderboard`.
* ``archive/``: the :class:`~podracer.archive.TrajectoryArchive`, when ``archive_size`` > 0.
* ``events.jsonl``: one JSON event per line (a log; a kill may cut its last line). ``state.json``
  holds its length when it was saved; a resume cuts the events after it (their work is redone).
"""

from __future__ import annotations

import copy
import dataclasses
import fcntl
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from podracer.config import TournamentConfig
from podracer.errors import SnapshotError, TournamentError
from podracer.events import HistoryRecord
from podracer.pod import Pod, config_to_record
from podracer.snapshot import atomic_write_json, read_json_record

LOCK_NAME = "lock"
CONFIG_NAME = "config.json"
STATE_NAME = "state.json"
PODS_DIR = "pods"
LEADERBOARD_DIR = "leaderboard"
ARCHIVE_DIR = "archive"
CONFIG_FORMAT = "podracer.tournament-config"
STATE_FORMAT = "podracer.tournament-state"
RUN_FORMAT_VERSION = 2
"""``version`` of ``config.json`` and ``state.json`` (2: pods carry their lineage and smoothed score)."""


class RunLock:
    """An exclusive OS lock on a run directory, held until :meth:`release` (or the process ends).

    Raises:
        TournamentError: another open tournament (in this or another process) holds the folder.
    """

    def __init__(self, run_dir: Path) -> None:
        """Take the lock of ``run_dir`` (created if missing) without waiting."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LOCK_NAME
        handle: TextIO = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise TournamentError(
                f"{run_dir} is in use by another open tournament (process {holder}); wait for it to "
                "finish, close it, or use another folder"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle: TextIO | None = handle

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def write_config(run_dir: Path, config: TournamentConfig, base_agent_config: Any) -> None:
    """Write ``config.json``."""
    atomic_write_json(
        run_dir / CONFIG_NAME,
        {
            "format": CONFIG_FORMAT,
            "version": RUN_FORMAT_VERSION,
            "tournament": dataclasses.asdict(config),
            "base_agent_config": config_to_record(base_agent_config),
        },
    )


def read_config(run_dir: Path) -> tuple[TournamentConfig, Any]:
    """``config.json``'s tournament config and base agent config record.

    Raises:
        SnapshotError: the file is missing, corrupt or foreign.
        TournamentError: its settings are invalid.
    """
    record = read_json_record(run_dir / CONFIG_NAME, CONFIG_FORMAT, RUN_FORMAT_VERSION)
    try:
        return TournamentConfig(**record["tournament"]), record["base_agent_config"]
    except (KeyError, TypeError) as exc:
        raise SnapshotError(f"{run_dir / CONFIG_NAME} is malformed ({exc!r}): corrupt or foreign") from None


@dataclass
class Progress:
    """The tournament's counters (what ``state.json`` holds besides the RNG and the pool)."""

    env_steps: int = 0
    seconds: float = 0.0
    rounds: int = 0
    crashes: int = 0
    consecutive_crashes: int = 0
    next_pod_id: int = 0
    last_round_env_steps: int = 0
    events_bytes: int | None = 0
    """Length of ``events.jsonl`` when the state was saved (``None``: a state saved before it was kept)."""
    history: list[HistoryRecord] = field(default_factory=list)
    _history_records: list[dict[str, Any]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def history_records(self) -> list[dict[str, Any]]:
        """:attr:`history` as JSON-ready dicts, each made once (the history only grows): a new list
        whose dicts are shared and never changed."""
        made = self._history_records
        if len(made) > len(self.history):  # a history that was replaced, not grown
            made.clear()
        made.extend(
            {
                "elapsed_s": r.elapsed_s,
                "env_steps": r.env_steps,
                "best_score": r.best_score,
                "scores": list(r.scores),
            }
            for r in self.history[len(made) :]
        )
        return list(made)

    def count_round(self, env_steps: int) -> None:
        """Count a finished round of ``env_steps`` env steps (it ends a run of crashes)."""
        self.env_steps += env_steps
        self.rounds += 1
        self.consecutive_crashes = 0
        self.last_round_env_steps = env_steps

    def count_crash(self, same_failure: bool = False) -> None:
        """Count a crashed round; ``same_failure``: it crashed of the failure that crashed the round
        counted just before (one population round, or one lost worker, fails all its pods' rounds
        with one exception), which adds to :attr:`crashes` but not to :attr:`consecutive_crashes`."""
        self.crashes += 1
        if not same_failure:
            self.consecutive_crashes += 1


@dataclass
class RunState:
    """Everything ``state.json`` holds.

    Attributes:
        progress: the counters and history.
        finished: the budget was spent.
        rng: the tournament generator's ``bit_generator.state``.
        pool: records (:func:`pod_record`) of the pods to restart on resume, live pods first.
    """

    progress: Progress
    finished: bool
    rng: Mapping[str, Any]
    pool: list[dict[str, Any]]


def state_record(state: RunState) -> dict[str, Any]:
    """``state.json``'s content: plain values as ``state`` holds them now.

    Everything in it is either made for it (the counters, the pool's list, the RNG state's copy) or
    never changes (the history's records, :meth:`Progress.history_records`), so the file written
    later from it shows this moment. The pool's records must be fresh dicts (``pod_record``'s).
    """
    progress = state.progress
    return {
        "format": STATE_FORMAT,
        "version": RUN_FORMAT_VERSION,
        "finished": state.finished,
        "env_steps": progress.env_steps,
        "seconds": progress.seconds,
        "rounds": progress.rounds,
        "crashes": progress.crashes,
        "consecutive_crashes": progress.consecutive_crashes,
        "next_pod_id": progress.next_pod_id,
        "last_round_env_steps": progress.last_round_env_steps,
        "events_bytes": progress.events_bytes,
        "rng": copy.deepcopy(dict(state.rng)),
        "pool": list(state.pool),
        "history": progress.history_records(),
    }


def read_state(run_dir: Path) -> RunState:
    """Read ``state.json``.

    Raises:
        SnapshotError: the file is missing, corrupt, foreign or lacks a field.
    """
    path = run_dir / STATE_NAME
    record = read_json_record(path, STATE_FORMAT, RUN_FORMAT_VERSION)
    try:
        progress = Progress(
            env_steps=int(record["env_steps"]),
            seconds=float(record["seconds"]),
            rounds=int(record["rounds"]),
            crashes=int(record["crashes"]),
            consecutive_crashes=int(record["consecutive_crashes"]),
            next_pod_id=int(record["next_pod_id"]),
            last_round_env_steps=int(record["last_round_env_steps"]),
            events_bytes=None if record.get("events_bytes") is None else int(record["events_bytes"]),
            history=[
                HistoryRecord(r["elapsed_s"], r["env_steps"], r["best_score"], tuple(r["scores"]))
                for r in record["history"]
            ],
        )
        pool = [dict(item) for item in record["pool"]]
        for item in pool:
            missing = POD_RECORD_KEYS - set(item)
            if missing:
                raise KeyError(sorted(missing))
        return RunState(progress, bool(record["finished"]), dict(record["rng"]), pool)
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"{path} is malformed ({exc!r}): corrupt or foreign") from None


POD_RECORD_KEYS = frozenset(
    {
        "pod_id",
        "parent_id",
        "lineage_id",
        "generation",
        "seed",
        "agent_config",
        "policy_version",
        "env_steps",
        "last_score",
        "smoothed_score",
        "snapshot_name",
    }
)


def pod_record(pod: Pod) -> dict[str, Any]:
    """A pod's identity, lineage, hyper-parameters and last snapshot, JSON-ready."""
    return {
        "pod_id": pod.pod_id,
        "parent_id": pod.parent_id,
        "lineage_id": pod.lineage_id,
        "generation": pod.generation,
        "seed": pod.seed,
        "agent_config": config_to_record(pod.agent_config),
        "policy_version": pod.policy_version,
        "env_steps": pod.env_steps,
        "last_score": pod.last_score,
        "smoothed_score": pod.smoothed_score,
        "snapshot_name": pod.snapshot_name,
    }
