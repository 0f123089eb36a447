"""Naive intraday timestamps are never guessed: refused in one line, or read as the flags say."""

from __future__ import annotations

from pathlib import Path

import pytest

from clirun import run_cli
from finpod.data.importers import import_paths
from finpod.data.importers.naive_times import NaiveReading, naive_reading
from finpod.data.store import read_dataset
from finpod.errors import DataError, SpecError

VENDOR = (
    "Datetime,Open,High,Low,Close,Volume\n"
    "2019-02-11 09:30:00,10,11,9,10.0,100\n"
    "2019-02-11 09:31:00,10,11,9,10.5,100\n"
    "2019-02-11 09:32:00,10,11,9,10.2,100\n"
)


def _vendor_file(tmp_path: Path, name: str = "aapl.csv") -> Path:
    path = tmp_path / name
    path.write_text(VENDOR)
    return path


@pytest.mark.parametrize("symbol", [None, "AAPL"])
def test_naive_vendor_times_are_refused_naming_both_readings(tmp_path: Path, symbol: str | None) -> None:
    """With or without --symbol the refusal names the real ambiguity, not the file name."""
    with pytest.raises(DataError) as err:
        import_paths([_vendor_file(tmp_path)], tmp_path / "ds", symbol=symbol)
    message = str(err.value)
    assert "AAPL 2019-02-11 09:30:00" in message
    assert "bar START or a bar END" in message
    assert "--timestamps start|end and --tz ZONE" in message
    assert "file name" not in message
    assert not (tmp_path / "ds").exists()


def test_bar_starts_in_new_york_keep_the_0930_bar(tmp_path: Path) -> None:
    manifest = import_paths(
        [_vendor_file(tmp_path)], tmp_path / "ds", timestamps=NaiveReading("start", "America/New_York")
    )
    bars, _ = read_dataset(tmp_path / "ds")
    # February: New York is UTC-5, so the 09:30 bar START is 14:30 UTC.
    assert bars["timestamp"].dt.strftime("%H:%M").tolist() == ["14:30", "14:31", "14:32"]
    assert bars["close"].tolist() == [10.0, 10.5, 10.2]
    assert manifest.symbols == ("AAPL",)
    assert "outside_regular_hours_bars_dropped" not in manifest.repairs


def test_bar_ends_move_back_one_bar_and_the_first_leaves_regular_hours(tmp_path: Path) -> None:
    manifest = import_paths(
        [_vendor_file(tmp_path)], tmp_path / "ds", timestamps=NaiveReading("end", "America/New_York")
    )
    bars, _ = read_dataset(tmp_path / "ds")
    assert bars["timestamp"].dt.strftime("%H:%M").tolist() == ["14:30", "14:31"]
    assert bars["close"].tolist() == [10.5, 10.2]
    assert manifest.repairs["outside_regular_hours_bars_dropped"] == 1


def test_utc_wall_clock_times(tmp_path: Path) -> None:
    path = tmp_path / "aapl.csv"
    path.write_text(VENDOR.replace(" 09:3", " 14:3"))
    import_paths([path], tmp_path / "ds", timestamps=NaiveReading("start", "UTC"))
    bars, _ = read_dataset(tmp_path / "ds")
    assert bars["timestamp"].dt.strftime("%H:%M").tolist() == ["14:30", "14:31", "14:32"]


def test_one_flag_alone_names_the_missing_one(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"fix: pass --tz ZONE, or write"):
        import_paths([_vendor_file(tmp_path)], tmp_path / "ds", timestamps=NaiveReading("start", None))
    with pytest.raises(DataError, match=r"fix: pass --timestamps start\|end, or write"):
        import_paths([_vendor_file(tmp_path)], tmp_path / "ds", timestamps=NaiveReading(None, "UTC"))


