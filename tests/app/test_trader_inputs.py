"""A run's saved trader inputs: read back as written, or refused in one line when damaged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from durable import record_durable_writes
from tiny import tiny_spec

from finpod.data.features import FeatureStats, feature_specs
from finpod.errors import SpecError
from finpod.pipeline.trader_inputs import TRADER_INPUTS_FILE, save_trader_inputs, trader_inputs
from finpod.rundir import RunDir


def _stats(names: tuple[str, ...] | None = None) -> FeatureStats:
    names = names or tuple(spec.name for spec in feature_specs("1d"))
    return FeatureStats(names, torch.zeros(len(names)), torch.arange(1.0, len(names) + 1.0))


def test_saved_inputs_read_back(tmp_path: Path) -> None:
    save_trader_inputs(tmp_path, ["AAA", "BBB"], _stats())
    symbols, stats = trader_inputs(RunDir(tmp_path), tiny_spec(tmp_path))
    assert symbols == ["AAA", "BBB"]
    assert stats.names == _stats().names
    torch.testing.assert_close(stats.std, _stats().std)


def test_saved_inputs_go_through_the_durable_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill mid-write leaves the old file or the new one (temp file, fsync, rename), never half."""
    from finpod.pipeline import trader_inputs as module

    written = record_durable_writes(monkeypatch, module, "write_bytes_atomic")
    save_trader_inputs(tmp_path, ["AAA"], _stats())
    assert written == [TRADER_INPUTS_FILE]
    assert sorted(p.name for p in tmp_path.iterdir()) == [TRADER_INPUTS_FILE], "no temp file left"


def test_inputs_of_another_feature_set_are_refused_in_one_line(tmp_path: Path) -> None:
    """A run trained on the raw returns (``logret_1``, before they became cross-sectional) would
    read other inputs than it learned on: refused, naming the change and the fix."""
    old = tuple(name.removeprefix("xs_") for name in _stats().names)
    save_trader_inputs(tmp_path, ["AAA"], _stats(old))
    with pytest.raises(SpecError) as caught:
        trader_inputs(RunDir(tmp_path), tiny_spec(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert "'logret_1' is now 'xs_logret_1'" in message
    assert "fix: train it again with `finpod run`" in message
    save_trader_inputs(tmp_path, ["AAA"], _stats(_stats().names[:3]))
    with pytest.raises(SpecError, match="3 features, this finpod computes 12"):
        trader_inputs(RunDir(tmp_path), tiny_spec(tmp_path))


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
