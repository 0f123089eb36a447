"""The synthetic market: deterministic, on the XNAS calendar, stylised facts, and a weak real signal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from finpod.data import synth
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
