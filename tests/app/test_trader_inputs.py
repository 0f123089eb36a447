"""A run's saved trader inputs: read back as written, or refused in one line when damaged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny import tiny_spec

from finpod.data.features import FeatureStats
from finpod.errors import SpecError
from finpod.pipeline.trader_inputs import TRADER_INPUTS_FILE, save_trader_inputs, trader_inputs
from finpod.rundir import RunDir


def _stats() -> FeatureStats:
    return FeatureStats(("logret_1", "vol_20"), torch.tensor([0.0, 0.1]), torch.tensor([1.0, 2.0]))


def test_saved_inputs_read_back(tmp_path: Path) -> None:
    save_trader_inputs(tmp_path, ["AAA", "BBB"], _stats())
    symbols, stats = trader_inputs(RunDir(tmp_path), tiny_spec(tmp_path))
    assert symbols == ["AAA", "BBB"]
    assert stats.names == ("logret_1", "vol_20")
    torch.testing.assert_close(stats.std, torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("damage", ["truncated", "foreign_pickle", "wrong_payload"])
def test_damaged_inputs_are_one_line(tmp_path: Path, damage: str) -> None:
    """A run folder from before parts were recorded has no sha256 to catch these: the load does."""
    path = save_trader_inputs(tmp_path, ["AAA"], _stats())
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:40])
    elif damage == "foreign_pickle":
        path.write_bytes(b"\x80\x04\x95\x10garbage")
    else:
        torch.save({"symbols": ["AAA"]}, path)
    with pytest.raises(SpecError) as caught:
        trader_inputs(RunDir(tmp_path), tiny_spec(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / TRADER_INPUTS_FILE}: cannot be read (")
    assert "fix: restore the run folder" in message
