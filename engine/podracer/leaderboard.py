"""The leaderboard: the best K snapshots with their scores and lineage, durable on disk.

Layout of its folder: ``index.json`` (the entries, best first) and one immutable, content-named
snapshot file per entry. An admission writes the new snapshot first, then the index (atomically), and
only then deletes the snapshot that fell off the board, so a process killed at any moment leaves an
index whose every entry has its snapshot on disk. Files the index does not name (left by a kill
between those steps) are removed by :meth:`Leaderboard.remove_unreferenced`.

Ordering: higher score first; equal scores keep admission order (earlier first). Admission rule:
the board holds at most one entry per pod (its best snapshot so far), so its K entries are K
different agents. Every entry names its lineage (the pod from scratch its line of descent starts
with): :meth:`Leaderboard.top_lineage_ranks` picks the best entry of each of the k best lineages,
so an ensemble averages different lines of descent, not a pod and its own children. A
candidate whose pod has no entry enters when the board has fewer than K entries or its score is
strictly above the K-th; a candidate whose pod has an entry replaces that entry when its score is
strictly above it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podracer.errors import SnapshotError, TournamentError
from podracer.judge import promotes
from podracer.pod import AgentFactory, config_from_record
from podracer.protocols import Agent
from podracer.snapshot import (
    SNAPSHOT_SUFFIX,
    EncodedSnapshot,
    atomic_write_json,
    encode_snapshot,
    fsync_directory,
    load_snapshot,
    read_json_record,
    remove_unreferenced_snapshots,
    write_snapshot_file,
)
from podracer.writer import OrderedWriter

INDEX_NAME = "index.json"
"""File name of the leaderboard's index inside its folder."""
INDEX_FORMAT = "podracer.leaderboard"
"""``format`` marker of the index file."""
INDEX_FORMAT_VERSION = 2
"""``version`` of the index file layout."""
AGENT_STATE_KEY = "agent_state"
"""Key of the agent's ``state_dict`` inside a snapshot payload."""


def encode_agent_state(agent_state: Mapping[str, Any]) -> EncodedSnapshot:
    """An agent's ``state_dict`` encoded as the snapshot every store writes (``pods/``, the
    leaderboard, the archive): made once per judged round and handed to each that keeps it.

    A ``dict`` (an ``OrderedDict`` too, with the module metadata ``nn.Module.state_dict`` attaches)
    is stored as it is; any other mapping as a plain ``dict`` (what ``torch.save`` can pickle)."""
    state = agent_state if isinstance(agent_state, dict) else dict(agent_state)
    return encode_snapshot({AGENT_STATE_KEY: state})


@dataclass(frozen=True)
class LeaderboardEntry:
    """One admitted snapshot.

    Attributes:
        pod_id: the pod that produced it.
        parent_id: the pod whose weights that pod started from, ``None`` for a pod from scratch.
        lineage_id: the pod from scratch its line of descent starts with (``pod_id`` for such a pod).
        generation: 0 from scratch, parent's generation + 1 otherwise.
        policy_version: training rounds behind these weights, lineage included.
        score: the application's evaluation score (higher is better).
        env_steps: env transitions the agent had learned from (``agent.env_steps``), lineage included.
        created_at: admission time, ISO 8601 UTC.
        seed: the seed the pod's agent and env were built with.
        agent_config: the hyper-parameters as a record ``{"type": "module:QualName", "fields": {...}}``.
        snapshot: absolute path of the snapshot file.
        admission: admission counter of the board (breaks score ties: earlier first).
    """

    pod_id: int
    parent_id: int | None
    lineage_id: int
    generation: int
    policy_version: int
    score: float
    env_steps: int
    created_at: str
    seed: int
    agent_config: dict[str, Any]
    snapshot: Path
    admission: int

    def to_record(self) -> dict[str, Any]:
        """The JSON record stored in the index (the snapshot by file name)."""
        record = dataclasses.asdict(self)
        record["snapshot"] = self.snapshot.name
        return record


@dataclass(frozen=True)
class Candidate:
    """What the orchestrator offers the leaderboard after a round (an entry without file or time)."""

    pod_id: int
    parent_id: int | None
    lineage_id: int
    generation: int
    policy_version: int
    score: float
    env_steps: int
    seed: int
    agent_config: dict[str, Any]


