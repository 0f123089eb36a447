"""The README's promise: at a fixed ``torch_threads_per_pod`` the leaderboard does not depend on the
machine's thread count (a 2-core and a 16-core machine give the same figures).

Two runs of one tiny spec whose networks are 64 wide (where LAPACK's orthogonal initialisation
depends on its thread count) differ only in the process's torch threads: 1 vs 2. Their leaderboards
(entries and snapshot tensors) must be bit-identical.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from test_leak import LINEAGE_KEYS, _assert_identical, _board
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

from finpod.backtest.threads import torch_threads
from finpod.pipeline.main import RunResult, run
from finpod.spec import Spec

WIDE = {"hidden_sizes": [64, 64]}
"""Hidden layers where ``nn.init.orthogonal_`` gives different weights at 1 and 2 threads."""


def _run(spec: Spec, out: Path, threads: int) -> RunResult:
    with torch_threads(threads):
        return run(spec, out=out, console=Console(quiet=True))


@pytest.mark.usefixtures("no_report")
def test_process_thread_count_leaves_the_leaderboard_bit_identical(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=11))
    tiny = tiny_spec(dataset).model_dump(mode="json")
    spec = Spec.from_dict({**tiny, "agent": {**tiny["agent"], **WIDE}})
    one = _run(spec, tmp_path / "one", threads=1)
    two = _run(spec, tmp_path / "two", threads=2)

    assert one.leaderboard
    for ours, theirs in zip(one.leaderboard, two.leaderboard, strict=True):
        assert {k: ours[k] for k in LINEAGE_KEYS} == {k: theirs[k] for k in LINEAGE_KEYS}
    one_board, two_board = _board(one), _board(two)
    for rank in range(len(one_board.entries)):
        _assert_identical(one_board.load_state(rank), two_board.load_state(rank), f"rank {rank}")


@pytest.mark.usefixtures("no_report")
def test_pods_in_worker_processes_give_the_thread_pools_leaderboard_bit_for_bit(tmp_path: Path) -> None:
    """``backend = "processes"`` (``auto`` on a Linux CPU) moves where pods train, not what they learn."""
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=11))
    spec = tiny_spec(dataset)
    runs = {
        backend: _run(spec.with_(tournament={"backend": backend}), tmp_path / backend, threads=1)
        for backend in ("local", "processes")
    }
    threads, processes = runs["local"], runs["processes"]
    assert threads.leaderboard
    assert len(threads.leaderboard) == len(processes.leaderboard)
    for ours, theirs in zip(threads.leaderboard, processes.leaderboard, strict=True):
        assert {k: ours[k] for k in LINEAGE_KEYS} == {k: theirs[k] for k in LINEAGE_KEYS}
    one_board, two_board = _board(threads), _board(processes)
    for rank in range(len(one_board.entries)):
        _assert_identical(one_board.load_state(rank), two_board.load_state(rank), f"rank {rank}")
    assert json.loads((processes.run_dir / "run.json").read_text())["backend"] == "processes"
