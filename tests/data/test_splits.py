"""Unadjusted splits are found at import (price and volume jump), refused, or adjusted from a table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clirun import run_cli
from finpod.data.importers import RAW_PRICES_NOTE, import_paths
from finpod.data.splits import detect_splits, explain_bar, parse_ratio
from finpod.data.store import read_dataset
from finpod.data.synth import synth_market
from finpod.errors import DataError
from finpod.pipeline.inputs import RAW_PRICES_WARNING, adjustment_warning

SPLIT_DAY = "2021-02-08"
"""Ex-date of the planted split: the first session at the new price."""
PRICES = ["open", "high", "low", "close"]


@pytest.fixture(scope="module")
def adjusted_minutes() -> pd.DataFrame:
    """Ten sessions of minute bars for three symbols: the truth, in today's shares."""
    return synth_market(3, 10, "1min", seed=11, start="2021-02-01")


def _unadjust(bars: pd.DataFrame, symbol: str, ratio: float, ex_date: str = SPLIT_DAY) -> pd.DataFrame:
    """What a raw vendor file shows: before the ex-date, prices x ratio and volume / ratio."""
    raw = bars.copy()
    session = raw["timestamp"].dt.tz_convert("America/New_York").dt.tz_localize(None).dt.normalize()
    earlier = (raw["symbol"] == symbol) & (session < pd.Timestamp(ex_date))
    raw.loc[earlier, PRICES] = raw.loc[earlier, PRICES] * ratio
    raw.loc[earlier, "volume"] = raw.loc[earlier, "volume"] / ratio
    return raw


def _first_bar_of(bars: pd.DataFrame, symbol: str, day: str) -> pd.Timestamp:
    rows = bars.loc[bars["symbol"] == symbol, "timestamp"]
    ny = rows.dt.tz_convert("America/New_York")
    return rows[ny.dt.date.astype(str) == day].min()


