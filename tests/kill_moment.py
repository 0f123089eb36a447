"""When a kill test pulls the trigger: a random moment after progress, but never past the budget.

A fixed random delay after the child's first new round lets a fast machine finish several rounds
before the kill, and a small budget then runs out early (the child exits 0 and there is nothing left
to kill). Bounding the moment by rounds as well as by time keeps the kills random in time on a slow
machine and keeps the budget's use per kill bounded on a fast one.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable

POLL_S = 0.01


def wait_for_kill_moment(
    child: subprocess.Popen[bytes],
    rounds: Callable[[], int],
    rng: random.Random,
    *,
    max_delay_s: float,
    max_extra_rounds: int,
    progress_timeout_s: float,
) -> None:
    """Wait for the child's first new round, then a random delay of up to ``max_delay_s`` seconds.

    The delay ends early once ``max_extra_rounds`` more rounds finished, so one kill never consumes
    more than about ``1 + max_extra_rounds`` rounds of the budget. Raises ``AssertionError`` when the
    child makes no progress within ``progress_timeout_s`` or exits before it is killed.
    """
    rounds_before = rounds()
    deadline = time.monotonic() + progress_timeout_s
    while rounds() <= rounds_before and child.poll() is None:
        assert time.monotonic() < deadline, "the child made no progress"
        time.sleep(POLL_S)
    first_new = rounds()
    delay_ends = time.monotonic() + rng.uniform(0.0, max_delay_s)
    while time.monotonic() < delay_ends and rounds() < first_new + max_extra_rounds:
        time.sleep(POLL_S)
    stderr = child.stderr.read() if child.stderr and child.poll() is not None else b""
    assert child.poll() is None, f"the child exited before the kill (budget too small?): {stderr!r}"
