"""Causal features: exact against slow references, no look-ahead, train-only statistics, neutral warm-up."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data.calendar import calendar_grid
from finpod.data.features import (
    CLIP_SIGMAS,
    EMA_CHUNK_BARS,
    FeatureStats,
    bar_phase,
    build_features,
    demean_across_symbols_,
    ema,
    feature_specs,
    fit_feature_stats,
    raw_features,
    rolling_std_mean,
)
from finpod.errors import DataError

NUM_ROWS = 700
NUM_COLS = 4
FIRST_BAR = torch.tensor([0, 0, 37, 250])
TRAIN_ROWS = (0, 400)
CHECK_ROWS = (0, 59, 127, 128, 300, 399, 400, 550, NUM_ROWS - 2)


def _market(seed: int, rows: int = NUM_ROWS) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random positive closes, volumes and a minute clock: ``(T, M)``, ``(T, M)``, ``(T,)``."""
    gen = torch.Generator().manual_seed(seed)
    steps = torch.randn(rows, NUM_COLS, generator=gen, dtype=torch.float64) * 2e-3
    close = (100.0 * torch.exp(torch.cumsum(steps, dim=0))).to(torch.float32)
    volume = torch.randint(0, 5000, (rows, NUM_COLS), generator=gen).to(torch.float32)
    grid = calendar_grid("1min", "2020-01-02", "2020-01-03")
    phase = torch.from_numpy(bar_phase(grid.timestamps_ns, grid.session_ids, grid.session_open_ns, "1min"))
    return close, volume, phase[:rows]


def _perturb_after(x: torch.Tensor, t: int, seed: int) -> torch.Tensor:
    """A copy of ``x`` with every row after ``t`` scaled by random positive factors."""
    gen = torch.Generator().manual_seed(seed)
    out = x.clone()
    out[t + 1 :] *= torch.exp(torch.randn(out[t + 1 :].shape, generator=gen)).to(out.dtype)
    return out


def test_ema_is_the_exact_recursion_across_blocks() -> None:
    close, _, _ = _market(0, rows=3 * EMA_CHUNK_BARS + 17)
    alpha = 2.0 / (12 + 1)
    expected = torch.empty_like(close, dtype=torch.float64)
    state = close[0].double()
    for t in range(close.shape[0]):
        state = alpha * close[t].double() + (1 - alpha) * state
        expected[t] = state
    assert torch.allclose(ema(close, 12).double(), expected, rtol=1e-6, atol=0)


