"""The synthetic market: deterministic, XNAS calendar, stylised facts, drift alpha, planted signal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data import signals, synth
from finpod.data.signals import SignalSpec
from finpod.data.synth import alpha_symbols, drag_symbols, synth_market
from finpod.data.validate import validate_bars
from finpod.errors import SpecError

ONE_OFF_COST = 0.002
SIGNAL_SEEDS = (0, 1, 2, 3, 4)
SIGNAL_SYMBOLS = 40
SIGNAL_DAYS = 1260
MAX_LONG_SHORT_SHARPE = 3.0


@pytest.fixture(scope="module")
def minute_market() -> pd.DataFrame:
    return synth_market(8, 60, "1min", seed=3)


def _closes(bars: pd.DataFrame) -> pd.DataFrame:
    return bars.pivot(index="timestamp", columns="symbol", values="close")


def test_same_seed_same_bars_other_seed_other_bars() -> None:
    first = synth_market(4, 3, "1min", seed=11)
    pd.testing.assert_frame_equal(first, synth_market(4, 3, "1min", seed=11))
    assert not np.allclose(first["close"], synth_market(4, 3, "1min", seed=12)["close"])


def test_bar_schema_on_xnas_sessions_with_half_days() -> None:
    bars = synth_market(2, 5, "1min", seed=0, start="2016-11-22")
    validate_bars(bars, "synth")
    assert bars["symbol"].unique().tolist() == ["SYN000", "SYN001"]
    per_day = bars[bars["symbol"] == "SYN000"].groupby(
        bars["timestamp"].dt.tz_convert("America/New_York").dt.date
    )
    sizes = per_day.size()
    # 2016-11-24 is Thanksgiving (closed), 2016-11-25 a half day (13:00 close).
    assert [str(d) for d in sizes.index] == [
        "2016-11-22",
        "2016-11-23",
        "2016-11-25",
        "2016-11-28",
        "2016-11-29",
    ]
    assert sizes.tolist() == [390, 390, 210, 390, 390]
    first_bar = per_day["timestamp"].min().iloc[0]
    assert first_bar == pd.Timestamp("2016-11-22 14:30", tz="UTC")


def test_daily_bars_start_at_the_open() -> None:
    bars = synth_market(3, 4, "1d", seed=0, start="2020-03-06")
    stamps = bars[bars["symbol"] == "SYN000"]["timestamp"].dt.strftime("%Y-%m-%d %H:%M").tolist()
    # DST starts 2020-03-08: the open moves from 14:30 to 13:30 UTC.
    assert stamps == ["2020-03-06 14:30", "2020-03-09 13:30", "2020-03-10 13:30", "2020-03-11 13:30"]


def test_ohlc_consistent_and_positive(minute_market: pd.DataFrame) -> None:
    b = minute_market
    assert (b[["open", "high", "low", "close"]] > 0).all().all()
    assert (b["high"] >= b[["open", "close"]].max(axis=1)).all()
    assert (b["low"] <= b[["open", "close"]].min(axis=1)).all()
    assert (b["volume"] >= 0).all()


def test_fat_tails_and_volatility_clustering(minute_market: pd.DataFrame) -> None:
    log_returns = np.log(_closes(minute_market)).diff().iloc[1:]
    pearson_kurtosis = log_returns.kurt() + 3.0
    assert (pearson_kurtosis > 3.0).all()
    daily = np.log(_closes(synth_market(6, 750, "1d", seed=5))).diff().iloc[1:]
    lag_one = daily.abs().apply(lambda column: column.autocorr(1))
    assert (lag_one > 0).all()
    assert lag_one.mean() > 0.03


def test_u_shaped_intraday_volume_and_volatility(minute_market: pd.DataFrame) -> None:
    b = minute_market.assign(
        minute=(minute_market["timestamp"].dt.tz_convert("America/New_York").dt.hour * 60)
        + minute_market["timestamp"].dt.tz_convert("America/New_York").dt.minute,
        abs_return=np.log(minute_market["close"] / minute_market["open"]).abs(),
    )
    by_minute = b.groupby("minute")[["volume", "abs_return"]].mean()
    open_hour, midday, last_hour = by_minute.iloc[:30], by_minute.iloc[165:225], by_minute.iloc[-30:]
    for column in ("volume", "abs_return"):
        assert open_hour[column].mean() > 1.5 * midday[column].mean()
        assert last_hour[column].mean() > 1.5 * midday[column].mean()


def test_overnight_gaps_exist(minute_market: pd.DataFrame) -> None:
    one = minute_market[minute_market["symbol"] == "SYN000"].reset_index(drop=True)
    session = one["timestamp"].dt.tz_convert("America/New_York").dt.date
    first_of_day = session.ne(session.shift()) & (one.index > 0)
    gaps = (one["open"] / one["close"].shift())[first_of_day]
    inside = (one["open"] / one["close"].shift())[~first_of_day & (one.index > 0)]
    assert np.allclose(inside, 1.0)
    assert (np.abs(np.log(gaps)) > 1e-6).all()


def test_factor_correlation_higher_within_a_sector() -> None:
    daily = np.log(_closes(synth_market(8, 500, "1d", seed=2))).diff().iloc[1:]
    corr = daily.corr().to_numpy()
    sector = np.arange(8) % synth.N_SECTORS
    same = sector[:, None] == sector[None, :]
    off_diagonal = ~np.eye(8, dtype=bool)
    assert corr[off_diagonal & ~same].mean() > 0.1
    assert corr[off_diagonal & same].mean() > corr[off_diagonal & ~same].mean() + 0.05


@pytest.mark.parametrize("seed", SIGNAL_SEEDS)
def test_alpha_basket_beats_equal_weight_net_of_cost_but_weakly(seed: int) -> None:
    """The documented rule (hold the alpha names) beats equal weight after a 0.2 % cost; not absurdly."""
    closes = _closes(synth_market(SIGNAL_SYMBOLS, SIGNAL_DAYS, "1d", seed=seed))
    returns = closes.pct_change().iloc[1:]
    alpha, drag = alpha_symbols(SIGNAL_SYMBOLS), drag_symbols(SIGNAL_SYMBOLS)
    equal_weight_growth = (1.0 + returns.mean(axis=1)).prod()
    alpha_growth = (1.0 + returns[alpha].mean(axis=1)).prod() * (1.0 - ONE_OFF_COST)
    assert alpha_growth > equal_weight_growth
    long_short = returns[alpha].mean(axis=1) - returns[drag].mean(axis=1)
    sharpe = long_short.mean() / long_short.std() * np.sqrt(synth.TRADING_DAYS_PER_YEAR)
    assert 0.0 < sharpe < MAX_LONG_SHORT_SHARPE


def test_alpha_and_drag_symbols_are_documented() -> None:
    assert alpha_symbols(10) == ["SYN000", "SYN004", "SYN008"]
    assert drag_symbols(10) == ["SYN001", "SYN005", "SYN009"]
    assert "SYN000" in (synth.__doc__ or "")
    assert "+10 %" in (synth.__doc__ or "")


@pytest.mark.parametrize(
    ("n_symbols", "n_days", "freq", "message"),
    [(0, 5, "1d", "--symbols 0"), (3, 0, "1d", "--days 0"), (3, 5, "5min", "--freq '5min'")],
)
def test_bad_arguments_are_one_line_errors(n_symbols: int, n_days: int, freq: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        synth_market(n_symbols, n_days, freq, seed=0)  # type: ignore[arg-type]


def _demeaned_steps(bars: pd.DataFrame) -> np.ndarray:
    """``(T - 1, M)`` close-to-close log returns minus each bar's cross-sectional mean."""
    steps = np.log(_closes(bars)).diff().iloc[1:].to_numpy()
    return steps - steps.mean(axis=1, keepdims=True)


