"""The real vendor files in ../shared/data import with no extra flags (the issue's Must-show checks)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from clirun import run_cli
from finpod.data.store import read_dataset

pytestmark = pytest.mark.shared_data

MAX_DAILY_MOVE_2020 = 0.25


@pytest.fixture(scope="module")
def minute_dataset(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real") / "D1"
    result = run_cli("data", "import", str(shared_data / "minute" / "eqker" / "data"), "--out", str(out))
    assert result.exit_code == 0, result.stderr
    assert "skipped 24 files of 15min, 24 of 1d; pass --freq 1d" in result.stdout
    return out


@pytest.fixture(scope="module")
def daily_dataset(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real") / "D2"
    result = run_cli(
        "data", "import", str(shared_data / "daily" / "pooksoft" / "daily_adjusted"), "--out", str(out)
    )
    assert result.exit_code == 0, result.stderr
    return out


def test_minute_files_info_json(minute_dataset: Path) -> None:
    result = run_cli("data", "info", str(minute_dataset), "--json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    assert len(info["symbols"]) == 24
    assert {"AAPL", "AMZN", "MSFT", "MU", "SBUX", "TSLA", "QQQ", "SPY"} <= set(info["symbols"])
    assert info["frequency"] == "1min"
    assert info["first_bar"] == "2019-02-11T14:30:00+00:00"
    assert info["last_bar"] == "2019-02-15T20:59:00+00:00"
    assert info["regular_hours_only"] is True
    assert info["off_calendar_bars"] == 0
    assert info["calendar_bars"] == 5 * 390
    assert info["bars"] + info["filled_bars"] <= 24 * 5 * 390
    assert info["repairs"]["reordered_rows"] == info["bars"]


def test_minute_bars_match_the_vendor_rows(minute_dataset: Path, shared_data: Path) -> None:
    """The newest AAPL row (bar END 16:00 New York) is the 20:59 UTC bar START, same prices."""
    bars, _ = read_dataset(minute_dataset)
    aapl = bars[bars["symbol"] == "AAPL"].set_index("timestamp")
    raw = pd.read_csv(shared_data / "minute" / "eqker" / "data" / "AAPL_1min.csv", nrows=1)
    last = aapl.loc[pd.Timestamp("2019-02-15 20:59", tz="UTC")]
    assert raw["datetime"].iloc[0] == "2019-02-15 16:00:00"
    assert (last[["open", "high", "low", "close", "volume"]].to_numpy() == raw.iloc[0, 1:].to_numpy()).all()
    assert aapl.index.is_monotonic_increasing


def test_daily_adjusted_files(daily_dataset: Path) -> None:
    bars, manifest = read_dataset(daily_dataset)
    assert len(manifest.symbols) == 104
    assert manifest.adjustment == "split+dividend"
    assert manifest.repairs["zero_volume_bars"] == 61
    assert manifest.first_bar == "1999-11-01T14:30:00+00:00"
    closes = bars.pivot(index="timestamp", columns="symbol", values="close")
    in_2020 = closes.loc["2020"]
    aapl_moves = in_2020["AAPL"].pct_change().abs()
    assert aapl_moves.max() < MAX_DAILY_MOVE_2020
    assert pd.Timestamp("2020-08-31 13:30", tz="UTC") in in_2020.index
    # Volume is adjusted like the prices: the day before AAPL's 4:1 split counts 4x its raw shares.
    aapl = bars[bars["symbol"] == "AAPL"].set_index("timestamp")["volume"]
    assert aapl[pd.Timestamp("2020-08-28 13:30", tz="UTC")] == 46_907_479 * 4
    assert aapl[pd.Timestamp("2020-08-31 13:30", tz="UTC")] == 223_505_733


def test_dividend_name_matches_vendor_adjusted_close(daily_dataset: Path, shared_data: Path) -> None:
    """A dividend payer (MSFT): adjusted close equals the vendor's, and the ex-date is no jump."""
    bars, _ = read_dataset(daily_dataset)
    msft = bars[bars["symbol"] == "MSFT"].set_index("timestamp")
    raw = pd.read_csv(next((shared_data / "daily" / "pooksoft" / "daily_adjusted").glob("DA-MSFT-*.csv")))
    assert (raw["dividend_amount"] > 0).sum() > 10
    assert msft["close"].to_numpy() == pytest.approx(raw["adjusted_close"].to_numpy(), rel=1e-9)
    ex_dates = pd.to_datetime(raw.loc[raw["dividend_amount"] > 0, "timestamp"])
    moves = msft["close"].pct_change()
    moves.index = moves.index.tz_convert("America/New_York").tz_localize(None).normalize()
    assert moves.reindex(ex_dates).abs().max() < 0.1
