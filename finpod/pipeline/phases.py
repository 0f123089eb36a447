"""Wall seconds per phase of the main job (data, train, validate, backtest, report), for run.json."""

from __future__ import annotations

import logging
import resource
import sys
import time

_log = logging.getLogger(__name__)

PHASES: tuple[str, ...] = ("data", "train", "validate", "backtest", "report")
"""The phases of ``finpod run``, in order."""


class PhaseClock:
    """Splits a run's wall time into named phases: each :meth:`lap` closes the phase that ran since
    the last one (or since the clock started)."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.seconds: dict[str, float] = {}
        """Wall seconds of each phase lapped so far, by name, in lap order."""

    def lap(self, phase: str) -> None:
        """Close ``phase``: the wall time since the previous lap counts to it."""
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + (now - self._last)
        _log.info("phase %s: %.2f s", phase, now - self._last)  # shown by `finpod bench main --progress`
        self._last = now


def peak_rss_bytes(who: int = resource.RUSAGE_SELF) -> int:
    """Peak resident memory of this process so far, in bytes (Linux reports KiB, macOS bytes);
    ``who = resource.RUSAGE_CHILDREN``: the largest such peak among its finished child processes
    (pod workers; a forked worker's count includes the pages it shares with this process)."""
    peak = resource.getrusage(who).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
