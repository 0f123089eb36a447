"""The updater: how a pod is judged after a round.

* Admission: the pod's snapshot enters the leaderboard when it beats the K-th entry (or the board
  has room), replacing the pod's own earlier entry, which it must beat, if it has one; see
  :meth:`podracer.leaderboard.Leaderboard.admits`.
* Smoothing: each pod keeps an exponential moving average of its scores (:func:`smooth`), so one
  lucky or unlucky evaluation does not decide its fate. A child starts from its parent's average.
* Lagging: a pod that has trained at least ``lagging_rounds`` rounds since it (re)started lags when
  its smoothed score is below the median smoothed score of the OTHER live pods by more than
  ``lag_margin``. Only live pods count (never the leaderboard's best-ever scores, never the pod's own
  past), and with no other live pod nothing lags: a one-pod pool is never re-seeded.
* Exploit: a lagging pod is replaced by a child of a better live pod's LATEST state (see
  :mod:`podracer.generator`); the orchestrator does the replacing.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from podracer.config import TournamentConfig
from podracer.pod import Pod


def smooth(previous: float | None, score: float, weight: float) -> float:
    """The moving average after ``score``: ``weight * score + (1 - weight) * previous``."""
    return score if previous is None else weight * score + (1.0 - weight) * previous


def is_lagging(pod: Pod, others: Sequence[Pod], config: TournamentConfig) -> bool:
    """Whether ``pod`` lags the other live pods ``others`` (those without a smoothed score are ignored)."""
    scores = [other.smoothed_score for other in others if other.smoothed_score is not None]
    if pod.smoothed_score is None or not scores or pod.rounds_since_start < config.lagging_rounds:
        return False
    return pod.smoothed_score < statistics.median(scores) - config.lag_margin