def _next_open_to_close_demeaned(bars: pd.DataFrame) -> np.ndarray:
    """``(T - 2, M)``: bar t+1's demeaned open-to-close log return, aligned with ``_demeaned_steps[t]``."""
    opens = bars.pivot(index="timestamp", columns="symbol", values="open")
    body = (np.log(_closes(bars)) - np.log(opens)).to_numpy()[2:]
    return body - body.mean(axis=1, keepdims=True)


@pytest.mark.parametrize("freq", ["1d", "1min"])
def test_signal_strength_zero_is_no_signal(freq: str) -> None:
    plain = synth_market(6, 40 if freq == "1d" else 2, freq, seed=4)  # type: ignore[arg-type]
    for kind in ("none", "reversal", "momentum"):
        same = synth_market(6, 40 if freq == "1d" else 2, freq, seed=4, signal=SignalSpec(kind, 0.0))  # type: ignore[arg-type]
        pd.testing.assert_frame_equal(plain, same)
    assert SignalSpec("none", 0.5).rho == 0.0


@pytest.mark.parametrize(("kind", "sign"), [("reversal", -1.0), ("momentum", 1.0)])
@pytest.mark.parametrize("freq", ["1d", "1min"])
def test_planted_signal_predicts_next_bar_from_the_last_return(kind: str, sign: float, freq: str) -> None:
    """Causal predictability: bar t's demeaned return predicts bar t+1's demeaned open-to-close return."""
    strength = 0.2
    days = 1500 if freq == "1d" else 4
    bars = synth_market(20, days, freq, seed=7, signal=SignalSpec(kind, strength))  # type: ignore[arg-type]
    d = _demeaned_steps(bars)
    nxt = _next_open_to_close_demeaned(bars)
    ic = np.corrcoef(d[:-1].ravel(), nxt.ravel())[0, 1]
    assert sign * ic > 0.15
    none = synth_market(20, days, freq, seed=7)  # type: ignore[arg-type]
    assert (
        abs(np.corrcoef(_demeaned_steps(none)[:-1].ravel(), _next_open_to_close_demeaned(none).ravel())[0, 1])
        < 0.03
    )


