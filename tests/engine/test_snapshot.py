"""Durable files: atomic replacement, content-named snapshots, and refusal of anything not ours."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest
import torch

from podracer.errors import SnapshotError
from podracer.snapshot import (
    atomic_write_bytes,
    atomic_write_json,
    load_snapshot,
    read_json_record,
    save_snapshot,
)

PAYLOAD = {"weights": torch.arange(6.0).reshape(2, 3), "step": 7, "name": "pod", "nested": {"lr": 0.5}}


class _Bomb:
    """Unpickling this would run ``os.system``: a stand-in for a hostile pickle."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_atomic_write_replaces_content_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "file.bin"
    atomic_write_bytes(target, b"old")
    atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.bin"]


def test_a_failed_write_keeps_the_old_file_and_cleans_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.json"
    atomic_write_json(target, {"format": "x", "version": 1, "value": 1})

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_json(target, {"format": "x", "version": 1, "value": 2})
    assert json.loads(target.read_text())["value"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]


def test_snapshot_round_trip_and_content_naming(tmp_path: Path) -> None:
    path = save_snapshot(tmp_path, "pod-000001", PAYLOAD)
    assert path.name.startswith("pod-000001-")
    assert path.suffix == ".pt"
    loaded = load_snapshot(path)
    assert torch.equal(loaded["weights"], PAYLOAD["weights"])
    assert (loaded["step"], loaded["name"], loaded["nested"]) == (7, "pod", {"lr": 0.5})
    mtime = path.stat().st_mtime_ns
    assert save_snapshot(tmp_path, "pod-000001", PAYLOAD) == path
    assert path.stat().st_mtime_ns == mtime
    other = save_snapshot(tmp_path, "pod-000001", {**PAYLOAD, "step": 8})
    assert other != path
    assert load_snapshot(path)["step"] == 7


def test_a_snapshot_skips_the_zip_crc_and_leaves_the_setting_as_it_was(tmp_path: Path) -> None:
    """The SHA-256 in the name guards the bytes; torch's CRC-32 (a quarter of ``torch.save``) is
    skipped for snapshots only, and the process-wide setting is put back."""
    assert torch.serialization.get_crc32_options()
    path = save_snapshot(tmp_path, "pod-000002", PAYLOAD)
    assert torch.serialization.get_crc32_options()  # put back
    with zipfile.ZipFile(path) as archive:
        assert {info.CRC for info in archive.infolist()} == {0}
    assert torch.equal(load_snapshot(path)["weights"], PAYLOAD["weights"])
    other = tmp_path / "plain.pt"
    torch.save(PAYLOAD, other)  # torch's own saves keep their CRC
    with zipfile.ZipFile(other) as archive:
        assert any(info.CRC != 0 for info in archive.infolist())


def test_truncated_snapshot_is_refused(tmp_path: Path) -> None:
    path = save_snapshot(tmp_path, "pod", PAYLOAD)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(SnapshotError, match="truncated or corrupted"):
        load_snapshot(path)


def test_flipped_byte_is_refused(tmp_path: Path) -> None:
    path = save_snapshot(tmp_path, "pod", PAYLOAD)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="truncated or corrupted"):
        load_snapshot(path)


def _named_like_a_snapshot(directory: Path, data: bytes) -> Path:
    path = directory / f"pod-{hashlib.sha256(data).hexdigest()[:16]}.pt"
    path.write_bytes(data)
    return path


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_hostile_pickle_is_refused_and_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"
    for data in (
        pickle.dumps({"payload": _Bomb(marker)}),
        _torch_bytes({"format": "podracer.snapshot", "bomb": _Bomb(marker)}),
    ):
        path = _named_like_a_snapshot(tmp_path, data)
        with pytest.raises(SnapshotError, match="refusing to unpickle"):
            load_snapshot(path)
    assert not marker.exists()


def _torch_bytes(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def test_a_torch_file_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    path = _named_like_a_snapshot(tmp_path, _torch_bytes({"weights": torch.ones(2)}))
    with pytest.raises(SnapshotError, match="no podracer snapshot marker"):
        load_snapshot(path)


@pytest.mark.parametrize("name", ["weights.pt", "pod-abc.pt", "pod-0123456789abcdef.bin"])
def test_files_not_named_like_snapshots_are_refused(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"whatever")
    with pytest.raises(SnapshotError, match="not named like a podracer snapshot"):
        load_snapshot(path)


def test_missing_snapshot_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="is missing"):
        load_snapshot(tmp_path / "pod-0123456789abcdef.pt")


def test_json_records_check_their_markers(tmp_path: Path) -> None:
    path = tmp_path / "index.json"
    atomic_write_json(path, {"format": "podracer.x", "version": 1, "value": 3})
    assert read_json_record(path, "podracer.x", 1)["value"] == 3
    with pytest.raises(SnapshotError, match=r"not a podracer\.y file"):
        read_json_record(path, "podracer.y", 1)
    with pytest.raises(SnapshotError, match="version 1"):
        read_json_record(path, "podracer.x", 2)
    path.write_text('{"format": "podracer.x", "vers')
    with pytest.raises(SnapshotError, match="not valid JSON"):
        read_json_record(path, "podracer.x", 1)
    path.write_text("[1, 2, 3]")
    with pytest.raises(SnapshotError, match="foreign file"):
        read_json_record(path, "podracer.x", 1)
    with pytest.raises(SnapshotError, match="does not exist"):
        read_json_record(tmp_path / "absent.json", "podracer.x", 1)


def test_an_agent_state_is_encoded_as_given_and_other_mappings_as_a_dict() -> None:
    """``encode_agent_state`` keeps a dict as it is (an ``OrderedDict``'s module metadata too, which
    a crashed pod's restore hands back to ``load_state_dict``) and turns other mappings into dicts."""
    import types
    from collections import OrderedDict

    from podracer.leaderboard import AGENT_STATE_KEY, encode_agent_state
    from podracer.snapshot import encode_snapshot

    module_state = torch.nn.Linear(2, 2).state_dict()
    assert isinstance(module_state, OrderedDict)
    assert hasattr(module_state, "_metadata")
    assert encode_agent_state(module_state) == encode_snapshot({AGENT_STATE_KEY: module_state})
    plain = {"w": torch.ones(3)}
    assert encode_agent_state(types.MappingProxyType(plain)) == encode_snapshot({AGENT_STATE_KEY: plain})
