"""Imports that help: every file checked in one pass, counted repairs, delimiters and encodings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clirun import run_cli
from finpod.data.importers import import_paths
from finpod.data.store import read_dataset
from finpod.data.validate import readable
from finpod.errors import DataError

HEADER = ["timestamp", "symbol", "open", "high", "low", "close", "volume"]
ROWS = [
    ["2019-02-11T14:30:00+00:00", "AAPL", "10", "11", "9", "10", "100"],
    ["2019-02-11T14:31:00+00:00", "AAPL", "10", "11", "9", "10", "100"],
    ["2019-02-11T14:31:00+00:00", "AAPL", "10", "11", "9", "10.5", "200"],  # duplicate bar
    ["2019-02-11T14:32:00+00:00", "AAPL", "10", "9", "11", "10", "100"],  # high < low
    ["2019-02-11T14:33:00+00:00", "AAPL", "10", "11", "9", "", "100"],  # missing close
    ["2019-02-11T14:34:00+00:00", "AAPL", "10", "11", "9", "10", "100"],
]


def _text(rows: list[list[str]], delimiter: str = ",") -> str:
    return "\n".join(delimiter.join(row) for row in [HEADER, *rows]) + "\n"


@pytest.mark.parametrize(
    ("delimiter", "encoding"),
    [("\t", "utf-8"), (";", "utf-8"), ("|", "utf-8"), (",", "utf-16"), (",", "utf-8-sig"), ("\t", "utf-16")],
)
def test_delimiters_and_encodings_are_detected(delimiter: str, encoding: str, tmp_path: Path) -> None:
    clean = [ROWS[0], ROWS[1], ROWS[5]]
    path = tmp_path / "bars.csv"
    path.write_bytes(_text(clean, delimiter).encode(encoding))
    manifest = import_paths([path], tmp_path / "ds")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.rows == 3
    assert list(bars["symbol"].unique()) == ["AAPL"]


def test_an_unknown_encoding_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "bars.csv"
    path.write_bytes(_text([ROWS[0], ROWS[1]]).replace("AAPL", "CAF\xc9").encode("latin-1"))
    with pytest.raises(DataError, match=r"not UTF-8 or UTF-16 text .* save it as UTF-8 CSV"):
        import_paths([path], tmp_path / "ds")


def test_repairs_drop_and_count_duplicates_and_invalid_rows(tmp_path: Path) -> None:
    path = tmp_path / "dirty.csv"
    path.write_text(_text(ROWS))
    result = run_cli(
        "data", "import", str(path), "--out", str(tmp_path / "ds"), "--on-duplicate", "last",
        "--drop-invalid-rows",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    bars, manifest = read_dataset(tmp_path / "ds")
    assert manifest.repairs["duplicate_bars_dropped"] == 1
    assert manifest.repairs["invalid_rows_dropped"] == 2
    assert "duplicate_bars_dropped 1" in result.stdout
    assert bars["close"].tolist() == [10.0, 10.5, 10.0]  # the LAST of the duplicate pair was kept
    assert bars["volume"].tolist() == [100.0, 200.0, 100.0]


def test_on_duplicate_first_keeps_the_first(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text(_text([ROWS[0], ROWS[1], ROWS[2], ROWS[5]]))
    manifest = import_paths([path], tmp_path / "ds", on_duplicate="first")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.repairs["duplicate_bars_dropped"] == 1
    assert bars["close"].tolist() == [10.0, 10.0, 10.0]


def test_every_file_is_checked_and_the_problems_are_counted(tmp_path: Path) -> None:
    for index in range(5):
        (tmp_path / f"f{index}.csv").write_text(_text([ROWS[0], ROWS[4]]))
    (tmp_path / "good.csv").write_text(_text([ROWS[0], ROWS[1]]).replace("AAPL", "MSFT"))
    with pytest.raises(DataError) as caught:
        import_paths([tmp_path], tmp_path / "ds")
    message = str(caught.value)
    assert message.startswith("5 of 6 input files have problems (nothing was written)")
    assert message.count("close is nan") == 3
    assert message.endswith("and 2 more")
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (np.float64("nan"), "nan"),
        (np.float64(1.5), "1.5"),
        ("abc", "'abc'"),
        ("", "<empty>"),
        (None, "<empty>"),
    ],
)
def test_values_in_messages_read_like_the_file(value: object, shown: str) -> None:
    assert readable(value) == shown
