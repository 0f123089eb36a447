"""The trajectory archive: snapshots of a run's judged rounds kept for an ensemble, durable on disk.

The leaderboard keeps the best snapshot of each of its K best pods; the archive keeps snapshots of
judged rounds by one of two rules (:data:`~podracer.config.ArchiveRule`), so an ensemble of its
members averages many of the run's policies instead of betting on the one evaluation that ranks the
board. On a noisy evaluation the best score is often a lucky one, and the members of an archive's
ensemble disagree where their fits to the training data's noise do.

Rule ``"even"`` (deterministic, from the judged rounds' order): the ``n``-th judged round (1-based,
the run's round counter) is archived when ``n`` is a multiple of the archive's ``stride`` (1 at the
start). When the archive then holds more than ``capacity`` snapshots, the stride doubles and the
snapshots whose round is not a multiple of it are deleted. So the archive always holds the rounds
``stride, 2 stride, ...`` up to the last one archived: between ``capacity / 2`` and ``capacity``
snapshots evenly spaced over the run once it has judged more than ``capacity`` rounds (every pod,
early and late, whatever it scored).

Rule ``"score"``: the ``capacity`` best-scoring judged rounds of any pod (several of one pod may be
kept). A round enters while the archive has room, or when its score is strictly above the lowest
kept, which is then deleted (equal scores: the earlier round stays). The stride stays 1. A run
killed after archiving rounds its saved state does not count forgets them on resume
(:meth:`TrajectoryArchive.forget_after`), but the rounds they pushed out are gone: the resumed
archive holds the best of the rounds that remain, and refills from the rounds judged again.

Layout of its folder: ``index.json`` (stride and entries, in round order) and one immutable,
content-named snapshot file per entry, written in the order the leaderboard uses (snapshot, then the
index atomically, then deletions), so a kill at any moment leaves an index whose every entry has its
snapshot; :meth:`TrajectoryArchive.remove_unreferenced` removes what the index does not name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from podracer.config import ArchiveRule
from podracer.errors import SnapshotError, TournamentError
from podracer.leaderboard import (
    INDEX_NAME,
    Candidate,
    LeaderboardEntry,
    SnapshotFolder,
    _entry_from_record,
    _unlink_all,
    encode_agent_state,
)
from podracer.snapshot import (
    EncodedSnapshot,
    atomic_write_json,
    read_json_record,
    write_snapshot_file,
)
from podracer.writer import OrderedWriter

ARCHIVE_FORMAT = "podracer.archive"
"""``format`` marker of the archive's index file."""
ARCHIVE_FORMAT_VERSION = 1
"""``version`` of the archive's index layout (``rule`` may be absent: an archive written before the
rule existed keeps rounds evenly spaced)."""
EVEN_RULE: ArchiveRule = "even"
"""The rule of an index that names none."""
MIN_CAPACITY = 3
"""The smallest archive: thinning ``capacity + 1`` snapshots to every other one leaves at least
``(capacity + 1) // 2``, so from 3 on an archive that has held 2 always holds 2 (an ensemble)."""


