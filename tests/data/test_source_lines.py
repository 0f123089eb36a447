"""Messages name the line a user's editor shows: 1-based, the header and every line above it counted.

The expected line is found independently of the importer: the 1-based number of the line of the file
that holds the bad value.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from finpod.data.importers import import_paths
from finpod.data.splits import read_actions
from finpod.data.textfile import records, source_line
from finpod.errors import DataError

HEADER = "timestamp,symbol,open,high,low,close,volume\n"
ROW_0 = "2019-02-11T14:30:00+00:00,AAPL,10,11,9,10,100\n"
ROW_1 = "2019-02-11T14:31:00+00:00,AAPL,10,11,9,10,100\n"
BAD = "NOT-A-TIME,AAPL,10,11,9,10,100\n"
DAILY = "Date,Open,High,Low,Close,Volume\n2019-02-11,10,11,9,10,100\nxx-bad,10,11,9,10,100\n"


def _line_holding(text: str, needle: str) -> int:
    """The 1-based line of ``text`` that holds ``needle``."""
    (line,) = [i + 1 for i, content in enumerate(text.splitlines()) if needle in content]
    return line


BAD_TIME_FILES = {
    "blank_lines_at_the_top": "\n\n" + HEADER + ROW_0 + BAD,
    "blank_lines_between_rows": HEADER + ROW_0 + "\n\n" + ROW_1 + "   \n" + BAD,
    "crlf_line_ends": (HEADER + ROW_0 + "\n" + BAD).replace("\n", "\r\n"),
    "first_row_bad": HEADER + BAD + ROW_0,
}


@pytest.mark.parametrize("name", sorted(BAD_TIME_FILES))
def test_a_bad_timestamp_names_its_real_line(name: str, tmp_path: Path) -> None:
    text = BAD_TIME_FILES[name]
    path = tmp_path / "b.csv"
    path.write_bytes(text.encode())
    with pytest.raises(DataError) as caught:
        import_paths([path], tmp_path / "ds")
    line = _line_holding(text.replace("\r\n", "\n"), "NOT-A-TIME")
    assert f"AAPL line {line}: timestamp 'NOT-A-TIME'" in str(caught.value)


def test_a_daily_vendor_file_with_blank_lines_names_the_real_line(tmp_path: Path) -> None:
    text = "\n\n" + DAILY
    path = tmp_path / "IBM.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=f"IBM line {_line_holding(text, 'xx-bad')}: timestamp 'xx-bad'"):
        import_paths([path], tmp_path / "ds")


def test_a_utf16_file_with_a_blank_line_names_the_real_line(tmp_path: Path) -> None:
    text = HEADER + ROW_0 + "\n" + BAD
    path = tmp_path / "b.csv"
    path.write_bytes(text.encode("utf-16"))
    with pytest.raises(DataError, match=f"line {_line_holding(text, 'NOT-A-TIME')}: timestamp"):
        import_paths([path], tmp_path / "ds")


def test_a_quoted_line_break_counts_as_a_line(tmp_path: Path) -> None:
    text = "timestamp,symbol,open,high,low,close,volume,note\n"
    text += ROW_0.strip() + ',"two\nlines"\n' + BAD.strip() + ",x\n"
    path = tmp_path / "b.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=f"line {_line_holding(text, 'NOT-A-TIME')}: timestamp"):
        import_paths([path], tmp_path / "ds")


def test_a_bad_row_of_a_parquet_file_is_named_by_row(tmp_path: Path) -> None:
    frame = pd.read_csv(pd.io.common.StringIO(HEADER + ROW_0 + ROW_1), dtype=str)
    frame.loc[1, "timestamp"] = "NOT-A-TIME"
    frame.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(DataError, match="AAPL row 2: timestamp 'NOT-A-TIME'"):
        import_paths([tmp_path / "b.parquet"], tmp_path / "ds")


JUNK_ABOVE = {
    "title_line": ("Exported from Vendor X\n", 2),
    "title_and_blank_line": ("Exported from Vendor X\n\n", 3),
    "title_with_commas": ("Symbol: AAPL, exported 2020-01-02, all rights reserved\n\n", 3),
    "two_lines": ("Vendor X\nAAPL minute bars\n", 3),
}


@pytest.mark.parametrize("name", sorted(JUNK_ABOVE))
def test_junk_above_the_header_names_the_header_line_and_line_1(name: str, tmp_path: Path) -> None:
    junk, header_line = JUNK_ABOVE[name]
    path = tmp_path / "b.csv"
    path.write_text(junk + HEADER + ROW_0 + ROW_1)
    with pytest.raises(DataError) as caught:
        import_paths([path], tmp_path / "ds")
    message = str(caught.value)
    assert f"the header (timestamp,symbol,open,high,low,close,volume) is on line {header_line}" in message
    assert f"(line 1: {junk.splitlines()[0]!r})" in message
    above = "line 1" if header_line == 2 else f"lines 1-{header_line - 1}"
    assert f"fix: delete {above} so the header comes first" in message
    assert not (tmp_path / "ds").exists()


def test_junk_above_a_vendor_header_is_found_too(tmp_path: Path) -> None:
    path = tmp_path / "AAPL.csv"
    path.write_text("Daily prices\n" + DAILY)
    with pytest.raises(DataError, match=r"the header \(Date,Open,High,Low,Close,Volume\) is on line 2"):
        import_paths([path], tmp_path / "ds")


def test_source_line_agrees_with_pandas_on_every_record(tmp_path: Path) -> None:
    text = '\n a,b\n\n1,"x\ny"\n   \n2,z\n\n\n3,w\n'
    path = tmp_path / "t.csv"
    path.write_text(text)
    frame = pd.read_csv(path)
    lines = text.splitlines()
    for record in range(len(frame)):
        line = int(source_line(path, record).removeprefix("line "))
        assert lines[line - 1].startswith(str(frame.iloc[record, 0]))
    assert [line for line, _ in records(path)] == [2, 4, 7, 10]


def test_a_corporate_actions_table_names_the_real_line(tmp_path: Path) -> None:
    text = "symbol,date,ratio\n\nAAPL,2020-08-31,4:1\n\nTSLA,2020-08-31,five\n"
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=f"line {_line_holding(text, 'five')}: split ratio 'five'"):
        read_actions(path)
    path.write_text(text.replace("2020-08-31,five", "31.08.2020,5"))
    with pytest.raises(DataError, match=r"line 5: date '31\.08\.2020'"):
        read_actions(path)