def test_ema_is_exact_over_two_levels_of_blocks() -> None:
    rows = EMA_CHUNK_BARS * EMA_CHUNK_BARS + 300
    x = torch.randn(rows, 1, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    alpha = 1.0 / 14
    expected = np.empty(rows)
    state = float(x[0, 0])
    for t, value in enumerate(x[:, 0].tolist()):
        state = alpha * value + (1 - alpha) * state
        expected[t] = state
    assert np.allclose(ema(x, 14, alpha=alpha)[:, 0].numpy(), expected, rtol=0, atol=1e-9)


def test_rolling_std_mean_matches_pandas_on_prices() -> None:
    close, _, _ = _market(1)
    std, mean = rolling_std_mean(close, 20)
    frame = pd.DataFrame(close.double().numpy()).rolling(20, min_periods=1)
    assert np.allclose(mean.numpy(), frame.mean().to_numpy(), rtol=1e-6)
    assert np.allclose(std.numpy(), frame.std(ddof=0).to_numpy(), rtol=1e-3, atol=1e-5)


def test_feature_names_per_frequency() -> None:
    minute = [s.name for s in feature_specs("1min")]
    daily = [s.name for s in feature_specs("1d")]
    assert minute[:4] == ["xs_logret_1", "xs_logret_5", "xs_logret_15", "xs_logret_60"]
    assert minute[-2:] == ["minute_sin", "minute_cos"]
    assert daily[-2:] == ["weekday_sin", "weekday_cos"]
    assert len(minute) == len(daily) == 12


def test_bar_phase_minute_and_weekday() -> None:
    grid = calendar_grid("1min", "2020-01-02", "2020-01-02")
    phase = bar_phase(grid.timestamps_ns, grid.session_ids, grid.session_open_ns, "1min")
    assert phase[0] == 0.0
    assert phase[195] == pytest.approx(math.pi)
    days = calendar_grid("1d", "2020-01-06", "2020-01-10")  # Monday..Friday
    weekday = bar_phase(days.timestamps_ns, days.session_ids, days.session_open_ns, "1d")
    assert weekday == pytest.approx([2 * math.pi * d / 5 for d in range(5)])


def test_raw_values_follow_their_definitions() -> None:
    close, volume, phase = _market(2)
    raw = raw_features(close, volume, phase, "1min")
    t, m = 200, 1
    log_close = torch.log(close.double())
    assert raw[t, m, 0].item() == pytest.approx((log_close[t] - log_close[t - 1])[m].item(), abs=1e-6)
    assert raw[t, m, 3].item() == pytest.approx((log_close[t] - log_close[t - 60])[m].item(), abs=1e-5)
    returns = (log_close[t - 29 : t + 1] - log_close[t - 30 : t])[:, m]
    assert raw[t, m, 4].item() == pytest.approx(returns.std(correction=0).item(), rel=1e-3)
    window = close[t - 19 : t + 1, m].double()
    bollinger = (close[t, m] - window.mean()) / (2 * window.std(correction=0))
    assert raw[t, m, 8].item() == pytest.approx(bollinger.item(), rel=1e-3, abs=1e-4)
    assert raw[:, :, 5].min() >= 0.0
    assert raw[:, :, 5].max() <= 100.0


def test_returns_are_demeaned_over_the_warm_symbols_of_each_bar() -> None:
    """Each return feature loses its bar's mean over the symbols warm for it; cold cells and every
    other feature are untouched; a bar with no warm symbol is left alone; one row alone gives the
    same as that row of the whole table (the paper trader's online features)."""
    close, volume, phase = _market(13)
    specs = feature_specs("1min")
    raw = raw_features(close, volume, phase, "1min")
    demeaned = demean_across_symbols_(raw.clone(), FIRST_BAR, specs)
    age = torch.arange(NUM_ROWS)[:, None] - FIRST_BAR[None, :]
    for f, spec in enumerate(specs):
        if not spec.cross_sectional:
            assert torch.equal(demeaned[:, :, f], raw[:, :, f]), spec.name
            continue
        assert spec.name.startswith("xs_logret_")
        assert spec.per_asset
        warm = age >= spec.warmup_bars
        for t in (0, spec.warmup_bars, 40, 300, NUM_ROWS - 1):
            cells = raw[t, :, f].double()
            if not warm[t].any():
                assert torch.equal(demeaned[t, :, f], raw[t, :, f])
                continue
            expected = cells - cells[warm[t]].mean()
            assert torch.allclose(demeaned[t, warm[t], f].double(), expected[warm[t]], atol=1e-6), spec.name
            assert torch.equal(demeaned[t, ~warm[t], f], raw[t, ~warm[t], f])
            row = raw[t : t + 1].clone()
            assert torch.equal(demean_across_symbols_(row, FIRST_BAR - t, specs)[0], demeaned[t])
    assert (age[300] >= 60).sum() == 3  # symbol 3 is still cold at bar 300: the mean left it out


def test_a_symbol_that_stopped_trading_leaves_the_mean_but_is_still_demeaned() -> None:
    """Delisted at bar 350 (its close carried forward, no real bar after): once an ``h``-bar return
    holds no real bar, the symbol's 0 is no part of the market's move and leaves the mean; its own
    cell still loses the others' mean. A row demeaned alone with its real-bar history agrees."""
    close, volume, phase = _market(14)
    close[350:, 1] = close[349, 1]
    real = torch.ones(NUM_ROWS, NUM_COLS, dtype=torch.bool)
    real[350:, 1] = False
    specs = feature_specs("1min")
    raw = raw_features(close, volume, phase, "1min")
    demeaned = demean_across_symbols_(raw.clone(), FIRST_BAR, specs, real)
    everyone = demean_across_symbols_(raw.clone(), FIRST_BAR, specs)
    for f, spec in enumerate(specs):
        if not spec.cross_sectional:
            continue
        h = spec.warmup_bars
        gone = 349 + h  # the first bar whose h-bar window (gone - h, gone] holds no real bar of symbol 1
        t = gone + 5
        live = [m for m in range(NUM_COLS) if m != 1 and t - int(FIRST_BAR[m]) >= h]
        mean = raw[t, live, f].double().mean()
        assert torch.allclose(demeaned[t, :, f].double(), raw[t, :, f].double() - mean, atol=1e-6)
        assert raw[t, 1, f] == 0.0  # its return is 0 ...
        assert not torch.equal(demeaned[t, :, f], everyone[t, :, f])  # ... and it no longer dilutes the mean
        before = gone - 1  # still one real bar in its window: still live
        assert torch.equal(demeaned[before, :, f], everyone[before, :, f])
        row = raw[t : t + 1].clone()
        alone = demean_across_symbols_(row, FIRST_BAR - t, specs, real[: t + 1])
        assert torch.equal(alone[0], demeaned[t])
    with pytest.raises(ValueError, match="fewer than the 700 feature rows"):
        demean_across_symbols_(raw.clone(), FIRST_BAR, specs, real[:10])


def test_rsi_is_100_when_only_rising_and_50_when_flat() -> None:
    rising = torch.linspace(100, 120, 100)[:, None].repeat(1, 2)
    flat = torch.full((100, 2), 50.0)
    volume, phase = torch.ones(100, 2), torch.zeros(100)
    assert torch.allclose(raw_features(rising, volume, phase, "1d")[50:, :, 5], torch.tensor(100.0))
    assert (raw_features(flat, volume, phase, "1d")[:, :, 5] == 50.0).all()


@pytest.mark.parametrize("t", CHECK_ROWS)
def test_no_look_ahead_raw_features(t: int) -> None:
    close, volume, phase = _market(3)
    before = raw_features(close, volume, phase, "1min")
    after = raw_features(_perturb_after(close, t, 10 + t), _perturb_after(volume, t, 20 + t), phase, "1min")
    assert torch.equal(before[: t + 1], after[: t + 1])
    assert not torch.equal(before[t + 1 :, :, :10], after[t + 1 :, :, :10])  # the change is real


@pytest.mark.parametrize("t", CHECK_ROWS)
def test_no_look_ahead_with_train_statistics_fixed(t: int) -> None:
    close, volume, phase = _market(4)
    before, stats = build_features(close, volume, FIRST_BAR, phase, "1min", TRAIN_ROWS)
    changed_close, changed_volume = _perturb_after(close, t, 30 + t), _perturb_after(volume, t, 40 + t)
    after, reused = build_features(
        changed_close, changed_volume, FIRST_BAR, phase, "1min", TRAIN_ROWS, stats=stats
    )
    assert torch.equal(reused.std, stats.std)
    assert torch.equal(before[: t + 1], after[: t + 1])


@pytest.mark.parametrize("t", [400, 550])
def test_no_look_ahead_when_refitting_after_train(t: int) -> None:
    close, volume, phase = _market(5)
    before, _ = build_features(close, volume, FIRST_BAR, phase, "1min", TRAIN_ROWS)
    after, _ = build_features(
        _perturb_after(close, t, t), _perturb_after(volume, t, t + 1), FIRST_BAR, phase, "1min", TRAIN_ROWS
    )
    assert torch.equal(before[: t + 1], after[: t + 1])


def test_changing_backtest_rows_leaves_statistics_unchanged() -> None:
    close, volume, phase = _market(6)
    specs = feature_specs("1min")
    first = fit_feature_stats(raw_features(close, volume, phase, "1min"), FIRST_BAR, specs, TRAIN_ROWS)
    backtest_start = 500
    changed = raw_features(
        _perturb_after(close, backtest_start - 1, 7),
        _perturb_after(volume, backtest_start - 1, 8),
        phase,
        "1min",
    )
    second = fit_feature_stats(changed, FIRST_BAR, specs, TRAIN_ROWS)
    assert torch.equal(first.mean, second.mean)
    assert torch.equal(first.std, second.std)
    third = fit_feature_stats(changed, FIRST_BAR, specs, (0, backtest_start + 100))
    assert not torch.equal(first.mean, third.mean)  # the statistics do see the rows they are fitted on


def test_statistics_equal_a_naive_masked_computation() -> None:
    close, volume, phase = _market(12)
    specs = feature_specs("1min")
    raw = raw_features(close, volume, phase, "1min")
    expected = raw.clone().double()
    stats = fit_feature_stats(raw, FIRST_BAR, specs, TRAIN_ROWS)
    rows = torch.arange(NUM_ROWS)[:, None] - FIRST_BAR[None, :]
    for f, spec in enumerate(specs):
        if not spec.per_asset:
            assert (stats.mean[f], stats.std[f]) == (0.0, 1.0)
            continue
        warm = (rows >= spec.warmup_bars)[TRAIN_ROWS[0] : TRAIN_ROWS[1]]
        values = expected[TRAIN_ROWS[0] : TRAIN_ROWS[1], :, f][warm]
        assert stats.mean[f].item() == pytest.approx(values.mean().item(), rel=1e-5, abs=1e-9), spec.name
        assert stats.std[f].item() == pytest.approx(values.std(correction=0).item(), rel=1e-4), spec.name


def test_train_statistics_normalise_train_rows() -> None:
    close, volume, phase = _market(7)
    features, stats = build_features(close, volume, FIRST_BAR, phase, "1min", (0, NUM_ROWS))
    warm = features[200:, :2, :10]
    assert warm.mean(dim=(0, 1)).abs().max() < 0.3
    assert ((warm.std(dim=(0, 1)) - 1.0).abs() < 0.3).all()
    assert stats.names == tuple(s.name for s in feature_specs("1min"))


def test_cold_cells_are_neutral_and_clock_is_not() -> None:
    close, volume, phase = _market(8)
    features, _ = build_features(close, volume, FIRST_BAR, phase, "1min", TRAIN_ROWS)
    specs = feature_specs("1min")
    for f, spec in enumerate(specs):
        for m, first in enumerate(FIRST_BAR.tolist()):
            cold = features[: first + spec.warmup_bars, m, f]
            if spec.per_asset:
                assert (cold == 0).all(), spec.name
    assert torch.equal(features[:, 3, -2], torch.sin(phase.float()))
    assert (features[FIRST_BAR[3] + 60 :, 3, :10] != 0).any()


def test_output_is_finite_and_clipped_even_on_flat_or_silent_markets() -> None:
    close, volume, phase = _market(9)
    close[100:300, 0] = close[99, 0]  # a long stretch of filled bars
    volume[:, 1] = 0.0  # never trades
    features, _ = build_features(close, volume, FIRST_BAR, phase, "1min", TRAIN_ROWS, clip_sigmas=2.0)
    assert torch.isfinite(features).all()
    assert features[:, :, :10].abs().max() <= 2.0
    assert features.dtype == torch.float32


def test_a_train_segment_too_short_to_warm_up_is_an_error() -> None:
    close, volume, phase = _market(10)
    with pytest.raises(DataError, match="train segment has no bar where feature xs_logret_60 is warmed up"):
        build_features(close, volume, FIRST_BAR, phase, "1min", (0, 50))


def test_statistics_for_other_features_are_an_error() -> None:
    close, volume, phase = _market(11)
    stats = FeatureStats(("x",), torch.zeros(1), torch.ones(1))
    with pytest.raises(DataError, match="feature statistics are for x"):
        build_features(close, volume, FIRST_BAR, phase, "1min", TRAIN_ROWS, stats=stats)


def test_default_clip_is_five_sigma() -> None:
    assert CLIP_SIGMAS == 5.0


@pytest.mark.parametrize("window", [1, 7, 390, 5000])
def test_the_symbol_major_rolling_sums_equal_the_row_sums_bit_for_bit(window: int) -> None:
    """A CPU sums each symbol's window over contiguous memory; the rows' own scan (what CUDA runs)
    gives the same bits there."""
    from finpod.data.features import _rolling_std_mean_along

    x = 100.0 + torch.randn(3000, 37, generator=torch.Generator().manual_seed(window)).cumsum(0)
    for given in (x, x[:, 5:20], x.t().contiguous().t()):  # contiguous, a column slice, column-major
        fast = rolling_std_mean(given, window)
        rows = _rolling_std_mean_along(given.to(torch.float64), window, dim=0)
        assert torch.equal(fast[0], rows[0])
        assert torch.equal(fast[1], rows[1])
