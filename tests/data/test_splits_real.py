"""The split detector on real daily bars (pooksoft, 1999..2021): silent on adjusted prices, loud on raw.

pooksoft's files carry RAW open/high/low/close/volume beside an adjusted close and a split column, so
each file gives both sides: the importer's split- and dividend-adjusted bars (must raise no flag) and
the raw bars a vendor without split information would ship (every flag must be a real split).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clirun import run_cli
from finpod.data.calendar import EXCHANGE_TIMEZONE
from finpod.data.importers import pooksoft
from finpod.data.importers.common import read_table
from finpod.data.splits import SplitJump, detect_splits

pytestmark = pytest.mark.shared_data

RAW_COLUMNS = ["open", "high", "low", "close", "volume"]
UNRECORDED_SPLITS = {("DISCK", "2014-08-07")}
"""A 2-for-1 share dividend (Class C shares) that pooksoft's split column does not list."""
MIN_RAW_SPLITS_FOUND = 75
"""78 flags measured (77 of the 136 listed splits, and DISCK's); the vendor's raw volume is partly
split-adjusted itself, which hides the volume signature of the others."""


@dataclass(frozen=True)
class PooksoftFile:
    """One file read both ways, and the session dates its split column lists."""

    adjusted: pd.DataFrame
    raw: pd.DataFrame
    recorded: frozenset[tuple[str, str]]


@pytest.fixture(scope="module")
def pooksoft_files(shared_data: Path) -> list[PooksoftFile]:
    paths = sorted((shared_data / "daily" / "pooksoft" / "daily_adjusted").glob("DA-*.csv"))
    assert len(paths) == 104
    files = []
    for path in paths:
        table = read_table(path)
        adjusted = pooksoft.read_pooksoft(table, path, pooksoft.symbol_from_name(path)).bars
        ordered = table.sort_values("timestamp", ignore_index=True)
        symbol = str(adjusted["symbol"].iloc[0])
        raw = pd.DataFrame(
            {
                "timestamp": adjusted["timestamp"].to_numpy(),
                "symbol": symbol,
                **{name: ordered[name].to_numpy(dtype=np.float64) for name in RAW_COLUMNS},
            }
        )
        days = ordered.loc[ordered["split_coefficient"] != 1.0, "timestamp"]
        files.append(PooksoftFile(adjusted, raw, frozenset((symbol, str(day)) for day in days)))
    return files


def _flag_day(jump: SplitJump) -> tuple[str, str]:
    return jump.symbol, jump.timestamp.tz_convert(EXCHANGE_TIMEZONE).date().isoformat()


def test_adjusted_pooksoft_bars_raise_no_split_flag(pooksoft_files: list[PooksoftFile]) -> None:
    """Big real moves (BKNG 2000-11-03, ILMN 2011-10-07 on news volume; CMCSA 2004-08-03, a bad bar
    undone the next day) once looked like 3:2 splits."""
    flags = [jump.describe() for file in pooksoft_files for jump in detect_splits(file.adjusted, "1d")]
    assert flags == []


def test_raw_pooksoft_bars_flag_only_recorded_splits(pooksoft_files: list[PooksoftFile]) -> None:
    recorded = set(UNRECORDED_SPLITS).union(*(file.recorded for file in pooksoft_files))
    flagged = {_flag_day(jump) for file in pooksoft_files for jump in detect_splits(file.raw, "1d")}
    assert flagged - recorded == set()
    assert {("AAPL", "2020-08-31"), ("TSLA", "2020-08-31")} <= flagged
    assert len(flagged) >= MIN_RAW_SPLITS_FOUND


def test_raw_aapl_and_tsla_are_refused_at_import_naming_the_2020_splits(
    shared_data: Path, tmp_path: Path
) -> None:
    """A vendor file of raw daily bars (no adjusted close, no split column), as many vendors ship."""
    folder = shared_data / "daily" / "pooksoft" / "daily_adjusted"
    for ticker in ("AAPL", "TSLA"):
        raw = pd.read_csv(next(folder.glob(f"DA-{ticker}-*.csv")))
        recent = raw.loc[raw["timestamp"] >= "2020-01-01", ["timestamp", *RAW_COLUMNS]]
        recent.rename(columns={"timestamp": "Date"}).to_csv(tmp_path / f"{ticker}.csv", index=False)
    result = run_cli(
        "data",
        "import",
        str(tmp_path / "AAPL.csv"),
        str(tmp_path / "TSLA.csv"),
        "--out",
        str(tmp_path / "ds"),
    )
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "AAPL 2020-08-31 13:30:00+00:00" in line
    assert "unadjusted 4:1 split" in line
    assert "TSLA 2020-08-31 13:30:00+00:00" in line
    assert "unadjusted 5:1 split" in line
    assert not (tmp_path / "ds").exists()