def test_an_unadjusted_4_to_1_split_is_refused_naming_symbol_time_and_ratio(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    raw = _unadjust(adjusted_minutes, "SYN001", 4.0)
    raw.to_parquet(tmp_path / "bars.parquet")
    result = run_cli("data", "import", str(tmp_path / "bars.parquet"), "--out", str(tmp_path / "ds"))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    split_bar = _first_bar_of(adjusted_minutes, "SYN001", SPLIT_DAY)
    assert f"SYN001 {split_bar}" in line
    assert "unadjusted 4:1 split" in line
    assert "--adjust splits=FILE" in line
    assert "--adjustment none" in line
    assert "SYN000" not in line
    assert "SYN002" not in line
    assert not (tmp_path / "ds").exists()


def test_a_corporate_actions_table_adjusts_it_and_the_split_day_return_is_normal(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    raw = _unadjust(adjusted_minutes, "SYN001", 4.0)
    raw.to_parquet(tmp_path / "bars.parquet")
    table = tmp_path / "splits.csv"
    table.write_text(f"symbol,date,ratio\nSYN001,{SPLIT_DAY},4:1\nZZZ,2020-01-02,2\n")
    result = run_cli(
        "data", "import", str(tmp_path / "bars.parquet"), "--out", str(tmp_path / "ds"),
        "--adjust", f"splits={table}",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    bars, manifest = read_dataset(tmp_path / "ds")
    assert manifest.repairs["splits_applied_from_table"] == 1
    pd.testing.assert_frame_equal(bars, adjusted_minutes, check_dtype=False, rtol=1e-9)
    closes = bars.loc[bars["symbol"] == "SYN001"].set_index("timestamp")["close"]
    split_bar = _first_bar_of(adjusted_minutes, "SYN001", SPLIT_DAY)
    position = closes.index.get_loc(split_bar)
    split_day_return = closes.iloc[position] / closes.iloc[position - 1] - 1.0
    assert abs(split_day_return) < 0.05


def test_a_table_that_misses_the_split_is_refused(adjusted_minutes: pd.DataFrame, tmp_path: Path) -> None:
    raw = _unadjust(adjusted_minutes, "SYN002", 1 / 10, ex_date="2021-02-10")
    raw.to_parquet(tmp_path / "bars.parquet")
    table = tmp_path / "splits.csv"
    table.write_text("symbol,date,ratio\nSYN001,2021-02-08,4:1\n")
    with pytest.raises(DataError, match=r"SYN002 .*unadjusted 1:10 reverse split \(not in "):
        import_paths([tmp_path / "bars.parquet"], tmp_path / "ds", splits_table=table)


def test_a_one_to_one_row_marks_a_checked_jump_as_a_real_move(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    raw = _unadjust(adjusted_minutes, "SYN001", 4.0)
    raw.to_parquet(tmp_path / "bars.parquet")
    table = tmp_path / "splits.csv"
    table.write_text(f"symbol,date,ratio\nSYN001,{SPLIT_DAY},1:1\n")
    import_paths([tmp_path / "bars.parquet"], tmp_path / "ds", splits_table=table)
    bars, _ = read_dataset(tmp_path / "ds")
    pd.testing.assert_frame_equal(bars, raw, check_dtype=False)


def test_adjustment_none_imports_raw_prices_and_says_so(
    adjusted_minutes: pd.DataFrame, tmp_path: Path
) -> None:
    raw = _unadjust(adjusted_minutes, "SYN001", 4.0)
    raw.to_parquet(tmp_path / "bars.parquet")
    manifest = import_paths([tmp_path / "bars.parquet"], tmp_path / "ds", raw_prices=True)
    assert manifest.adjustment == "none"
    assert RAW_PRICES_NOTE in manifest.notes
    assert adjustment_warning(tmp_path / "ds") == RAW_PRICES_WARNING


@pytest.mark.parametrize("ratio", [2.0, 1.5, 5.0, 1 / 2, 1 / 20])
def test_each_common_ratio_is_detected(adjusted_minutes: pd.DataFrame, ratio: float) -> None:
    raw = _unadjust(adjusted_minutes, "SYN000", ratio)
    (jump,) = detect_splits(raw, "1min")
    assert jump.symbol == "SYN000"
    assert float(jump.ratio) == pytest.approx(ratio)


def test_clean_bars_and_a_quiet_crash_off_the_ratios_are_not_splits(adjusted_minutes: pd.DataFrame) -> None:
    assert detect_splits(adjusted_minutes, "1min") == []
    crash = adjusted_minutes.copy()
    session = crash["timestamp"].dt.tz_convert("America/New_York").dt.date.astype(str)
    later = (crash["symbol"] == "SYN000") & (session >= SPLIT_DAY)
    crash.loc[later, PRICES] = crash.loc[later, PRICES] / 1.7  # -41 % overnight, volume unchanged
    assert detect_splits(crash, "1min") == []


def test_a_split_whose_volume_the_vendor_already_adjusted_is_found() -> None:
    """Price /2 for good while the share volume stays where it was: the vendor split-adjusted the volume
    but not the prices (AlphaVantage, so 53 of pooksoft's 136 listed splits; AAPL 2005-02-28)."""
    bars = synth_market(1, 30, "1d", seed=4, start="2021-02-01")
    split = bars.copy()
    split.loc[15:, PRICES] = split.loc[15:, PRICES] / 2.0
    (jump,) = detect_splits(split, "1d")
    assert (jump.timestamp, jump.ratio) == (bars["timestamp"].iloc[15], 2)
    news = split.copy()
    news.loc[15, "volume"] = news.loc[15, "volume"] * 4.0  # a crash on news trades heavily
    assert detect_splits(news, "1d") == []


def test_explain_bar_names_the_rule_a_jump_fails() -> None:
    bars = synth_market(1, 30, "1d", seed=4, start="2021-02-01")
    split = bars.copy()
    split.loc[15:, PRICES] = split.loc[15:, PRICES] / 2.0
    assert explain_bar(split, "1d", 15) == "flagged"
    news = split.copy()
    news.loc[15, "volume"] = news.loc[15, "volume"] * 4.0
    assert explain_bar(news, "1d", 15).startswith("spike: the first block traded x")
    crash = bars.copy()
    crash.loc[15:, PRICES] = crash.loc[15:, PRICES] / 1.7
    assert explain_bar(crash, "1d", 15).startswith("price: previous close / open = 1.7")


def test_a_gap_the_day_takes_back_is_not_a_split() -> None:
    """The day opens at 2/3 of the close before but closes back near it (CTSH 2000-04-17)."""
    bars = synth_market(1, 30, "1d", seed=4, start="2021-02-01")
    gap = bars.copy()
    gap.loc[15, ["open", "low"]] = gap.loc[14, "close"] / 1.5
    gap.loc[15, "close"] = gap.loc[14, "close"] * 0.97
    gap.loc[16, "open"] = gap.loc[15, "close"]
    assert detect_splits(gap, "1d") == []


def test_a_crash_on_news_volume_is_not_a_split() -> None:
    """Daily price /1.5 for good and share volume x1.5 for good, like a 3:2 split, but the first day at
    the new price trades seven times the usual shares (BKNG 2000-11-03 in pooksoft's adjusted bars)."""
    bars = synth_market(1, 30, "1d", seed=4, start="2021-02-01")
    split = bars.copy()
    split.loc[15:, PRICES] = split.loc[15:, PRICES] / 1.5
    split.loc[15:, "volume"] = split.loc[15:, "volume"] * 1.5
    (jump,) = detect_splits(split, "1d")
    assert jump.timestamp == bars["timestamp"].iloc[15]
    news = split.copy()
    news.loc[15, "volume"] = news.loc[15, "volume"] * 7.0
    assert detect_splits(news, "1d") == []


def test_a_bad_bar_undone_the_next_day_is_not_a_split() -> None:
    """One daily bar at 2/3 of the price while volume happens to rise x1.5 for good (CMCSA 2004-08-02)."""
    bars = synth_market(1, 30, "1d", seed=4, start="2021-02-01")
    glitch = bars.copy()
    glitch.loc[15, PRICES] = glitch.loc[15, PRICES] * 2 / 3
    glitch.loc[15:, "volume"] = glitch.loc[15:, "volume"] * 1.5
    assert detect_splits(glitch, "1d") == []
    for_good = glitch.copy()
    for_good.loc[16:, PRICES] = for_good.loc[16:, PRICES] * 2 / 3
    (jump,) = detect_splits(for_good, "1d")
    assert jump.timestamp == bars["timestamp"].iloc[15]


def _vendor_daily(tmp_path: Path, close: np.ndarray, splits: np.ndarray, volume: np.ndarray) -> Path:
    days = pd.bdate_range("2020-08-17", periods=close.size)
    frame = pd.DataFrame(
        {
            "Date": days.strftime("%Y-%m-%d"),
            "Open": close,
            "High": close * 1.01,
            "Low": close * 0.99,
            "Close": close,
            "Volume": volume,
            "Stock Splits": splits,
        }
    )
    path = tmp_path / "AAPL.csv"
    frame.to_csv(path, index=False)
    return path


def test_a_vendor_split_column_with_raw_prices_is_applied(tmp_path: Path) -> None:
    close = np.array([500.0, 502.0, 498.0, 501.0, 499.0, 500.0, 503.0, 125.5, 126.0, 125.0, 126.0, 127.0])
    splits = np.zeros(close.size)
    splits[7] = 4.0
    volume = np.where(np.arange(close.size) < 7, 1e6, 4e6)
    path = _vendor_daily(tmp_path, close, splits, volume)
    manifest = import_paths([path], tmp_path / "ds")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.repairs["vendor_splits_applied"] == 1
    assert bars["close"].iloc[6] == pytest.approx(503.0 / 4)
    assert bars["volume"].iloc[0] == pytest.approx(4e6)
    assert np.abs(np.diff(np.log(bars["close"].to_numpy()))).max() < 0.05


def test_a_vendor_split_column_with_adjusted_prices_is_counted_not_applied_twice(tmp_path: Path) -> None:
    close = np.linspace(120.0, 130.0, 12)
    splits = np.zeros(close.size)
    splits[7] = 4.0
    path = _vendor_daily(tmp_path, close, splits, np.full(close.size, 4e6))
    manifest = import_paths([path], tmp_path / "ds")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.repairs["vendor_splits_already_in_prices"] == 1
    np.testing.assert_allclose(bars["close"].to_numpy(), close)


def test_a_vendor_split_column_that_matches_neither_is_refused(tmp_path: Path) -> None:
    close = np.array([100.0] * 7 + [60.0] * 5)
    splits = np.zeros(close.size)
    splits[7] = 4.0
    path = _vendor_daily(tmp_path, close, splits, np.full(close.size, 1e6))
    with pytest.raises(DataError, match="lists a 4:1 split but the price moved"):
        import_paths([path], tmp_path / "ds")


@pytest.mark.parametrize(("text", "expected"), [("4:1", 4.0), ("1:10", 0.1), ("3/2", 1.5), ("4.0", 4.0)])
def test_ratios_parse(text: str, expected: float) -> None:
    assert float(parse_ratio(text, "t")) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["x", "0", "-2", "4:0"])
def test_bad_ratios_are_one_line(text: str) -> None:
    with pytest.raises(DataError, match="split ratio"):
        parse_ratio(text, "t")
