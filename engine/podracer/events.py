"""What a tournament reports: events (also logged to ``events.jsonl``), history records, the result."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from podracer.leaderboard import Leaderboard

EVENTS_NAME = "events.jsonl"
"""File name of the event log inside a run directory."""

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
class TournamentEvent:
    """Something that happened, for progress bars and logs.

    Attributes:
        kind: one of :data:`EVENT_KINDS`.
        elapsed_s: tournament wall time so far (summed over resumes), seconds.
        env_steps: tournament env steps used so far.
        pod_id: the pod concerned, if any.
        data: details by kind, JSON-ready: ``round_finished``: ``score``, ``smoothed_score``,
            ``round_env_steps``, ``steps_per_s``, ``train_seconds`` and ``eval_seconds`` (the round's
            wall time learning and scoring), ``policy_version``, ``lineage_env_steps``, ``metrics``
            (the agent's round diagnostics, e.g. PPO's losses, entropy, approximate KL, clip fraction,
            explained variance, learning rate);
            ``entry_admitted``: ``rank``, ``score``; ``pod_started``: ``origin``
            (``scratch``/``pod``/``leaderboard``/``snapshot``), ``parent_id``, ``lineage_id``,
            ``generation``, ``env_steps``, ``seed``, ``agent_config`` (and ``reason`` for ``snapshot``);
            ``pod_replaced``: ``reason``, ``by``; ``pod_crashed``: ``error``; ``pod_retired``:
            ``reason`` (``schedule``, ``pool shrank`` or ``budget spent``); ``pool_resized``:
            ``old``, ``new`` (the pool's target size);
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
    """What :meth:`podracer.Tournament.run` returns.

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


class EventLog:
    """``events.jsonl`` opened for appending; a line a kill cut short is ended first.

    Attributes:
        size: the file's length in bytes, every event written so far included (where the log of a
            state saved now ends: :func:`truncate_events` cuts the events of work a resume redoes).
    """

    def __init__(self, run_dir: Path) -> None:
        """Open (or create) the run directory's event log."""
        path = run_dir / EVENTS_NAME
        self._handle: TextIO = path.open("a", encoding="utf-8")
        self.size = path.stat().st_size
        if _ends_mid_line(path):
            self._append("\n")

    def write(self, event: TournamentEvent) -> None:
        """Append one event as a JSON line and flush it."""
        self._append(json.dumps(dataclasses.asdict(event), sort_keys=True) + "\n")

    def _append(self, text: str) -> None:
        self._handle.write(text)
        self._handle.flush()
        self.size += len(text.encode("utf-8"))

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


def events_size(run_dir: Path) -> int:
    """The length in bytes of a run directory's ``events.jsonl`` (0 when it has none)."""
    try:
        return (run_dir / EVENTS_NAME).stat().st_size
    except FileNotFoundError:
        return 0


def truncate_events(run_dir: Path, size: int) -> None:
    """Cut ``events.jsonl`` back to its first ``size`` bytes, where the log of the run's saved state
    ends: the events after it are of work a resume redoes (a round judged, or a pod started, after
    the last ``state.json`` a kill left), so the log holds each of them once. A shorter log (its tail
    lost with the OS's buffers) is left as it is."""
    path = run_dir / EVENTS_NAME
    if events_size(run_dir) <= size:
        return
    with path.open("r+b") as handle:
        handle.truncate(size)
        handle.flush()
        os.fsync(handle.fileno())


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
