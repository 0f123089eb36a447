"""The linear baseline: ridge on the per-asset features (train rows only), traded like the oracle."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.signals import SignalSpec
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.errors import DataError
from finpod.linear_baseline import RIDGE_PENALTIES, fit_linear_trader, fit_ridge
from finpod.oracle import equal_weight_policy, segment_sharpe

SEGMENTS = {
    "train": ("2016-01-04", "2017-12-29"),
    "validation": ("2018-01-02", "2018-06-29"),
    "backtest": ("2018-07-02", "2019-06-28"),
}
LAST_DAY = SEGMENTS["backtest"][1]
CONFIG = EnvConfig(fee_rate=0.0005, half_spread_bps=1.0)
CPU = torch.device("cpu")


def _bars(signal: SignalSpec, n_symbols: int = 20) -> pd.DataFrame:
    return synth_market(n_symbols, 880, "1d", seed=5, signal=signal, alpha_annual=0.0)


def _panel(bars: pd.DataFrame) -> Panel:
    return build_panel(
        bars,
        freq="1d",
        start=SEGMENTS["train"][0],
        end=LAST_DAY,
        segments=SEGMENTS,
        device=CPU,
        benchmark_symbol=None,
    )


def _garble_backtest(bars: pd.DataFrame) -> pd.DataFrame:
    """Every backtest bar replaced by random (valid) garbage."""
    rng = np.random.default_rng(99)
    out = bars.copy()
    later = out["timestamp"] >= pd.Timestamp(SEGMENTS["backtest"][0], tz="UTC")
    count = int(later.sum())
    low = rng.uniform(1.0, 1000.0, count)
    high = low * rng.uniform(1.0, 3.0, count)
    out.loc[later, "low"] = low
    out.loc[later, "high"] = high
    out.loc[later, "open"] = rng.uniform(low, high)
    out.loc[later, "close"] = rng.uniform(low, high)
    out.loc[later, "volume"] = rng.uniform(0.0, 1e9, count)
    return out


def test_the_ridge_finds_a_linear_signal_and_trades_it_above_equal_weight() -> None:
    signal = SignalSpec("reversal_5", 0.15)
    panel = _panel(_bars(signal))
    linear = fit_linear_trader(panel, CONFIG, CPU)
    coefficients = dict(zip(linear.ridge.feature_names, linear.ridge.coefficients.tolist(), strict=True))
    assert coefficients["xs_logret_5"] < 0.0  # a reversal of the 5-bar return
    assert "weekday_sin" not in coefficients  # clock features are the same for every asset
    assert max(linear.ridge.validation_ic) > 0.05
    assert linear.ridge.penalty in RIDGE_PENALTIES
    assert linear.tilt.segment == "train"
    equal = segment_sharpe(panel, "backtest", CONFIG, equal_weight_policy(panel.num_assets), CPU)
    assert segment_sharpe(panel, "backtest", CONFIG, linear.policy, CPU) > equal + 0.5
    assert set(linear.to_json()) == {"ridge", "trading"}


def test_the_ridge_cannot_see_the_nonlinear_kind() -> None:
    panel = _panel(_bars(SignalSpec("nonlinear", 0.15)))
    assert max(fit_ridge(panel).validation_ic) < 0.03


def test_garbage_backtest_bars_leave_the_ridge_and_its_trading_bit_identical() -> None:
    """The linear baseline never sees backtest rows: coefficients and family member are bit-identical."""
    bars = _bars(SignalSpec("momentum_60", 0.1))
    clean, garbled = _panel(bars), _panel(_garble_backtest(bars))
    start, _ = clean.segment("backtest")
    assert not torch.equal(clean.close[start:], garbled.close[start:])  # the garbage reached the panel
    ours, theirs = fit_linear_trader(clean, CONFIG, CPU), fit_linear_trader(garbled, CONFIG, CPU)
    assert torch.equal(ours.ridge.coefficients, theirs.ridge.coefficients)
    assert ours.ridge.validation_ic == theirs.ridge.validation_ic
    assert ours.tilt == theirs.tilt


def test_one_asset_is_a_one_line_error() -> None:
    panel = _panel(_bars(SignalSpec(), n_symbols=1))
    with pytest.raises(DataError, match="needs >= 2 assets"):
        fit_ridge(panel)
