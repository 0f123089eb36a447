"""What a run trains on: universe resolution, the backtest cut, device choice, and their errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from tiny import SEGMENTS, tiny_bars, tiny_spec

import finpod
from finpod.errors import DataError, SpecError
from finpod.pipeline.inputs import (
    bars_before_backtest,
    dataset_for,
    late_symbols,
    selection_panel,
    symbols_before_backtest,
    universe_symbols,
)
from finpod.rundir import create_run_dir


def test_selection_bars_stop_before_the_backtest_session() -> None:
    spec = tiny_spec(Path("/unused"))
    bars = tiny_bars(seed=1)
    kept = bars_before_backtest(spec, bars)
    first_backtest = pd.Timestamp(SEGMENTS["backtest"][0], tz="UTC")
    assert kept["timestamp"].max() < first_backtest
    assert (bars["timestamp"] >= first_backtest).any()
    assert len(kept) == int((bars["timestamp"] < first_backtest).sum())
    assert symbols_before_backtest(spec, bars) == set(kept["symbol"].unique())
    before = bars.copy()
    kept.loc[:, "close"] = -1.0  # the selection's frame is its own: the full bars are untouched
    pd.testing.assert_frame_equal(bars, before)


def test_universe_excludes_the_benchmark_and_checks_explicit_tickers() -> None:
    spec = tiny_spec(Path("/unused"))
    bars = tiny_bars(seed=1)
    assert universe_symbols(spec, bars) == ["AAA", "BBB", "CCC"]
    assert universe_symbols(spec.with_(universe=["CCC", "AAA"]), bars) == ["AAA", "CCC"]
    with pytest.raises(DataError, match=r"universe: ZZZ not in the dataset; fix"):
        universe_symbols(spec.with_(universe=["AAA", "ZZZ"]), bars)


def test_a_symbol_listed_only_in_the_backtest_is_left_out_not_a_crash() -> None:
    """A symbol whose first bar is in the backtest (an IPO) cannot be a selection-panel column."""
    spec = tiny_spec(Path("/unused"))
    bars = tiny_bars(seed=1)
    ipo = (bars["symbol"] == "AAA") & (bars["timestamp"] < pd.Timestamp(SEGMENTS["backtest"][0], tz="UTC"))
    bars = bars.loc[~ipo].reset_index(drop=True)
    symbols = universe_symbols(spec, bars)
    assert symbols == ["BBB", "CCC"]
    assert late_symbols(spec, bars) == ["AAA"]
    assert selection_panel(spec, bars, symbols, "cpu").symbols == ("BBB", "CCC")
    with pytest.raises(DataError, match=r"universe: AAA has no bar before the backtest segment .*; fix"):
        universe_symbols(spec.with_(universe=["AAA", "BBB"]), bars)


def test_device_cuda_needs_a_gpu() -> None:
    spec = tiny_spec(Path("/unused")).with_(device="cuda")
    if torch.cuda.is_available():
        assert spec.resolve_device() == "cuda"
    else:
        with pytest.raises(SpecError, match=r'device: "cuda" but torch sees no GPU; fix'):
            spec.resolve_device()
    assert spec.with_(device="cpu").resolve_device() == "cpu"


def test_load_run_refuses_an_unfinished_run(tmp_path: Path) -> None:
    run = create_run_dir(tiny_spec(Path("/unused")), tmp_path, {"dataset": "x"})
    with pytest.raises(SpecError, match="the run has not finished; fix"):
        finpod.load_run(run.root)


def test_synthetic_dataset_folder_is_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json records this folder; a relative one would break --resume from another directory."""
    monkeypatch.chdir(tmp_path)
    spec = finpod.Spec.from_dict(
        {
            "name": "synth",
            "frequency": "1d",
            "segments": SEGMENTS,
            "data": {"synthetic": {"n_symbols": 2, "n_days": 5}},
        }
    )
    folder = dataset_for(spec, Path("cache"))
    assert folder.is_absolute()
    assert folder.parent == tmp_path.resolve() / "cache"
    assert folder.is_dir()


def test_synthetic_spec_plants_its_signal(tmp_path: Path) -> None:
    """The spec's signal reaches the generator: another signal, another cached market."""
    raw = {"name": "synth", "frequency": "1d", "segments": SEGMENTS}
    plain = finpod.Spec.from_dict({**raw, "data": {"synthetic": {"n_symbols": 4, "n_days": 20}}})
    planted = plain.with_(data={"synthetic": {"signal": "reversal", "signal_strength": 0.3}})
    first, second = dataset_for(plain, tmp_path), dataset_for(planted, tmp_path)
    assert first != second
    closes = [pd.read_parquet(f / "bars.parquet")["close"].to_numpy() for f in (first, second)]
    assert not (closes[0] == closes[1]).all()