def test_planted_signal_is_stationary() -> None:
    """The lag-1 autocorrelation and the variance of demeaned returns are the same in both halves."""
    bars = synth_market(30, 2000, "1d", seed=8, signal=SignalSpec("reversal", 0.3))
    d = _demeaned_steps(bars)
    halves = np.array_split(d, 2)
    autocorr = [np.corrcoef(h[:-1].ravel(), h[1:].ravel())[0, 1] for h in halves]
    assert autocorr == pytest.approx([-0.3, -0.3], abs=0.05)
    variance = [h.var() for h in halves]
    assert variance[1] == pytest.approx(variance[0], rel=0.25)


def test_planted_signal_leaves_the_cross_sectional_mean_alone() -> None:
    plain = np.log(_closes(synth_market(10, 300, "1d", seed=9))).diff().iloc[1:].mean(axis=1)
    planted = np.log(_closes(synth_market(10, 300, "1d", seed=9, signal=SignalSpec("momentum", 0.5))))
    np.testing.assert_allclose(planted.diff().iloc[1:].mean(axis=1), plain, atol=1e-9)


@pytest.mark.parametrize(
    ("kind", "strength", "message"),
    [
        ("wave", 0.1, "--signal 'wave'"),
        ("reversal", 0.95, "--signal-strength 0.95"),
        ("momentum", -0.1, "-0.1"),
    ],
)
def test_bad_signal_is_a_one_line_error(kind: str, strength: float, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        SignalSpec(kind, strength)  # type: ignore[arg-type]


def test_alpha_annual_zero_switches_the_drift_alpha_off() -> None:
    closes = _closes(synth_market(8, 30, "1d", seed=1, alpha_annual=0.0))
    assert closes.shape == (30, 8)
    with pytest.raises(SpecError, match="alpha_annual"):
        synth_market(8, 30, "1d", seed=1, alpha_annual=2.0)


def _demeaned(frame: pd.DataFrame) -> np.ndarray:
    values = frame.to_numpy()
    return values - values.mean(axis=1, keepdims=True)


def _predictor_from_bars(kind: str, bars: pd.DataFrame) -> np.ndarray:
    """``(T, M)`` the kind's predictor at every bar, recomputed from the bars alone (its documented model)."""
    log_close = np.log(_closes(bars))
    d1 = _demeaned(log_close.diff(1))
    d5 = _demeaned(log_close.diff(5))
    if kind == "reversal":
        return -d1
    if kind == "momentum":
        return d1
    if kind == "reversal_5":
        return -d5
    if kind == "momentum_60":
        return _demeaned(log_close.diff(60))
    if kind == "volume":
        log_volume = np.log1p(bars.pivot(index="timestamp", columns="symbol", values="volume"))
        rolling = log_volume.rolling(30)
        volume_z = ((log_volume - rolling.mean()) / rolling.std(ddof=0)).to_numpy()
        return d1 * (volume_z - 1.0)
    return signals.cross_sectional_z(d1) * signals.cross_sectional_z(d5 - d1)


def _mean_ic(predictor: np.ndarray, bars: pd.DataFrame) -> float:
    """Average over bars of the cross-sectional Pearson correlation of ``predictor[t]`` and ``d[t + 1]``."""
    following = _demeaned(np.log(_closes(bars)).diff(1))[1:]
    now = predictor[:-1]
    rows = np.isfinite(now).all(axis=1) & np.isfinite(following).all(axis=1)
    x, y = signals.cross_sectional_z(now[rows]), signals.cross_sectional_z(following[rows])
    return float(np.mean(np.mean(x * y, axis=1)))


@pytest.mark.parametrize("kind", ["reversal", "momentum", "reversal_5", "momentum_60", "volume", "nonlinear"])
def test_every_kind_realises_its_target_information_coefficient(kind: str) -> None:
    """The realised IC of each kind's documented predictor is its strength (realistic: 0.05) +- 0.015."""
    target = 0.05
    bars = synth_market(40, 1500, "1d", seed=21, signal=SignalSpec(kind, target), alpha_annual=0.0)  # type: ignore[arg-type]
    assert _mean_ic(_predictor_from_bars(kind, bars), bars) == pytest.approx(target, abs=0.015)
    plain = synth_market(40, 1500, "1d", seed=21, alpha_annual=0.0)
    assert abs(_mean_ic(_predictor_from_bars(kind, plain), plain)) < 0.015


def test_a_minute_market_realises_its_target_information_coefficient() -> None:
    bars = synth_market(20, 30, "1min", seed=5, signal=SignalSpec("volume", 0.05), alpha_annual=0.0)
    assert _mean_ic(_predictor_from_bars("volume", bars), bars) == pytest.approx(0.05, abs=0.015)


def test_the_nonlinear_kind_is_invisible_to_every_single_feature() -> None:
    """No one-feature linear predictor (a 1-, 5- or 60-bar return) sees the interaction."""
    bars = synth_market(40, 1500, "1d", seed=22, signal=SignalSpec("nonlinear", 0.08), alpha_annual=0.0)
    for kind in ("momentum", "reversal_5", "momentum_60"):
        assert abs(_mean_ic(_predictor_from_bars(kind, bars), bars)) < 0.015
    assert _mean_ic(_predictor_from_bars("nonlinear", bars), bars) == pytest.approx(0.08, abs=0.015)


def test_the_new_kinds_leave_the_cross_sectional_mean_and_the_draws_alone() -> None:
    plain = synth_market(10, 300, "1d", seed=9)
    for kind in ("reversal_5", "momentum_60", "volume", "nonlinear"):
        planted = synth_market(10, 300, "1d", seed=9, signal=SignalSpec(kind, 0.3))  # type: ignore[arg-type]
        np.testing.assert_allclose(
            np.log(_closes(planted)).diff().iloc[1:].mean(axis=1),
            np.log(_closes(plain)).diff().iloc[1:].mean(axis=1),
            atol=1e-9,
        )
        first = signals.warmup_bars(kind)
        pd.testing.assert_frame_equal(
            planted.groupby("symbol").head(first).reset_index(drop=True),
            plain.groupby("symbol").head(first).reset_index(drop=True),
        )
