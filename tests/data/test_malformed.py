"""The malformed-input corpus: each bad file gets one clear line naming file, symbol and time, exit 2."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from clirun import run_cli
from finpod.data.importers import import_paths
from finpod.errors import DataError

BARS = "timestamp,symbol,open,high,low,close,volume\n"
T0 = "2019-02-11T14:30:00+00:00"
T1 = "2019-02-11T14:31:00+00:00"
T2 = "2019-02-11T14:32:00+00:00"
GOOD_0 = f"{T0},AAPL,10,11,9,10,100\n"
GOOD_1 = f"{T1},AAPL,10,11,9,10,100\n"
AV = "datetime,open,high,low,close,volume\n"
DA = "timestamp,open,high,low,close,adjusted_close,volume,dividend_amount,split_coefficient\n"
WHEN_0 = "2019-02-11 14:30:00+00:00"
WHEN_1 = "2019-02-11 14:31:00+00:00"


@dataclass(frozen=True)
class Case:
    """A bad file: its name, its text, and what the one-line error must say."""

    name: str
    file_name: str
    text: str
    expected: tuple[str, ...]


CASES = [
    Case("nan_price", "b.csv", BARS + GOOD_0 + f"{T1},AAPL,10,11,9,,100\n", ("AAPL", WHEN_1, "close is nan")),
    Case(
        "zero_price",
        "b.csv",
        BARS + GOOD_0 + f"{T1},AAPL,10,11,0,0,100\n",
        ("AAPL", WHEN_1, "non-positive low"),
    ),
    Case(
        "negative_price",
        "b.csv",
        BARS + f"{T0},AAPL,-1,11,-2,10,100\n",
        ("AAPL", WHEN_0, "non-positive open"),
    ),
    Case("inf_price", "b.csv", BARS + f"{T0},AAPL,10,inf,9,10,100\n", ("AAPL", WHEN_0, "high is inf")),
    Case(
        "high_below_low",
        "b.csv",
        BARS + GOOD_0 + f"{T1},AAPL,10.5,10.0,11.0,10.5,100\n",
        ("AAPL", WHEN_1, "high 10.0 < low 11.0", "fix or drop that row"),
    ),
    Case(
        "open_outside_range",
        "b.csv",
        BARS + f"{T0},AAPL,12,11,9,10,100\n",
        ("AAPL", WHEN_0, "open 12.0 outside [low 9.0, high 11.0]"),
    ),
    Case(
        "close_outside_range",
        "b.csv",
        BARS + f"{T0},AAPL,10,11,9,8,100\n",
        ("AAPL", WHEN_0, "close 8.0 outside [low 9.0, high 11.0]"),
    ),
    Case(
        "negative_volume",
        "b.csv",
        BARS + f"{T0},AAPL,10,11,9,10,-5\n",
        ("AAPL", WHEN_0, "negative volume -5.0"),
    ),
    Case(
        "duplicate_timestamp",
        "b.csv",
        BARS + GOOD_0 + GOOD_1 + GOOD_1,
        ("AAPL", WHEN_1, "duplicate timestamp", "keep one bar per symbol and timestamp"),
    ),
    Case(
        "unsorted_timestamps",
        "b.csv",
        BARS + GOOD_1 + GOOD_0 + f"{T2},AAPL,10,11,9,10,100\n",
        ("AAPL", WHEN_0, "unsorted", "oldest first"),
    ),
    Case(
        "naive_timestamps",
        "b.csv",
        BARS + "2019-02-11 14:30:00,AAPL,10,11,9,10,100\n2019-02-11 14:31:00,AAPL,10,11,9,10,100\n",
        ("AAPL", "2019-02-11 14:30:00", "naive timestamps", "with an offset"),
    ),
    Case(
        "unknown_time_zone",
        "b.csv",
        BARS + GOOD_0 + "2019-02-11 14:31:00 XYZ,AAPL,10,11,9,10,100\n",
        ("AAPL", "line 3", "2019-02-11 14:31:00 XYZ", "known UTC offset"),
    ),
    Case(
        "mixed_naive_and_zoned",
        "b.csv",
        BARS + GOOD_0 + "2019-02-11 14:31:00,AAPL,10,11,9,10,100\n",
        ("AAPL", "line 3", "with and without a UTC offset"),
    ),
    Case(
        "empty_symbol",
        "b.csv",
        BARS + GOOD_0 + f"{T1},,10,11,9,10,100\n",
        ("<empty symbol>", WHEN_1, "empty symbol"),
    ),
    Case(
        "non_numeric_price",
        "b.csv",
        BARS + GOOD_0 + f"{T1},AAPL,10,abc,9,10,100\n",
        ("AAPL", WHEN_1, "high 'abc' is not a number"),
    ),
    Case("empty_file", "b.csv", "", ("empty file",)),
    Case("header_only", "b.csv", BARS, ("empty file",)),
    Case(
        "unknown_format",
        "b.csv",
        "foo,bar\n1,2\n",
        ("unknown format", "columns foo, bar", "accepted:", "--column-map"),
    ),
    Case(
        "missing_column",
        "b.csv",
        "timestamp,symbol,open,high,low,close\n" + f"{T0},AAPL,10,11,9,10\n",
        ("no volume column", "columns timestamp, symbol, open, high, low, close", "YOURS=volume"),
    ),
    Case(
        "off_minute_bar",
        "b.csv",
        BARS
        + "2019-02-11T14:30:30+00:00,AAPL,10,11,9,10,100\n2019-02-11T14:31:30+00:00,AAPL,10,11,9,10,100\n",
        ("AAPL", "2019-02-11 14:30:30+00:00", "does not start on a whole minute"),
    ),
    Case(
        "daily_bar_not_at_open",
        "b.csv",
        BARS
        + "2019-02-11T20:00:00+00:00,AAPL,10,11,9,10,100\n2019-02-12T20:00:00+00:00,AAPL,10,11,9,10,100\n",
        ("AAPL", "2019-02-11 20:00:00+00:00", "must start at its session's market open"),
    ),
    Case(
        "daily_bar_on_a_weekend",
        "AAPL_daily.csv",
        AV + "2019-02-16,10,11,9,10,100\n2019-02-15,10,11,9,10,100\n",
        ("AAPL 2019-02-16", "not an XNAS trading session"),
    ),
    Case(
        "split_coefficient_zero",
        "DA-AAPL-T-2021-04-21.csv",
        DA + "2019-02-11,10,11,9,10,10,100,0,1\n2019-02-12,10,11,9,10,10,100,0,0\n",
        ("AAPL", "2019-02-12 14:30:00+00:00", "split_coefficient", "out of range"),
    ),
    Case(
        "nonexistent_new_york_time",
        "AAPL_1min.csv",
        AV + "2019-03-10 02:31:00,10,11,9,10,100\n2019-03-10 02:30:00,10,11,9,10,100\n",
        ("AAPL", "not a valid America/New_York time"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_file_is_one_clear_line(case: Case, tmp_path: Path) -> None:
    path = tmp_path / case.file_name
    path.write_text(case.text)
    with pytest.raises(DataError) as caught:
        import_paths([path], tmp_path / "ds")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for fragment in case.expected:
        assert fragment in message
    assert not (tmp_path / "ds").exists()


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 15


@pytest.mark.parametrize("name", ["high_below_low", "unknown_time_zone", "empty_file", "unknown_format"])
def test_cli_prints_one_line_and_exits_2(name: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == name)
    path = tmp_path / case.file_name
    path.write_text(case.text)
    result = run_cli("data", "import", str(path), "--out", str(tmp_path / "ds"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {path}")
    assert "Traceback" not in result.stderr
    assert case.expected[0] in lines[0]
