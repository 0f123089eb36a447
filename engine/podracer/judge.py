"""The judge: what becomes of pods, decided from scores and counts alone (no env, no file, no clock).

The tournament loop (:mod:`podracer.orchestrator`) asks the judge and carries the answer out; every
function here is pure, so each rule is testable without a run (``tests/engine/test_judge.py``).

* Promote: a snapshot enters the leaderboard when it beats the K-th entry (or the board has room),
  replacing the pod's own earlier entry, which it must beat, if it has one (:func:`promotes`, the
  rule :meth:`podracer.leaderboard.Leaderboard.admits` applies).
* Smoothing: each pod keeps an exponential moving average of its scores (:func:`smooth`), so one
  lucky or unlucky evaluation does not decide its fate. A child starts from its parent's average.
* Lagging: a pod that has trained at least ``lagging_rounds`` rounds since it (re)started lags when
  its smoothed score is below the median smoothed score of the OTHER live pods by more than
  ``lag_margin`` (:func:`is_lagging`). Only live pods count (never the leaderboard's best-ever
  scores, never the pod's own past), and with no other live pod nothing lags: a one-pod pool is
  never re-seeded.
* Exploit: a lagging pod is replaced, while budget remains, by a child of the LATEST state of a live
  pod with a better smoothed score (:func:`judge_round`; the child's donor is drawn by
  :mod:`podracer.generator`).
* Explore: a new pod starts from scratch with a probability that falls as the budget is spent
  (:func:`podracer.schedule.fresh_probability`).
* Retire: when the pool must shrink, the pods with the worst smoothed scores are retired at the end
  of their rounds (:func:`podracer.schedule.retirees`); a finished pod with no room or no budget left
  is retired too (:func:`idle_reason`).
* Crash: a crashed pod is restored from its last snapshot once; crashing again straight after (or
  with no snapshot) it is replaced by a new pod; more than ``max_consecutive_crashes`` crashed
  rounds in a row end the tournament (:func:`judge_crash`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from podracer.config import TournamentConfig
from podracer.schedule import Ranked, schedule_phase

RoundAction = Literal["continue", "retire", "replace"]
"""What becomes of a pod after a round: it trains on, it retires, or a child of a better pod replaces it."""
CrashAction = Literal["restore", "replace", "give_up"]
"""What follows a crashed round: restore the pod from its snapshot, replace it, or end the tournament."""


class Standing(Ranked, Protocol):
    """What the judge reads of a pod: its id, smoothed score and rounds since it (re)started (a
    :class:`~podracer.pod.Pod` has them)."""

    @property
    def rounds_since_start(self) -> int:
        """Rounds it has finished since it was (re)started."""
        ...


@dataclass(frozen=True)
class RoundVerdict:
    """The judge's decision on a pod after one of its rounds.

    Attributes:
        action: see :data:`RoundAction`.
        reason: why, for the event log: ``retire``: ``"schedule"`` or ``"pool shrank"``;
            ``replace``: ``"lagging"``; ``continue``: ``None``.
        donors: ``replace``: ids of the live pods with a better smoothed score, whose latest states
            the successor may start from; empty otherwise.
    """

    action: RoundAction
    reason: str | None = None
    donors: tuple[int, ...] = ()


def smooth(previous: float | None, score: float, weight: float) -> float:
    """The moving average after ``score``: ``weight * score + (1 - weight) * previous``."""
    return score if previous is None else weight * score + (1.0 - weight) * previous


def promotes(board: Sequence[tuple[int, float]], capacity: int, pod_id: int, score: float) -> bool:
    """Whether a snapshot of pod ``pod_id`` scoring ``score`` enters the leaderboard.

    Args:
        board: the entries as ``(pod_id, score)``, best first (at most one per pod).
        capacity: ``K``, entries the board keeps.
        pod_id: the candidate's pod.
        score: the candidate's score.
    """
    own = next((entry_score for entry_pod, entry_score in board if entry_pod == pod_id), None)
    if own is not None:
        return score > own
    return len(board) < capacity or score > board[-1][1]


def is_lagging(pod: Standing, others: Sequence[Standing], config: TournamentConfig) -> bool:
    """Whether ``pod`` lags the other live pods ``others`` (those without a smoothed score are ignored)."""
    scores = [other.smoothed_score for other in others if other.smoothed_score is not None]
    if pod.smoothed_score is None or not scores or pod.rounds_since_start < config.lagging_rounds:
        return False
    return pod.smoothed_score < statistics.median(scores) - config.lag_margin


def shrink_reason(config: TournamentConfig, fraction: float) -> str:
    """Why the pool is smaller than before at this spent ``fraction`` of the budget: ``"schedule"``
    once the schedule has halved it, else ``"pool shrank"`` (the backend has fewer slots)."""
    return "schedule" if schedule_phase(config, fraction) > 0 else "pool shrank"


def judge_round(
    pod: Standing,
    others: Sequence[Standing],
    config: TournamentConfig,
    *,
    retiring: bool,
    fraction: float,
    budget_left: bool,
) -> RoundVerdict:
    """What becomes of ``pod`` after a round (its smoothed score already updated).

    Args:
        pod: the pod whose round was just judged.
        others: the other live pods that are not retiring.
        config: the tournament settings (``lagging_rounds``, ``lag_margin``, the schedule).
        retiring: ``pod`` was marked for retirement (the pool is too big).
        fraction: spent share of the budget, in ``[0, 1]``.
        budget_left: another round may start (:func:`podracer.schedule.budget_left`).
    """
    if retiring:
        return RoundVerdict("retire", shrink_reason(config, fraction))
    mine = pod.smoothed_score
    if mine is not None and is_lagging(pod, others, config) and budget_left:
        better = [p.pod_id for p in others if p.smoothed_score is not None and p.smoothed_score > mine]
        return RoundVerdict("replace", "lagging", tuple(better))
    return RoundVerdict("continue")


def idle_reason(budget_left: bool) -> str:
    """Why a pod that finished a round is not resubmitted: ``"pool shrank"`` while budget remains
    (no room for it), else ``"budget spent"``."""
    return "pool shrank" if budget_left else "budget spent"


def judge_crash(
    consecutive_crashes: int, config: TournamentConfig, *, has_snapshot: bool, restored_after_crash: bool
) -> CrashAction:
    """What follows a crashed round.

    Args:
        consecutive_crashes: crashed rounds in a row across the pool, this one included.
        config: the tournament settings (``max_consecutive_crashes``).
        has_snapshot: the pod has a snapshot of a finished round.
        restored_after_crash: the pod was restored after a crash and has not finished a round since.
    """
    if consecutive_crashes > config.max_consecutive_crashes:
        return "give_up"
    return "restore" if has_snapshot and not restored_after_crash else "replace"