class TrajectoryArchive(SnapshotFolder):
    """Snapshots of a run's judged rounds, evenly spaced or the best-scoring (see the module docstring).

    Each entry is a :class:`~podracer.leaderboard.LeaderboardEntry` whose ``admission`` is the judged
    round it was taken at (1-based). Create with :meth:`create` or :meth:`open`; written by one
    process (the orchestrator), read by any.
    """

    def __init__(
        self,
        directory: Path,
        capacity: int,
        stride: int,
        entries: list[LeaderboardEntry],
        rule: ArchiveRule = EVEN_RULE,
    ) -> None:
        """Use :meth:`create` or :meth:`open`."""
        self.directory = directory
        self.capacity = capacity
        self.stride = stride
        self.rule: ArchiveRule = rule
        self._entries = entries
        self._writer: OrderedWriter | None = None

    @classmethod
    def create(cls, directory: Path, capacity: int, rule: ArchiveRule = EVEN_RULE) -> TrajectoryArchive:
        """A new, empty archive of at most ``capacity`` snapshots kept by ``rule`` in ``directory``,
        or the empty one that a run killed before its first round left there.

        Raises:
            TournamentError: ``capacity`` < :data:`MIN_CAPACITY`, an unknown ``rule``, or the folder
                holds another archive.
        """
        if capacity < MIN_CAPACITY:
            raise TournamentError(
                f"archive capacity is {capacity}; it must be at least {MIN_CAPACITY} (or no archive)"
            )
        if rule not in get_args(ArchiveRule):
            raise TournamentError(f"archive rule is {rule!r}; use one of {list(get_args(ArchiveRule))}")
        directory = directory.resolve()
        if (directory / INDEX_NAME).exists():
            archive = cls.open(directory)
            if archive.entries or archive.capacity != capacity or archive.rule != rule:
                raise TournamentError(f"{directory} holds another archive; pick a new run folder")
            return archive
        directory.mkdir(parents=True, exist_ok=True)
        archive = cls(directory, capacity, 1, [], rule)
        archive._write_index()
        return archive

    @classmethod
    def open(cls, directory: Path) -> TrajectoryArchive:
        """Read the archive in ``directory``.

        Raises:
            SnapshotError: the index is missing, corrupt or foreign.
        """
        directory = directory.resolve()
        index_path = directory / INDEX_NAME
        record = read_json_record(index_path, ARCHIVE_FORMAT, ARCHIVE_FORMAT_VERSION)
        capacity, stride, raw = record.get("capacity"), record.get("stride"), record.get("entries")
        rule = record.get("rule", EVEN_RULE)
        if not isinstance(capacity, int) or capacity < 1 or not isinstance(stride, int) or stride < 1:
            raise SnapshotError(f"{index_path} has no valid capacity/stride: corrupt index")
        if rule not in get_args(ArchiveRule):
            raise SnapshotError(f"{index_path} names the archive rule {rule!r}: corrupt or foreign index")
        if not isinstance(raw, list) or len(raw) > capacity:
            raise SnapshotError(f"{index_path} has no valid entry list: corrupt index")
        entries = [_entry_from_record(directory, item, index_path) for item in raw]
        return cls(directory, capacity, stride, entries, rule)

    @property
    def entries(self) -> tuple[LeaderboardEntry, ...]:
        """The entries, in the order of their rounds."""
        return tuple(self._entries)

    def _kept_rounds(self, judged_round: int, score: float) -> tuple[set[int], int] | None:
        """The rounds kept once ``judged_round`` (scored ``score``) is offered, and the stride; ``None``
        when the round is not archived and nothing changes."""
        if self.rule == "score":
            if len(self._entries) < self.capacity:
                return {*(e.admission for e in self._entries), judged_round}, 1
            # lowest score first; of equal scores the later round goes first
            lowest = min(self._entries, key=lambda e: (e.score, -e.admission))
            if not score > lowest.score:
                return None
            return {e.admission for e in self._entries if e is not lowest} | {judged_round}, 1
        if judged_round % self.stride:
            return None
        stride = self.stride
        rounds = [*(e.admission for e in self._entries), judged_round]
        while len(rounds) > self.capacity:
            stride *= 2
            rounds = [r for r in rounds if r % stride == 0]
        return set(rounds), stride

    def offer(
        self,
        judged_round: int,
        candidate: Candidate,
        agent_state: Mapping[str, Any],
        encoded: EncodedSnapshot | None = None,
    ) -> LeaderboardEntry | None:
        """Archive the snapshot of the ``judged_round``-th judged round (1-based) if the rule takes
        it (``"even"``: the stride; ``"score"``: room, or a score above the lowest kept); drop what
        the rule then lets go. ``encoded``: that state already encoded
        (:func:`~podracer.leaderboard.encode_agent_state`), else it is encoded here.

        Returns:
            The new entry, or ``None`` when the round is not archived.
        """
        if judged_round < 1:
            raise TournamentError(f"judged_round is {judged_round}; rounds count from 1")
        decided = self._kept_rounds(judged_round, candidate.score)
        if decided is None:
            return None
        kept, stride = decided
        entry = None
        entries = [e for e in self._entries if e.admission in kept]
        if judged_round in kept:
            stem = f"round-{judged_round:08d}-pod-{candidate.pod_id:06d}"
            encoded = encoded or encode_agent_state(agent_state)
            path = encoded.path(self.directory, stem)
            self._write(write_snapshot_file, path, encoded.data, size=len(encoded.data))
            entry = LeaderboardEntry(
                **dataclasses.asdict(candidate),
                created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
                snapshot=path,
                admission=judged_round,
            )
            entries.append(entry)
        dropped = [e.snapshot for e in self._entries if e.admission not in kept]
        self._entries, self.stride = entries, stride
        self._write_index()
        if dropped:
            self._write(_unlink_all, self.directory, dropped)
        return entry

    def forget_after(self, judged_rounds: int) -> list[LeaderboardEntry]:
        """Drop the entries of rounds after ``judged_rounds``: a run killed after archiving a round
        but before saving its state judges those rounds again when it resumes (their numbers come
        back with other snapshots). The stride stays as it is.

        Returns:
            The entries dropped (their snapshot files are deleted).
        """
        later = [e for e in self._entries if e.admission > judged_rounds]
        if later:
            self._entries = [e for e in self._entries if e.admission <= judged_rounds]
            self._write_index()
            self._write(_unlink_all, self.directory, [e.snapshot for e in later])
        return later

    def _missing(self, index: int) -> str:
        return f"archive position {index} does not exist; it has {len(self._entries)} entries"

    def _write_index(self) -> None:
        record = {
            "format": ARCHIVE_FORMAT,
            "version": ARCHIVE_FORMAT_VERSION,
            "capacity": self.capacity,
            "stride": self.stride,
            "rule": self.rule,
            "entries": [entry.to_record() for entry in self._entries],
        }
        self._write(atomic_write_json, self.directory / INDEX_NAME, record)


__all__ = ["ARCHIVE_FORMAT", "ARCHIVE_FORMAT_VERSION", "TrajectoryArchive"]
