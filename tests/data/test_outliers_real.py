"""The outlier check flags nothing on the real files in ../shared/data (every file, every frequency)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from finpod.data.importers import alphavantage, pooksoft
from finpod.data.importers.common import read_table
from finpod.data.outliers import find_outliers

pytestmark = pytest.mark.shared_data

EQKER_FILES = 72
POOKSOFT_FILES = 104
SKFOLIO_STOCKS = 20


def _flags(bars: pd.DataFrame) -> list[str]:
    found = find_outliers(bars)
    return [found.first] if found.count else []


def test_no_flag_on_eqker_minute_15_minute_and_daily_files(shared_data: Path) -> None:
    files = sorted((shared_data / "minute" / "eqker" / "data").glob("*.csv"))
    assert len(files) == EQKER_FILES
    flags: list[str] = []
    for path in files:
        frequency = str(alphavantage.frequency_from_name(path))
        loaded = alphavantage.read_alphavantage(
            read_table(path), path, frequency, alphavantage.symbol_from_name(path)
        )
        flags += _flags(loaded.bars)
    assert flags == []


def test_no_flag_on_pooksoft_daily_adjusted_files(shared_data: Path) -> None:
    files = sorted((shared_data / "daily" / "pooksoft" / "daily_adjusted").glob("DA-*.csv"))
    assert len(files) == POOKSOFT_FILES
    flags: list[str] = []
    for path in files:
        loaded = pooksoft.read_pooksoft(read_table(path), path, pooksoft.symbol_from_name(path))
        flags += _flags(loaded.bars)
    assert flags == []


def test_no_flag_on_skfolio_adjusted_closes(shared_data: Path) -> None:
    wide = pd.read_csv(shared_data / "daily" / "skfolio" / "sp500_dataset.csv.gz", index_col=0)
    assert wide.shape[1] == SKFOLIO_STOCKS
    long = wide.stack().rename("close").reset_index()
    long.columns = ["timestamp", "symbol", "close"]
    bars = long.assign(open=long["close"], high=long["close"], low=long["close"], volume=0.0)
    bars = bars.sort_values(["symbol", "timestamp"], kind="stable", ignore_index=True)
    assert _flags(bars) == []


def test_a_fat_finger_in_a_real_file_is_flagged_alone(shared_data: Path) -> None:
    """One close of AAPL's real minute bars set to 1000x: that bar, and only it, is flagged."""
    path = shared_data / "minute" / "eqker" / "data" / "AAPL_1min.csv"
    bars = alphavantage.read_alphavantage(read_table(path), path, "1min", "AAPL").bars
    row = len(bars) // 2
    bars.loc[row, ["close", "high"]] = bars.loc[row, "close"] * 1000.0
    found = find_outliers(bars)
    assert found.count == 1
    assert bool(found.mask[row])
    assert found.first.startswith(f"AAPL {bars['timestamp'].iloc[row]}: close ")
