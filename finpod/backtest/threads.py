"""Torch intra-op thread counts for evaluation work, chosen by its batch size.

On a 2-core CPU small batches (one observation at a time, as in a backtest) run several times
slower with 2 threads than with 1, so evaluation picks its count per workload and restores the
process's afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

SMALL_BATCH_ROWS = 256
"""Below this many rows a forward pass or env step is too small for a second torch thread to pay off
(on a 2-core CPU one pass of a 512-wide MLP on one row took 1,235 us with 2 threads, 201 us with 1)."""


def threads_for(rows: int) -> int:
    """Torch intra-op threads for work on ``rows`` rows: 1 for small batches, else the process's."""
    return 1 if rows < SMALL_BATCH_ROWS else torch.get_num_threads()


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` torch intra-op threads, then restore the previous setting."""
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