def _entry_from_record(directory: Path, record: Any, index_path: Path) -> LeaderboardEntry:
    names = {f.name for f in dataclasses.fields(LeaderboardEntry)}
    if not isinstance(record, dict) or set(record) != names:
        raise SnapshotError(f"{index_path} has a malformed entry {record!r}: corrupt or foreign index")
    snapshot = record["snapshot"]
    if (
        not isinstance(snapshot, str)
        or Path(snapshot).name != snapshot
        or not snapshot.endswith(SNAPSHOT_SUFFIX)
    ):
        raise SnapshotError(f"{index_path} names snapshot {snapshot!r} outside its folder: foreign index")
    score = record["score"]
    if not isinstance(score, int | float) or not math.isfinite(score):
        raise SnapshotError(f"{index_path} has a non-finite score {score!r}: corrupt index")
    return LeaderboardEntry(**{**record, "score": float(score), "snapshot": directory / snapshot})


class SnapshotFolder:
    """Entries whose agent snapshots live in one folder (a :class:`Leaderboard`, a
    :class:`~podracer.archive.TrajectoryArchive`), written through the run's ordered writer.

    A subclass sets ``directory``, ``_entries`` and ``_writer`` and names a missing index
    (:meth:`_missing`).
    """

    directory: Path
    _entries: list[LeaderboardEntry]
    _writer: OrderedWriter | None

    def write_through(self, writer: OrderedWriter | None) -> None:
        """Queue this folder's writes on ``writer`` (in order with the run's other writes) instead
        of writing in the caller's thread; ``None`` writes directly again. Reads of a snapshot
        (:meth:`load_state`) wait for the queued writes first."""
        self._writer = writer

    def _write(self, write: Any, *args: Any, size: int = 0) -> None:
        if self._writer is None:
            write(*args)
        else:
            self._writer.submit(write, *args, size=size)

    def _missing(self, index: int) -> str:
        """The one-line message for an ``index`` with no entry."""
        return f"entry {index} does not exist; there are {len(self._entries)} entries (from 0)"

    def entry(self, index: int) -> LeaderboardEntry:
        """The entry at ``index`` (0 = the first in the folder's order).

        Raises:
            TournamentError: no entry there.
        """
        if not 0 <= index < len(self._entries):
            raise TournamentError(self._missing(index))
        return self._entries[index]

    def load_state(self, index: int) -> dict[str, Any]:
        """The agent ``state_dict`` stored for the entry at ``index``.

        Raises:
            TournamentError: no entry there.
            SnapshotError: its snapshot is missing, corrupt or foreign.
        """
        entry = self.entry(index)
        if self._writer is not None:
            self._writer.flush()  # its file may still be queued
        state = load_snapshot(entry.snapshot).get(AGENT_STATE_KEY)
        if not isinstance(state, dict):
            raise SnapshotError(f"{entry.snapshot} holds no agent state: foreign snapshot")
        return state

    def load_agent(self, index: int, agent_factory: AgentFactory) -> Agent:
        """Rebuild the agent at ``index``: ``agent_factory(its config, its seed)``, then its weights.

        The config class's module must already be imported (import your agent's module first).
        """
        entry = self.entry(index)
        agent = agent_factory(config_from_record(entry.agent_config), entry.seed)
        agent.load_state_dict(self.load_state(index))
        return agent

    def remove_unreferenced(self) -> list[Path]:
        """Delete snapshot files the index does not name and temp files of interrupted writes."""
        return remove_unreferenced_snapshots(self.directory, {entry.snapshot for entry in self._entries})


