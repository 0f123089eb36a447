"""Dataset folders: round trip, manifest contents, atomic writes, and refusing anything not whole."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from finpod.data import store
from finpod.data.store import BARS_FILE, MANIFEST_FILE, read_dataset, read_manifest, write_dataset
from finpod.data.synth import synth_market
from finpod.errors import DataError


def _bars() -> pd.DataFrame:
    bars = synth_market(3, 2, "1d", seed=7)
    return bars.sample(frac=1.0, random_state=0).reset_index(drop=True)


def _write(bars: pd.DataFrame, out: Path) -> store.Manifest:
    return write_dataset(
        bars,
        out,
        source="test",
        frequency="1d",
        adjustment="synthetic",
        repairs={"zero_volume_bars": 0, "reordered_rows": 2},
        notes=["made by a test"],
    )


def test_round_trip_sorts_and_describes(tmp_path: Path) -> None:
    bars = _bars()
    manifest = _write(bars, tmp_path / "ds")
    loaded, again = read_dataset(tmp_path / "ds")
    assert again == manifest == read_manifest(tmp_path / "ds")
    expected = bars.sort_values(["symbol", "timestamp"], ignore_index=True)
    pd.testing.assert_frame_equal(loaded, expected, check_dtype=False)
    assert str(loaded["timestamp"].dtype) == "datetime64[ns, UTC]"
    assert manifest.rows == 6
    assert manifest.symbols == ("SYN000", "SYN001", "SYN002")
    assert manifest.first_bar == "2016-01-04T14:30:00+00:00"
    assert manifest.last_bar == "2016-01-05T14:30:00+00:00"
    assert manifest.calendar == "XNAS"
    assert manifest.repairs == {"zero_volume_bars": 0, "reordered_rows": 2}
    on_disk = json.loads((tmp_path / "ds" / MANIFEST_FILE).read_text())
    assert on_disk["sha256"] == manifest.sha256
    assert len(manifest.sha256) == 64


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    _write(_bars(), tmp_path / "ds")
    with pytest.raises(DataError, match="already exists; remove it"):
        _write(_bars(), tmp_path / "ds")


def test_empty_bars_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no bars to write"):
        _write(_bars().iloc[:0], tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


def test_failure_mid_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(manifest: store.Manifest, path: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(store, "_write_manifest", crash)
    with pytest.raises(OSError, match="disk full"):
        _write(_bars(), tmp_path / "ds")
    assert list(tmp_path.iterdir()) == []


def test_killed_writer_leaves_no_dataset(tmp_path: Path) -> None:
    """A writer killed after writing both files but before the rename: no dataset at the target."""
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from finpod.data import store
        from finpod.data.synth import synth_market

        def die(path):
            os._exit(9)

        store.fsync_directory = die
        store.write_dataset(synth_market(2, 2, "1d", seed=1), Path({str(tmp_path / "ds")!r}),
            source="test", frequency="1d", adjustment="synthetic", repairs={{}}, notes=[])
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=120)
    assert done.returncode == 9
    assert not (tmp_path / "ds").exists()
    leftovers = list(tmp_path.iterdir())
    assert len(leftovers) == 1
    assert leftovers[0].name.startswith(".ds.tmp-")
    assert (leftovers[0] / BARS_FILE).is_file()
    assert (leftovers[0] / MANIFEST_FILE).is_file()
    with pytest.raises(DataError, match="no such dataset folder"):
        read_dataset(tmp_path / "ds")


def test_a_file_is_not_a_dataset_folder(tmp_path: Path) -> None:
    _write(_bars(), tmp_path / "ds")
    with pytest.raises(DataError, match=r"bars\.parquet: a file, not a dataset folder; fix: pass the folder"):
        read_dataset(tmp_path / "ds" / BARS_FILE)


@pytest.mark.parametrize(("version", "message"), [(99, "newer than this finpod reads"), (0, "malformed")])
def test_a_manifest_format_this_finpod_cannot_read_is_refused(
    tmp_path: Path, version: int, message: str
) -> None:
    _write(_bars(), tmp_path / "ds")
    path = tmp_path / "ds" / MANIFEST_FILE
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["format_version"] = version
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_manifest(tmp_path / "ds")


def test_folder_without_manifest_is_not_a_dataset(tmp_path: Path) -> None:
    _write(_bars(), tmp_path / "ds")
    (tmp_path / "ds" / MANIFEST_FILE).unlink()
    with pytest.raises(DataError, match=r"no manifest.json, so this is not a complete dataset"):
        read_dataset(tmp_path / "ds")


def test_truncated_bars_fail_the_hash(tmp_path: Path) -> None:
    _write(_bars(), tmp_path / "ds")
    bars_path = tmp_path / "ds" / BARS_FILE
    bars_path.write_bytes(bars_path.read_bytes()[:-100])
    with pytest.raises(DataError, match="does not match the manifest"):
        read_dataset(tmp_path / "ds")


def test_row_count_mismatch_is_caught(tmp_path: Path) -> None:
    _write(_bars(), tmp_path / "ds")
    path = tmp_path / "ds" / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest["rows"] = 5
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="6 rows but the manifest says 5"):
        read_dataset(tmp_path / "ds")


def test_malformed_manifest_names_the_field(tmp_path: Path) -> None:
    _write(_bars(), tmp_path / "ds")
    path = tmp_path / "ds" / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest["frequency"] = "5min"
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="malformed manifest at frequency"):
        read_manifest(tmp_path / "ds")