def test_alphavantage_name_reads_bar_ends_in_new_york_and_the_flags_override_it(tmp_path: Path) -> None:
    path = _vendor_file(tmp_path, "AAPL_1min.csv")
    import_paths([path], tmp_path / "by_name")
    by_name, _ = read_dataset(tmp_path / "by_name")
    assert by_name["timestamp"].dt.strftime("%H:%M").tolist() == ["14:30", "14:31"]
    import_paths([path], tmp_path / "as_starts", timestamps=NaiveReading("start", None))
    as_starts, _ = read_dataset(tmp_path / "as_starts")
    assert as_starts["timestamp"].dt.strftime("%H:%M").tolist() == ["14:30", "14:31", "14:32"]


def test_unknown_time_zone_is_refused() -> None:
    with pytest.raises(SpecError, match="--tz 'New York' is not a known time zone"):
        naive_reading("start", "New York")


def test_cli_refusal_is_one_line_exit_2_and_flags_import(tmp_path: Path) -> None:
    path = _vendor_file(tmp_path)
    refused = run_cli("data", "import", str(path), "--out", str(tmp_path / "no"))
    assert refused.exit_code == 2
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "--timestamps start|end and --tz ZONE" in refused.stderr
    assert not (tmp_path / "no").exists()
    flags = ("--timestamps", "start", "--tz", "America/New_York")
    done = run_cli("data", "import", str(path), "--out", str(tmp_path / "ds"), *flags)
    assert done.exit_code == 0, done.stderr
    assert "3 1min bars" in done.stdout


BARS = "timestamp,symbol,open,high,low,close,volume\n"


def _bars_at(tmp_path: Path, utc_times: list[str]) -> Path:
    path = tmp_path / "bars.csv"
    path.write_text(BARS + "".join(f"2019-02-11T{t}:00+00:00,AAPL,10,11,9,10,100\n" for t in utc_times))
    return path


def test_zoned_bar_ends_are_refused_not_shifted(tmp_path: Path) -> None:
    # Bar ENDS written with an offset (14:31..21:00 UTC = 09:31..16:00 New York) used to import one
    # minute late, each session's 16:00 bar dropped as "outside regular hours" and its 09:30 bar
    # missing: silently wrong bars. They are refused, naming the file, symbol, close time and fix.
    path = _bars_at(tmp_path, ["14:31", "14:32", "20:59", "21:00"])
    with pytest.raises(DataError) as caught:
        import_paths([path], tmp_path / "ds")
    message = str(caught.value)
    assert message.startswith(f"{path}: AAPL 2019-02-11 21:00:00+00:00: minute bars at the session's close")
    assert "(16:00 New York)" in message
    assert "look like bar ENDS; fix: write bar STARTS (subtract one minute" in message
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    "utc_times",
    [
        ["14:30", "14:31", "20:59", "21:00"],  # bar starts with the opening minute: 21:00 dropped, counted
        ["14:31", "20:59", "21:00", "21:01"],  # extended hours (a post-market bar): not bar ends
        ["14:31", "14:32", "20:59"],  # nothing at the close: starts with a missing first minute
    ],
)
def test_bar_starts_with_a_close_stamp_still_import(tmp_path: Path, utc_times: list[str]) -> None:
    manifest = import_paths([_bars_at(tmp_path, utc_times)], tmp_path / "ds")
    kept = [t for t in utc_times if "14:30" <= t < "21:00"]
    assert manifest.rows == len(kept)
    assert manifest.repairs.get("outside_regular_hours_bars_dropped", 0) == len(utc_times) - len(kept)


def test_alphavantage_read_as_starts_on_request_is_refused_at_the_close(tmp_path: Path) -> None:
    path = tmp_path / "AAPL_1min.csv"
    path.write_text(
        "datetime,open,high,low,close,volume\n2019-02-11 16:00:00,10,11,9,10,100\n"
        "2019-02-11 15:59:00,10,11,9,10,100\n2019-02-11 09:31:00,10,11,9,10,100\n"
    )
    import_paths([path], tmp_path / "as_ends")  # the name's reading: bar ends, fine
    with pytest.raises(DataError, match=r"look like bar ENDS.*--timestamps end --tz America/New_York"):
        import_paths([path], tmp_path / "as_starts", timestamps=NaiveReading("start", None))
