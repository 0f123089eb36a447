"""Must show: the backtest segment cannot leak into training or selection.

Two runs of the same tiny spec, one on clean bars and one whose backtest bars are garbage: the
leaderboards (entries and snapshot tensors), the selected agent, the linear baseline's ridge
coefficients and trading parameters, and the validation results must be bit-identical, while the
backtests differ (the garbage did reach the final backtest).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import torch
from rich.console import Console
from tiny import garble_backtest, tiny_bars, tiny_spec, write_tiny_dataset

from finpod.pipeline.main import RunResult, run
from podracer import Leaderboard
from podracer.orchestrator import LEADERBOARD_DIR

LINEAGE_KEYS = ("rank", "pod_id", "parent_id", "generation", "policy_version", "score", "env_steps", "seed")


def _board(result: RunResult) -> Leaderboard:
    return Leaderboard.open(result.run_dir / "tournament" / LEADERBOARD_DIR)


def _run(tmp_path: Path, name: str, bars: pd.DataFrame) -> RunResult:
    dataset = write_tiny_dataset(tmp_path / f"data-{name}", bars)
    return run(tiny_spec(dataset), out=tmp_path / f"reports-{name}", console=Console(quiet=True))


def test_backtest_garbage_changes_nothing_before_the_backtest(
    tmp_path: Path, no_report: list[dict[str, Any]]
) -> None:
    bars = tiny_bars(seed=11)
    clean = _run(tmp_path, "clean", bars)
    garbled = _run(tmp_path, "garbage", garble_backtest(bars, seed=12))

    assert clean.leaderboard  # one pod whose score keeps improving holds one entry; more are compared too
    for ours, theirs in zip(clean.leaderboard, garbled.leaderboard, strict=True):
        assert {k: ours[k] for k in LINEAGE_KEYS} == {k: theirs[k] for k in LINEAGE_KEYS}
        assert ours["agent_config"] == theirs["agent_config"]
    clean_board, garbled_board = _board(clean), _board(garbled)
    for rank in range(len(clean_board.entries)):
        ours, theirs = clean_board.load_state(rank), garbled_board.load_state(rank)
        _assert_identical(ours, theirs, f"rank {rank}")

    for name, trader in clean.validation.traders.items():
        pd.testing.assert_series_equal(
            trader.returns, garbled.validation.traders[name].returns, check_exact=True
        )

    clean_linear, garbled_linear = (call["linear_baseline"] for call in no_report)
    assert clean_linear is not None
    assert clean_linear == garbled_linear  # the ridge's coefficients (floats, exact) and its trading
    assert "linear" in clean.validation.traders  # compared bit for bit above

    changed = clean.backtest.traders["equal_weight"].returns
    assert not changed.equals(garbled.backtest.traders["equal_weight"].returns)


def _assert_identical(ours: object, theirs: object, where: str) -> None:
    if isinstance(ours, torch.Tensor):
        assert isinstance(theirs, torch.Tensor), where
        assert torch.equal(ours, theirs), where
    elif isinstance(ours, dict):
        assert isinstance(theirs, dict), where
        assert ours.keys() == theirs.keys(), where
        for key in ours:
            _assert_identical(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(ours, list | tuple):
        assert isinstance(theirs, list | tuple), where
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _assert_identical(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, where
