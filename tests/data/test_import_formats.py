"""Each accepted format imports with no flags: AlphaVantage-style, daily-adjusted, bar schema, vendor CSV."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from finpod.data.importers import import_paths
from finpod.data.store import read_dataset
from finpod.data.synth import synth_market
from finpod.errors import DataError
from finpod.pipeline.inputs import adjustment_warning

AV_HEADER = "datetime,open,high,low,close,volume\n"
BARS_ONE_ROW = "timestamp,symbol,open,high,low,close,volume\n2019-02-11T14:30:00+00:00,AAA,1,1,1,1,1\n"
DA_HEADER = "timestamp,open,high,low,close,adjusted_close,volume,dividend_amount,split_coefficient\n"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_alphavantage_minute_newest_first_bar_end_to_utc_start(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _write(
        src / "MSFT_1min.csv",
        AV_HEADER
        + "2019-07-01 09:33:00,10.2,10.3,10.1,10.25,300\n"
        + "2019-07-01 09:32:00,10.1,10.2,10.0,10.2,200\n"
        + "2019-07-01 09:31:00,10.0,10.1,9.9,10.1,100\n",
    )
    manifest = import_paths([src], tmp_path / "ds")
    bars, _ = read_dataset(tmp_path / "ds")
    # July: New York is UTC-4, so the 09:31 bar END is the 13:30 UTC bar START.
    assert bars["timestamp"].dt.strftime("%H:%M").tolist() == ["13:30", "13:31", "13:32"]
    assert bars["close"].tolist() == [10.1, 10.2, 10.25]
    assert manifest.symbols == ("MSFT",)
    assert manifest.frequency == "1min"
    assert manifest.adjustment == "split", "raw prices, checked for splits"
    assert adjustment_warning(tmp_path / "ds") is None, "a checked import warns of nothing"
    assert manifest.source == "alphavantage"
    assert manifest.repairs["reordered_rows"] == 3


def test_symbol_flag_overrides_the_file_name(tmp_path: Path) -> None:
    path = _write(tmp_path / "X_1min.csv", AV_HEADER + "2019-02-11 09:31:00,1,1,1,1,1\n")
    manifest = import_paths([path], tmp_path / "ds", symbol="ZZZ")
    assert manifest.symbols == ("ZZZ",)


def test_daily_adjusted_split_and_dividend(tmp_path: Path) -> None:
    """A 4:1 split and a dividend: prices scaled by adjusted/close, earlier volume times the split."""
    path = _write(
        tmp_path / "DA-ABC-T-2021-04-21.csv",
        DA_HEADER
        + "2020-08-27,400.0,404.0,396.0,400.0,99.0,1000,0.0,1.0\n"
        + "2020-08-28,404.0,408.0,400.0,404.0,100.0,1000,0.0,1.0\n"
        + "2020-08-31,101.0,102.0,100.0,101.0,101.0,4000,0.0,4.0\n"
        + "2020-09-01,102.0,103.0,101.0,102.0,102.0,4000,0.0,1.0\n",
    )
    manifest = import_paths([path], tmp_path / "ds")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.adjustment == "split+dividend"
    assert manifest.frequency == "1d"
    np.testing.assert_allclose(bars["close"], [99.0, 100.0, 101.0, 102.0])
    np.testing.assert_allclose(bars["open"], [400.0 * 99.0 / 400.0, 404.0 * 100.0 / 404.0, 101.0, 102.0])
    np.testing.assert_allclose(bars["volume"], [4000.0, 4000.0, 4000.0, 4000.0])
    assert (bars["high"] >= bars[["open", "close"]].max(axis=1)).all()
    assert bars["timestamp"].iloc[0] == pd.Timestamp("2020-08-27 13:30", tz="UTC")
    assert abs(bars["close"].pct_change().iloc[1:]).max() < 0.05


def test_bar_schema_parquet_and_csv(tmp_path: Path) -> None:
    bars = synth_market(2, 2, "1min", seed=4)
    bars.to_parquet(tmp_path / "bars.parquet")
    manifest = import_paths([tmp_path / "bars.parquet"], tmp_path / "from_parquet")
    loaded, _ = read_dataset(tmp_path / "from_parquet")
    pd.testing.assert_frame_equal(loaded, bars, check_dtype=False)
    assert manifest.frequency == "1min"
    assert manifest.source == "bars"
    bars.to_csv(tmp_path / "bars.csv", index=False, date_format="%Y-%m-%dT%H:%M:%S%z")
    import_paths([tmp_path / "bars.csv"], tmp_path / "from_csv")
    loaded_csv, _ = read_dataset(tmp_path / "from_csv")
    pd.testing.assert_frame_equal(loaded_csv, bars, check_dtype=False)


def test_vendor_csv_with_adjusted_close_and_dates(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "QQQ.csv",
        "Date,Open,High,Low,Close,Adj Close,Volume\n"
        "2021-01-05,10,11,9,10,5,100\n"
        "2021-01-04,10,11,9,10,5,100\n",
    )
    manifest = import_paths([path], tmp_path / "ds")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.symbols == ("QQQ",)
    assert manifest.frequency == "1d"
    assert manifest.adjustment == "split+dividend"
    assert manifest.repairs["reordered_rows"] == 2
    assert bars["close"].tolist() == [5.0, 5.0]
    assert bars["high"].tolist() == [5.5, 5.5]
    assert bars["timestamp"].tolist() == [
        pd.Timestamp("2021-01-04 14:30", tz="UTC"),
        pd.Timestamp("2021-01-05 14:30", tz="UTC"),
    ]


def test_column_map_renames_unknown_columns(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "feed.csv",
        "when,sym,o,h,l,c,v\n2021-01-04T14:30:00Z,AAA,1,2,0.5,1.5,10\n2021-01-04T14:31:00Z,AAA,1,2,0.5,1.5,10\n",
    )
    with pytest.raises(DataError, match=r"unknown format .* --column-map"):
        import_paths([path], tmp_path / "ds")
    mapping = {
        "when": "timestamp",
        "sym": "symbol",
        "o": "open",
        "h": "high",
        "l": "low",
        "c": "close",
        "v": "volume",
    }
    manifest = import_paths([path], tmp_path / "ds", column_map=mapping)
    assert manifest.symbols == ("AAA",)
    assert manifest.rows == 2
    assert manifest.frequency == "1min"


def test_finest_frequency_chosen_rest_skipped_and_recorded(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    _write(src / "AAA_1min.csv", AV_HEADER + "2019-02-11 09:32:00,1,1,1,1,1\n2019-02-11 09:31:00,1,1,1,1,1\n")
    _write(src / "AAA_15min.csv", AV_HEADER + "2019-02-11 09:45:00,1,1,1,1,1\n")
    _write(src / "AAA_daily.csv", AV_HEADER + "2019-02-12,1,1,1,1,1\n2019-02-11,1,1,1,1,1\n")
    manifest = import_paths([src], tmp_path / "minute")
    assert manifest.frequency == "1min"
    assert manifest.rows == 2
    assert manifest.notes == (
        "imported 1 files of 1min; skipped 1 files of 15min, 1 of 1d; pass --freq 1d to import those",
    )
    daily = import_paths([src], tmp_path / "daily", freq="1d")
    assert daily.frequency == "1d"
    assert daily.rows == 2
    with pytest.raises(
        DataError, match=r"no input file has a supported frequency \(found 1 files of 15min\)"
    ):
        import_paths([src / "AAA_15min.csv"], tmp_path / "fifteen")


def test_extended_hours_minutes_are_dropped_and_counted(tmp_path: Path) -> None:
    bars = synth_market(1, 1, "1min", seed=0)
    early = bars.iloc[:2].assign(timestamp=bars["timestamp"].iloc[:2] - pd.Timedelta(hours=2))
    pd.concat([early, bars], ignore_index=True).to_parquet(tmp_path / "bars.parquet")
    manifest = import_paths([tmp_path / "bars.parquet"], tmp_path / "ds")
    assert manifest.rows == 390
    assert manifest.repairs["outside_regular_hours_bars_dropped"] == 2


def test_zero_volume_bars_kept_and_counted(tmp_path: Path) -> None:
    path = _write(tmp_path / "Z_daily.csv", AV_HEADER + "2019-02-12,1,1,1,1,0\n2019-02-11,1,1,1,1,5\n")
    manifest = import_paths([path], tmp_path / "ds")
    assert manifest.rows == 2
    assert manifest.repairs["zero_volume_bars"] == 1


def test_same_bar_in_two_files_is_an_error(tmp_path: Path) -> None:
    a = _write(tmp_path / "AAA_daily.csv", AV_HEADER + "2019-02-11,1,1,1,1,1\n")
    b = _write(
        tmp_path / "AAA-copy.csv", "Date,Open,High,Low,Close,Volume,Symbol\n2019-02-11,1,1,1,1,1,AAA\n"
    )
    with pytest.raises(DataError, match=r"AAA 2019-02-11 14:30:00\+00:00: bar also in"):
        import_paths([a, b], tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


def test_mixed_adjustments_are_refused(tmp_path: Path) -> None:
    a = _write(tmp_path / "AAA_daily.csv", AV_HEADER + "2019-02-11,1,1,1,1,1\n")
    b = _write(tmp_path / "DA-BBB-T-2021-04-21.csv", DA_HEADER + "2019-02-11,1,1,1,1,1,1,0,1\n")
    with pytest.raises(DataError, match=r"mix price adjustments \(split, split\+dividend\)"):
        import_paths([a, b], tmp_path / "ds")


def test_one_bar_file_needs_and_accepts_freq(tmp_path: Path) -> None:
    path = _write(tmp_path / "one.csv", BARS_ONE_ROW)
    with pytest.raises(DataError, match=r"cannot tell the bar frequency .* pass --freq 1min or --freq 1d"):
        import_paths([path], tmp_path / "ds")
    manifest = import_paths([path], tmp_path / "ds", freq="1min")
    assert manifest.rows == 1
    assert manifest.frequency == "1min"


@pytest.mark.parametrize(
    ("header", "column_map"),
    [("timestamp,symbol", None), ("Date,Ticker", None), ("Date,Code", {"Code": "symbol"})],
)
def test_numeric_tickers_keep_their_digits(
    tmp_path: Path, header: str, column_map: dict[str, str] | None
) -> None:
    # Tokyo and Hong Kong tickers are digits; read as numbers they broke the write (an internal
    # error) and lost leading zeros (0700 -> 700).
    day = "2019-02-11T14:30:00+00:00" if header.startswith("timestamp") else "2019-02-11"
    next_day = "2019-02-12T14:30:00+00:00" if header.startswith("timestamp") else "2019-02-12"
    text = f"{header},open,high,low,close,volume\n{day},0700,1,1,1,1,1\n{next_day},0700,1,1,1,1,1\n"
    manifest = import_paths([_write(tmp_path / "hk.csv", text)], tmp_path / "ds", column_map=column_map)
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.symbols == ("0700",)
    assert bars["symbol"].tolist() == ["0700", "0700"]


def test_parquet_integer_tickers_import_as_text(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "timestamp": pd.to_datetime(["2019-02-11T14:30:00Z", "2019-02-12T14:30:00Z"]),
            "symbol": [7203, 7203],
            **{name: [1.0, 1.0] for name in ("open", "high", "low", "close", "volume")},
        }
    )
    frame.to_parquet(tmp_path / "jp.parquet")
    manifest = import_paths([tmp_path / "jp.parquet"], tmp_path / "ds")
    assert manifest.symbols == ("7203",)


def test_parquet_float_tickers_are_refused(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "timestamp": pd.to_datetime(["2019-02-11T14:30:00Z"]),
            "symbol": [7203.5],
            **{name: [1.0] for name in ("open", "high", "low", "close", "volume")},
        }
    )
    frame.to_parquet(tmp_path / "jp.parquet")
    with pytest.raises(DataError, match=r"jp\.parquet: column symbol holds tickers but has dtype float64"):
        import_paths([tmp_path / "jp.parquet"], tmp_path / "ds")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("x.csv", "timestamp,symbol,open,high,low,close\n2021-02-01T14:30:00Z,AAA,1,1,1,1\n"),
        ("AAA_daily.csv", "date,open,high,low,close\n2021-02-01,1,1,1,1\n"),
    ],
)
def test_a_bar_table_short_of_its_volume_names_the_column(tmp_path: Path, name: str, text: str) -> None:
    path = _write(tmp_path / name, text)
    with pytest.raises(DataError, match=r"no volume column .* fix: add it, or name yours with --column-map"):
        import_paths([path], tmp_path / "ds")
