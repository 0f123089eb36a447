"""Measure, rather than guess, the torch thread count of a stepping loop whose numbers do not depend on it.

On a 2-core CPU a one-row forward pass is several times slower with 2 threads than with 1, and a
busy second core stalls OpenMP; but the stacked pass of several networks
(:class:`~finpod.backtest.trader_batch.TraderBatch`, one matrix per network) streams each network's
weights on its own core and runs about 1.7x faster with 2 threads on an idle box. Which one wins
depends on the moment's load (a loaded box can make the 2-thread step 15x slower), so
:class:`ThreadTuner` times the loop itself: ``probe_steps`` steps at each candidate, then the faster
one for ``period_steps`` steps, then probes again; each time the same count wins again, the period
doubles (up to ``max_period_steps``), so a steady machine pays for few probes at the slower count. It is only
for loops whose results are bit-identical at every candidate (tests/app/test_trader_batch.py checks
the stacked pass); it reports how many steps ran at each count, which run.json records.
"""

from __future__ import annotations

import time
from collections import Counter

import torch


class ThreadTuner:
    """Picks, and re-picks, the faster torch thread count for a loop; call :meth:`tick` once per step.

    Args:
        candidates: thread counts to choose from (duplicates dropped); one candidate never probes.
        probe_steps: steps timed at each candidate in a probe.
        period_steps: steps run at the winner after a probe that changed the winner (or the first).
        max_period_steps: the longest period, reached by doubling while the winner stays the same.
    """

    def __init__(
        self,
        candidates: tuple[int, ...],
        probe_steps: int = 128,
        period_steps: int = 8192,
        max_period_steps: int = 65536,
    ) -> None:
        self.candidates = tuple(dict.fromkeys(max(1, count) for count in candidates))
        self.probe_steps = probe_steps
        self.period_steps = period_steps
        self.max_period_steps = max(period_steps, max_period_steps)
        self._period = period_steps
        self._winner: int | None = None
        self.steps_at: Counter[int] = Counter()
        """Steps run at each thread count so far."""
        self._before = torch.get_num_threads()
        self._phases: list[tuple[int, int, bool]] = []  # (threads, steps, is_probe) still to run
        self._timings: dict[int, float] = {}  # seconds of the last probe at each count
        self._current, self._left, self._probing = self.candidates[0], 0, False
        self._started = 0.0

    def tick(self) -> None:
        """Account for the step about to run; switch the thread count at a probe or period boundary."""
        if self._left == 0:
            self._next_phase()
        self._left -= 1
        self.steps_at[self._current] += 1

    def _next_phase(self) -> None:
        if self._probing:
            self._timings[self._current] = time.perf_counter() - self._started
        if not self._phases:
            if len(self.candidates) == 1:
                self._phases = [(self.candidates[0], self.period_steps, False)]
            elif len(self._timings) == len(self.candidates):
                winner = min(self.candidates, key=lambda count: self._timings[count])
                same = winner == self._winner
                self._period = min(2 * self._period, self.max_period_steps) if same else self.period_steps
                self._winner, self._timings = winner, {}
                self._phases = [(winner, self._period, False)]
            else:
                self._phases = [(count, self.probe_steps, True) for count in self.candidates]
        threads, self._left, self._probing = self._phases.pop(0)
        self._current = threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        self._started = time.perf_counter()

    def close(self) -> None:
        """Restore the thread count the process had before the loop."""
        if torch.get_num_threads() != self._before:
            torch.set_num_threads(self._before)
