"""The updater: how a pod is judged after a round.

* Admission: the pod's snapshot enters the leaderboard when it beats the K-th entry (or the board
  has room), replacing the pod's own earlier entry, which it must beat, if it has one; see
  :meth:`podracer.leaderboard.Leaderboard.admits`.
* Lagging: a pod that has finished at least ``lagging_rounds`` rounds since it (re)started and whose
  latest score is below the leaderboard's median is lagging; the orchestrator replaces it with a pod
  from the generator. Younger pods are left alone so a pod is not judged before it has learned.
"""

from __future__ import annotations

from podracer.leaderboard import Leaderboard


def is_lagging(score: float, rounds_since_start: int, leaderboard: Leaderboard, lagging_rounds: int) -> bool:
    """Whether a pod with this latest ``score`` after ``rounds_since_start`` rounds is lagging."""
    median = leaderboard.median_score()
    return rounds_since_start >= lagging_rounds and median is not None and score < median