class Leaderboard(SnapshotFolder):
    """The top-K snapshots of a tournament, best first, stored under one folder.

    Create with :meth:`create` (a new folder) or :meth:`open` (an existing one). A board is written
    by one process (the orchestrator); any number may read it.
    """

    def __init__(
        self, directory: Path, capacity: int, entries: list[LeaderboardEntry], admissions: int
    ) -> None:
        """Use :meth:`create` or :meth:`open`."""
        self.directory = directory
        self.capacity = capacity
        self._entries = entries
        self._admissions = admissions
        self._writer: OrderedWriter | None = None

    @classmethod
    def create(cls, directory: Path, capacity: int) -> Leaderboard:
        """A new, empty board of ``capacity`` entries in ``directory`` (its index written at once).

        Raises:
            TournamentError: ``capacity`` < 1 or the folder already holds a leaderboard.
        """
        if capacity < 1:
            raise TournamentError(f"leaderboard capacity is {capacity}; it must be at least 1")
        if (directory / INDEX_NAME).exists():
            raise TournamentError(f"{directory} already holds a leaderboard; open it or pick another folder")
        board = cls(directory.resolve(), capacity, [], 0)
        board._write_index()
        return board

    @classmethod
    def open(cls, directory: Path) -> Leaderboard:
        """Read the board in ``directory``.

        Raises:
            SnapshotError: the index is missing, corrupt or foreign.
        """
        directory = directory.resolve()
        index_path = directory / INDEX_NAME
        record = read_json_record(index_path, INDEX_FORMAT, INDEX_FORMAT_VERSION)
        capacity = record.get("capacity")
        admissions = record.get("admissions")
        raw_entries = record.get("entries")
        if not isinstance(capacity, int) or capacity < 1 or not isinstance(admissions, int):
            raise SnapshotError(f"{index_path} has no valid capacity/admissions: corrupt index")
        if not isinstance(raw_entries, list) or len(raw_entries) > capacity:
            raise SnapshotError(f"{index_path} has no valid entry list: corrupt index")
        entries = [_entry_from_record(directory, item, index_path) for item in raw_entries]
        return cls(directory, capacity, entries, admissions)

    @property
    def entries(self) -> tuple[LeaderboardEntry, ...]:
        """The entries, best first."""
        return tuple(self._entries)

    def scores(self) -> list[float]:
        """The entries' scores, best first."""
        return [entry.score for entry in self._entries]

    def admits(self, pod_id: int, score: float) -> bool:
        """Whether a snapshot of pod ``pod_id`` scoring ``score`` enters (:func:`podracer.judge.promotes`)."""
        return promotes([(e.pod_id, e.score) for e in self._entries], self.capacity, pod_id, score)

    def _entry_of(self, pod_id: int) -> LeaderboardEntry | None:
        return next((entry for entry in self._entries if entry.pod_id == pod_id), None)

    def offer(
        self, candidate: Candidate, agent_state: Mapping[str, Any], encoded: EncodedSnapshot | None = None
    ) -> LeaderboardEntry | None:
        """Admit ``candidate`` with its agent's ``state_dict`` if :meth:`admits` its score.

        Writes the snapshot (``encoded``: that state already encoded by :func:`encode_agent_state`,
        else it is encoded here), then the index; then deletes the snapshot that fell off the board
        (the pod's previous entry, or the K-th).

        Returns:
            The new entry, or ``None`` when the candidate was not admitted.
        """
        if not self.admits(candidate.pod_id, candidate.score):
            return None
        stem = f"pod-{candidate.pod_id:06d}-v{candidate.policy_version:06d}"
        encoded = encoded or encode_agent_state(agent_state)
        path = encoded.path(self.directory, stem)
        self._write(write_snapshot_file, path, encoded.data, size=len(encoded.data))
        entry = LeaderboardEntry(
            **dataclasses.asdict(candidate),
            created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            snapshot=path,
            admission=self._admissions,
        )
        self._admissions += 1
        own = self._entry_of(candidate.pod_id)
        others = [e for e in self._entries if e is not own]
        ranked = sorted([*others, entry], key=lambda e: (-e.score, e.admission))
        kept, dropped = ranked[: self.capacity], ranked[self.capacity :] + ([] if own is None else [own])
        self._entries = kept
        self._write_index()
        still_used = {e.snapshot for e in kept}
        gone = [e.snapshot for e in dropped if e.snapshot not in still_used]
        if dropped:
            self._write(_unlink_all, self.directory, gone)
        return entry if entry in kept else None

    def top_lineage_ranks(self, k: int) -> list[int]:
        """Ranks of the best entry of each of the ``k`` best lineages, best first.

        Fewer than ``k`` when the board holds fewer lineages.

        Raises:
            TournamentError: ``k`` < 1.
        """
        if k < 1:
            raise TournamentError(f"k is {k}; ask for at least 1 lineage")
        ranks: list[int] = []
        seen: set[int] = set()
        for rank, entry in enumerate(self._entries):
            if entry.lineage_id not in seen and len(ranks) < k:
                seen.add(entry.lineage_id)
                ranks.append(rank)
        return ranks

    def _missing(self, index: int) -> str:
        return f"leaderboard rank {index} does not exist; it has {len(self._entries)} entries (ranks from 0)"

    def rank_of(self, entry: LeaderboardEntry) -> int:
        """0-based rank of ``entry`` on the board (0 = best)."""
        return self._entries.index(entry)

    def verify(self) -> None:
        """Load every entry's snapshot; raises :class:`SnapshotError` on the first bad one."""
        for rank in range(len(self._entries)):
            self.load_state(rank)

    def _write_index(self) -> None:
        record = {
            "format": INDEX_FORMAT,
            "version": INDEX_FORMAT_VERSION,
            "capacity": self.capacity,
            "admissions": self._admissions,
            "entries": [entry.to_record() for entry in self._entries],
        }
        self._write(atomic_write_json, self.directory / INDEX_NAME, record)


def _unlink_all(directory: Path, paths: list[Path]) -> None:
    """Delete ``paths`` (missing ones too) and flush ``directory``'s entries."""
    for path in paths:
        path.unlink(missing_ok=True)
    fsync_directory(directory)
