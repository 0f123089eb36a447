"""build_panel / load_panel: the Panel contract, no look-ahead end to end, universes, segments, errors."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data.calendar import bar_starts
from finpod.data.importers import import_paths
from finpod.data.panel_builder import build_panel, load_panel
from finpod.data.store import read_dataset, write_dataset
from finpod.data.synth import synth_market
from finpod.data.universe import nasdaq100_members
from finpod.errors import DataError

SEGMENTS = {
    "train": ("2016-01-04", "2016-01-12"),
    "validation": ("2016-01-13", "2016-01-14"),
    "backtest": ("2016-01-15", "2016-01-20"),
}
START, END = "2016-01-04", "2016-01-20"


@pytest.fixture(scope="module")
def market() -> pd.DataFrame:
    """Four synthetic stocks and a QQQ look-alike, 12 sessions of minute bars from 2016-01-04."""
    bars = synth_market(5, 12, "1min", 7, start="2016-01-04")
    names = sorted(bars["symbol"].unique())
    bars["symbol"] = bars["symbol"].replace({names[-1]: "QQQ"})
    return bars.reset_index(drop=True)


def _build(bars: pd.DataFrame, **options: object) -> object:
    arguments: dict[str, object] = {
        "freq": "1min",
        "start": START,
        "end": END,
        "segments": SEGMENTS,
        "device": "cpu",
    }
    arguments.update(options)
    return build_panel(bars, **arguments)  # type: ignore[arg-type]


def _changed_after(bars: pd.DataFrame, when: pd.Timestamp, seed: int) -> pd.DataFrame:
    """A copy with every bar starting after ``when`` given new random prices and volume."""
    out = bars.copy()
    later = out["timestamp"] > when
    factor = np.exp(np.random.default_rng(seed).normal(0.0, 0.05, int(later.sum())))
    for column in ("open", "high", "low", "close"):
        out.loc[later, column] = out.loc[later, column] * factor
    out.loc[later, "volume"] = out.loc[later, "volume"] * 3.0 + 1.0
    return out


def test_panel_contract(market: pd.DataFrame) -> None:
    panel = _build(market)
    expected_stamps = bar_starts("1min", START, END)
    assert np.array_equal(panel.timestamps_ns, expected_stamps.asi8)
    assert panel.timestamps_ns.dtype == np.int64
    assert panel.session_ids.tolist() == np.repeat(np.arange(12), 390).tolist()
    assert len(panel.symbols) == 4
    assert "QQQ" not in panel.symbols
    assert panel.benchmark_symbol == "QQQ"
    qqq = market[market["symbol"] == "QQQ"]["close"].to_numpy(dtype=np.float32)
    assert np.array_equal(panel.benchmark_close.numpy(), qqq)
    for tensor in (panel.open, panel.high, panel.low, panel.close, panel.volume):
        assert tensor.dtype == torch.float32
        assert tensor.shape == (12 * 390, 4)
    assert panel.features.shape == (12 * 390, 4, len(panel.feature_names))
    assert panel.tradable.dtype == torch.bool
    assert panel.tradable.all()  # synthetic bars are complete and the universe is 'all'
    assert panel.segments == {
        "train": (0, 7 * 390),
        "validation": (7 * 390, 9 * 390),
        "backtest": (9 * 390, 12 * 390),
    }
    assert panel.frequency == "1min"
    assert panel.feature_stats is not None
    assert torch.isfinite(panel.features).all()


def test_without_a_benchmark_qqq_is_a_tradable_column(market: pd.DataFrame) -> None:
    panel = _build(market, benchmark_symbol=None)
    assert "QQQ" in panel.symbols
    assert panel.benchmark_close is None
    assert panel.benchmark_symbol is None


def test_extended_hours_are_kept_when_asked(market: pd.DataFrame, caplog: pytest.LogCaptureFixture) -> None:
    premarket = market[market["symbol"] == "SYN000"].head(3).copy()
    premarket["timestamp"] = premarket["timestamp"] - pd.Timedelta(hours=2)
    bars = pd.concat([market, premarket], ignore_index=True)
    with caplog.at_level(logging.WARNING, logger="finpod.data.panel_builder"):
        regular = _build(bars)
    assert "dropped 3 bars off the XNAS 1min grid" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="finpod.data.panel_builder"):
        extended = _build(bars, regular_hours_only=False)
    assert "dropped" not in caplog.text
    assert regular.num_bars == 12 * 390
    assert extended.num_bars == 12 * 960
    assert int(extended.tradable.sum()) == int(regular.tradable.sum()) + 3
    assert torch.isfinite(extended.features).all()


def test_missing_bars_are_filled_and_not_tradable(market: pd.DataFrame) -> None:
    gappy = market.drop(index=[10, 11, 500]).reset_index(drop=True)
    panel = _build(gappy)
    column = panel.symbols.index(market["symbol"].iloc[10])
    assert not panel.tradable[10, column]
    assert not panel.tradable[11, column]
    assert panel.volume[10, column] == 0
    assert panel.close[11, column] == panel.close[9, column]
    assert int((~panel.tradable).sum()) == 3
    real = panel.real_bars()
    assert panel.real is not None
    assert torch.equal(real, panel.tradable)
    assert not real[10, column]
    assert not real[11, column]
    assert panel.to("cpu").real is not None


def test_a_panel_without_its_real_mask_falls_back_to_tradable_or_traded(market: pd.DataFrame) -> None:
    panel = dataclasses.replace(_build(market), real=None)
    assert torch.equal(panel.real_bars(), panel.tradable | (panel.volume > 0))


@pytest.mark.parametrize("hours_after_open", [0.5, 30.0, 100.0, 170.0, 230.0])
def test_no_look_ahead_end_to_end(market: pd.DataFrame, hours_after_open: float) -> None:
    reference = _build(market)
    when = pd.Timestamp("2016-01-04 14:30", tz="UTC") + pd.Timedelta(hours=hours_after_open)
    t = int(np.searchsorted(reference.timestamps_ns, when.value, side="right")) - 1
    changed = _build(
        _changed_after(market, when, seed=int(hours_after_open)), feature_stats=reference.feature_stats
    )
    for name in ("open", "high", "low", "close", "volume", "features", "tradable"):
        assert torch.equal(getattr(reference, name)[: t + 1], getattr(changed, name)[: t + 1]), name
    assert not torch.equal(reference.close[t + 1 :], changed.close[t + 1 :])


def test_backtest_bars_do_not_move_the_normalisation(market: pd.DataFrame) -> None:
    reference = _build(market)
    backtest_start = pd.Timestamp("2016-01-15 14:30", tz="UTC") - pd.Timedelta(minutes=1)
    changed = _build(_changed_after(market, backtest_start, seed=3))
    assert torch.equal(reference.feature_stats.mean, changed.feature_stats.mean)
    assert torch.equal(reference.feature_stats.std, changed.feature_stats.std)
    train_stop = reference.segments["train"][1]
    assert torch.equal(reference.features[:train_stop], changed.features[:train_stop])
    assert not torch.equal(reference.features[-100:], changed.features[-100:])


def _daily(symbols: list[str], first: str, last: str) -> pd.DataFrame:
    stamps = bar_starts("1d", first, last)
    frames = []
    for i, symbol in enumerate(symbols):
        close = 50.0 + i + np.arange(len(stamps)) * 0.1
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": stamps,
                    "symbol": symbol,
                    "open": close,
                    "high": close + 0.5,
                    "low": close - 0.5,
                    "close": close,
                    "volume": 1e6,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


DAILY_SEGMENTS = {"train": ("2019-01-02", "2020-03-31"), "backtest": ("2020-04-01", "2020-05-29")}


def test_nasdaq100_universe_is_point_in_time(caplog: pytest.LogCaptureFixture) -> None:
    bars = _daily(["AAPL", "FAKE", "WLTW", "ZM"], "2019-01-02", "2020-05-29")
    with caplog.at_level(logging.INFO, logger="finpod.data.panel_builder"):
        panel = build_panel(
            bars,
            freq="1d",
            start="2019-01-02",
            end="2020-05-29",
            segments=DAILY_SEGMENTS,
            device="cpu",
            universe="nasdaq100",
        )
    assert panel.symbols == ("AAPL", "WLTW", "ZM")
    assert "1 dataset symbol(s) never members in 2019-01-02..2020-05-29 are not columns: FAKE" in caplog.text
    dates = pd.DatetimeIndex(panel.timestamps_ns).date
    for m, symbol in enumerate(panel.symbols):
        expected = [symbol in nasdaq100_members(d) for d in dates]
        assert panel.tradable[:, m].tolist() == expected, symbol
    zm = panel.tradable[:, 2].numpy()
    assert not zm[dates < pd.Timestamp("2020-04-30").date()].any()
    assert zm[dates >= pd.Timestamp("2020-04-30").date()].all()
    # a non-member's bars stay real (features warm up and the cross-sectional means count them),
    # what paper replay must feed its online features as well
    assert panel.real_bars()[:, 2].all()


def test_nasdaq100_columns_come_from_the_range_clipped_to_the_data() -> None:
    """A start before the membership history is fine when the data starts inside it."""
    bars = _daily(["AAPL", "ZM"], "2019-01-02", "2020-05-29")
    panel = build_panel(
        bars,
        freq="1d",
        start="2012-01-01",
        end="2020-05-29",
        segments=DAILY_SEGMENTS,
        device="cpu",
        universe="nasdaq100",
    )
    assert panel.symbols == ("AAPL", "ZM")


def test_explicit_symbols_keep_order_and_membership_still_applies() -> None:
    bars = _daily(["AAPL", "FAKE", "ZM"], "2019-01-02", "2020-05-29")
    options = {
        "freq": "1d",
        "start": "2019-01-02",
        "end": "2020-05-29",
        "segments": DAILY_SEGMENTS,
        "device": "cpu",
    }
    panel = build_panel(bars, symbols=["ZM", "FAKE"], universe="nasdaq100", **options)
    assert panel.symbols == ("ZM", "FAKE")
    assert not panel.tradable[:, 1].any()
    everything = build_panel(bars, symbols=["ZM", "FAKE"], universe=None, **options)
    assert everything.tradable.all()


def test_range_is_clipped_to_the_data_and_empty_segments_are_errors() -> None:
    bars = _daily(["AAPL"], "2019-01-02", "2020-04-21")
    panel = build_panel(
        bars,
        freq="1d",
        start="2019-01-02",
        end="2020-05-29",
        segments=DAILY_SEGMENTS,
        device="cpu",
        benchmark_symbol=None,
    )
    assert pd.Timestamp(int(panel.timestamps_ns[-1]), tz="UTC").date() == pd.Timestamp("2020-04-21").date()
    assert panel.segments["backtest"][1] == panel.num_bars
    with pytest.raises(DataError, match=r"segment backtest 2020-04-22\.\.2020-05-29 has no data"):
        build_panel(
            bars,
            freq="1d",
            start="2019-01-02",
            end="2020-05-29",
            segments={"train": ("2019-01-02", "2020-04-21"), "backtest": ("2020-04-22", "2020-05-29")},
            device="cpu",
        )


def test_a_segment_inside_a_data_gap_is_an_error() -> None:
    bars = _daily(["AAPL"], "2019-01-02", "2020-05-29")
    stamps = bars["timestamp"]
    gap = (stamps >= pd.Timestamp("2020-04-01", tz="UTC")) & (stamps < pd.Timestamp("2020-05-01", tz="UTC"))
    segments = {"train": ("2019-01-02", "2020-03-31"), "validation": ("2020-04-01", "2020-04-30")}
    with pytest.raises(DataError, match=r"segment validation 2020-04-01\.\.2020-04-30 has no data"):
        build_panel(
            bars[~gap], freq="1d", start="2019-01-02", end="2020-05-29", segments=segments, device="cpu"
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"segments": {"train": ("2016-01-04", "2016-01-12"), "test": ("2016-01-13", "2016-01-14")}},
            "unknown segment",
        ),
        ({"segments": {"validation": ("2016-01-04", "2016-01-12")}}, "no 'train' window"),
        (
            {"segments": {"train": ("2016-01-04", "2016-01-12"), "validation": ("2016-01-12", "2016-01-14")}},
            "starts before segment train",
        ),
        (
            {"segments": {"train": ("2016-01-13", "2016-01-14"), "validation": ("2016-01-04", "2016-01-12")}},
            "starts before segment train",
        ),
        ({"segments": {"train": ("2016-01-12", "2016-01-04")}}, "ends before it starts"),
        ({"segments": {"train": ("2015-12-01", "2016-01-12")}}, "outside the panel range"),
        ({"symbols": ["NOPE"]}, r"symbol\(s\) NOPE not in the dataset"),
        ({"symbols": ["SYN000", "SYN001", "SYN000"]}, "names SYN000 more than once"),
        ({"universe": "sp500"}, "unknown universe"),
        ({"symbols": ["QQQ", "SYN000"]}, "QQQ is the benchmark, not a tradable symbol"),
        ({"symbols": []}, "no tradable symbol selected"),
        ({"start": "2016-01-20", "end": "2016-01-04"}, "before start"),
        (
            {"start": "2017-01-03", "end": "2017-01-31", "segments": {"train": ("2017-01-03", "2017-01-31")}},
            "nothing in the requested",
        ),
        ({"freq": "1d"}, "two daily bars in the session of 2016-01-04T14:31.* need freq '1min'"),
    ],
)
def test_bad_requests_are_one_line_errors(market: pd.DataFrame, options: dict, message: str) -> None:
    with pytest.raises(DataError, match=message) as caught:
        _build(market, **options)
    assert "\n" not in str(caught.value)


def test_load_panel_reads_a_dataset_folder(market: pd.DataFrame, tmp_path: Path) -> None:
    write_dataset(
        market,
        tmp_path / "ds",
        source="synthetic",
        frequency="1min",
        adjustment="synthetic",
        repairs={},
        notes=[],
    )
    panel = load_panel(tmp_path / "ds", start=START, end=END, segments=SEGMENTS, device="cpu")
    assert torch.equal(panel.close, _build(market).close)
    with pytest.raises(DataError, match="dataset frequency is 1min, not 1d"):
        load_panel(tmp_path / "ds", freq="1d", start=START, end=END, segments=SEGMENTS, device="cpu")


@pytest.mark.shared_data
def test_real_minute_files_become_a_full_week_panel(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "minute" / "eqker" / "data"
    files = sorted(folder.glob("*_1min.csv"))
    import_paths(files, tmp_path / "eqker")
    panel = load_panel(
        tmp_path / "eqker",
        start="2019-02-11",
        end="2019-02-15",
        segments={"train": ("2019-02-11", "2019-02-13"), "backtest": ("2019-02-14", "2019-02-15")},
        device="cpu",
    )
    assert panel.num_bars == 5 * 390
    assert panel.num_assets == len(files) - 1
    assert panel.benchmark_symbol == "QQQ"
    assert pd.Timestamp(int(panel.timestamps_ns[0]), tz="UTC") == pd.Timestamp("2019-02-11 14:30", tz="UTC")
    bars, _ = read_dataset(tmp_path / "eqker")
    assert int(panel.tradable.sum()) == int((bars["symbol"] != "QQQ").sum())  # every real bar, no more
    assert torch.isfinite(panel.features).all()


@pytest.mark.shared_data
def test_real_daily_nasdaq100_panel_over_the_reference_split(shared_data: Path, tmp_path: Path) -> None:
    import_paths([shared_data / "daily" / "pooksoft" / "daily_adjusted"], tmp_path / "pooksoft")
    panel = load_panel(
        tmp_path / "pooksoft",
        start="2016-01-01",
        end="2021-05-26",
        segments={
            "train": ("2016-01-01", "2019-11-25"),
            "validation": ("2019-11-26", "2020-05-25"),
            "backtest": ("2020-05-26", "2021-05-26"),
        },
        device="cpu",
        universe="nasdaq100",
    )
    dates = pd.DatetimeIndex(panel.timestamps_ns).date
    assert str(dates[-1]) == "2021-04-21"  # the files end there: the range is clipped, not padded
    joined = pd.Timestamp("2020-04-20").date()  # DXCM replaced AAL
    dxcm, aal = panel.symbols.index("DXCM"), panel.symbols.index("AAL")
    assert not panel.tradable[dates < joined, dxcm].any()
    assert panel.tradable[dates >= joined, dxcm].all()
    assert panel.tradable[dates < joined, aal].all()
    assert not panel.tradable[dates >= joined, aal].any()
    aapl = panel.close[:, panel.symbols.index("AAPL")].double()
    assert (aapl[1:] / aapl[:-1] - 1).abs().max() < 0.25
    assert torch.isfinite(panel.features).all()


@pytest.mark.parametrize(("adjustment", "warned"), [("none", True), ("split+dividend", False)])
def test_unadjusted_dataset_is_warned_about(
    market: pd.DataFrame, tmp_path: Path, caplog: pytest.LogCaptureFixture, adjustment: str, warned: bool
) -> None:
    write_dataset(
        market,
        tmp_path / "ds",
        source="csv",
        frequency="1min",
        adjustment=adjustment,  # type: ignore[arg-type]
        repairs={},
        notes=[],
    )
    with caplog.at_level(logging.WARNING, logger="finpod.data.panel_builder"):
        load_panel(tmp_path / "ds", start=START, end=END, segments=SEGMENTS, device="cpu")
    assert ("not split/dividend adjusted" in caplog.text) is warned


def _daily_frame(newest_first: bool) -> pd.DataFrame:
    """Three symbols of daily bars (bar schema's symbol and timestamp only), in either row order."""
    days = pd.date_range("2016-01-04 21:00", periods=6, freq="D", tz="UTC")
    frame = pd.DataFrame(
        {"symbol": np.repeat(["AAA", "BBB", "CCC"], len(days)), "timestamp": np.tile(days, 3)}
    )
    return frame.iloc[::-1].reset_index(drop=True) if newest_first else frame


@pytest.mark.parametrize("newest_first", [False, True])
@pytest.mark.parametrize("chunk_rows", [2, 5, 1 << 20])
def test_daily_bars_asked_for_as_minute_bars_are_refused_in_any_row_order_and_chunking(
    monkeypatch: pytest.MonkeyPatch, newest_first: bool, chunk_rows: int
) -> None:
    from finpod.data import panel_builder

    monkeypatch.setattr(panel_builder, "FREQUENCY_CHECK_ROWS", chunk_rows)
    with pytest.raises(DataError, match=r"the bars are daily .* fix: set frequency = \"1d\""):
        panel_builder.check_frequency(_daily_frame(newest_first), "1min")
    panel_builder.check_frequency(_daily_frame(newest_first), "1d")


@pytest.mark.parametrize("chunk_rows", [9, 1 << 20])
@pytest.mark.parametrize("newest_first", [False, True])
def test_one_intraday_step_makes_the_bars_minute_bars(
    monkeypatch: pytest.MonkeyPatch, chunk_rows: int, newest_first: bool
) -> None:
    """One pair of a symbol's bars a minute apart, rows interleaved by time (as a dataset sorted by
    timestamp has them) or reversed: minute bars, whatever the block size."""
    from finpod.data import panel_builder

    monkeypatch.setattr(panel_builder, "FREQUENCY_CHECK_ROWS", chunk_rows)
    frame = _daily_frame(newest_first=False)
    stamps = frame["timestamp"].copy()
    stamps.iloc[1] = stamps.iloc[0] + pd.Timedelta(minutes=1)  # AAA's first two bars
    frame["timestamp"] = stamps
    frame = frame.sort_values(["timestamp", "symbol"], ascending=not newest_first, kind="stable")
    panel_builder.check_frequency(frame.reset_index(drop=True), "1min")  # no error
