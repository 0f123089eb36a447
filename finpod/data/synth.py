"""A seeded synthetic stock market on real XNAS sessions: the default data users see first.

``synth_market(n_symbols, n_days, freq, seed, signal=...)`` returns bars in the bar schema for tickers
``SYN000``, ``SYN001``, ... on the first ``n_days`` XNAS sessions from ``start`` (half days have 210
minutes), at ``1min`` (regular hours) or ``1d``. Same arguments -> identical bars.

The model, per symbol ``m``, session ``d`` and bar ``k`` (all returns are log returns):

* **factors**: a market factor (annual vol ``MARKET_VOL_ANNUAL``) with loading ``beta_m`` in
  [0.7, 1.3], one of ``N_SECTORS`` sector factors (``SECTOR_VOL_ANNUAL``), and an idiosyncratic part
  (``IDIO_VOL_ANNUAL`` x U[0.7, 1.3]), so returns are correlated within the market and more so within
  a sector (sector = symbol number mod ``N_SECTORS``);
* **fat tails**: every shock is Student-t with ``T_DOF`` degrees of freedom, scaled to unit variance;
* **volatility clustering**: a GARCH(1,1)-like variance multiplier per symbol and session,
  ``h_d = (1 - a - b) + a z_{d-1}^2 + b h_{d-1}`` (``GARCH_ALPHA``, ``GARCH_BETA``), where ``z`` is the
  session's unit-variance shock BEFORE the multiplier (textbook GARCH would use ``h z^2``, the
  realised return's square, so large moves here raise the next variance but do not compound); it
  scales the whole session (gap and bars);
* **intraday U-shapes**: per-bar volatility and volume follow ``1 + c (2x - 1)^2`` over the session
  (``x`` in [0, 1]; ``c`` = ``INTRADAY_VOL_CURVATURE`` / ``INTRADAY_VOLUME_CURVATURE``);
* **overnight gaps**: a session's first open = previous close x exp(gap), the gap carrying
  ``OVERNIGHT_VARIANCE_SHARE`` of the daily variance;
* **bars**: open = previous close (or the gapped open), high/low extend max/min(open, close) by a
  positive intrabar excursion, so ``low <= open, close <= high`` and prices stay > 0; volume rises with
  the bar's absolute return.

**The drift alpha (weak, documented, not observable).** Every symbol drifts at
``MARKET_DRIFT_ANNUAL`` a year (log), plus a persistent cross-sectional alpha: symbols whose number is
``0 mod 4`` (``SYN000``, ``SYN004``, ...; see :func:`alpha_symbols`) carry ``+alpha_annual`` (default
``ALPHA_ANNUAL``, +10 % a year), symbols ``1 mod 4`` (:func:`drag_symbols`) carry ``-alpha_annual``, the
rest none. The alpha is small next to the idiosyncratic noise (20 % a year), so any one name is a coin
flip over a few months, but a long-only basket of the alpha names beats the equal-weight market over
years, net of a 0.2 % one-off cost (tested in ``tests/data/test_synth.py`` on five seeds). With 40
symbols over five years the long-short (alpha minus drag names) Sharpe ratio measured 0.4 to 1.6
across seeds. An agent's observation carries no ticker identity, so this edge is invisible to a
policy that treats assets alike; ``alpha_annual = 0`` switches it off.

**The planted signals (observable, stationary, of known strength).** ``signal`` is a
:class:`~finpod.data.signals.SignalSpec` ``(kind, strength)``: one-bar reversal or momentum (an AR(1)
of cross-sectionally demeaned bar returns), multi-bar reversal and momentum, a volume-conditioned
effect and a nonlinear interaction, each with its strength given as its target information
coefficient; :mod:`finpod.data.signals` states every model. With ``kind = "none"`` (or
``strength = 0``) nothing is added and the bars are identical to a market generated without it; the
random draws never depend on the signal. The planted terms sum to zero across symbols (the market
and sector moves are untouched) and sit in a bar's open-to-close part (not in an overnight gap), so
an order decided at bar ``t``'s close and filled at ``t + 1``'s open earns them in full. Every
predictor is a causal function of the observation's features (``xs_logret_1``, ``xs_logret_5``,
``xs_logret_60``, ``volume_z_30``, up to the train normalisation's affine map); ``finpod.oracle`` trades
on exactly that. The same definitions hold at ``1d`` and ``1min`` (at ``1min``, bar ``t + 1`` of a
session's first minute follows the previous session's last minute, gap included in ``d``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from finpod.data.calendar import NS_PER_MINUTE
from finpod.data.choices import ALPHA_ANNUAL, DEFAULT_START
from finpod.data.importers.common import ZERO_VOLUME_BARS
from finpod.data.schema import BAR_COLUMNS
from finpod.data.signals import AR_KINDS, NO_SIGNAL, SignalPlanter, SignalSpec
from finpod.data.store import Manifest, write_dataset
from finpod.data.validate import validate_bars
from finpod.data.xnas_sessions import sessions_from
from finpod.errors import SpecError

TRADING_DAYS_PER_YEAR: Final[int] = 252
MARKET_DRIFT_ANNUAL: Final[float] = 0.06
ALPHA_EVERY: Final[int] = 4
"""Symbol number ``0 mod ALPHA_EVERY`` carries +alpha, ``1 mod ALPHA_EVERY`` carries -alpha."""
MARKET_VOL_ANNUAL: Final[float] = 0.16
SECTOR_VOL_ANNUAL: Final[float] = 0.10
IDIO_VOL_ANNUAL: Final[float] = 0.20
N_SECTORS: Final[int] = 4
BETA_RANGE: Final[tuple[float, float]] = (0.7, 1.3)
IDIO_SCALE_RANGE: Final[tuple[float, float]] = (0.7, 1.3)
T_DOF: Final[float] = 4.0
GARCH_ALPHA: Final[float] = 0.08
GARCH_BETA: Final[float] = 0.90
OVERNIGHT_VARIANCE_SHARE: Final[float] = 0.2
INTRADAY_VOL_CURVATURE: Final[float] = 1.5
INTRADAY_VOLUME_CURVATURE: Final[float] = 3.0
INTRABAR_RANGE_SCALE: Final[float] = 0.5
"""High/low excursion beyond the open-close body, in units of the bar's volatility."""
START_PRICE_RANGE_USD: Final[tuple[float, float]] = (20.0, 200.0)
SHARES_PER_SESSION_RANGE: Final[tuple[float, float]] = (1e6, 2e7)
VOLUME_NOISE_LOG_STD: Final[float] = 0.3
VOLUME_RESPONSE_TO_MOVE: Final[float] = 0.5
"""Volume multiplier per unit of |bar return| / bar volatility."""
SYMBOL_PREFIX: Final[str] = "SYN"
_CHUNK_BARS_PER_SYMBOL: Final[int] = 390 * 20
"""Bars per symbol generated at once (about 20 minute sessions), to bound temporary memory."""


@dataclass(frozen=True)
class _Universe:
    """Static per-symbol parameters, ``(M,)`` each."""

    beta: np.ndarray
    sector: np.ndarray
    idio_vol_annual: np.ndarray
    drift_annual: np.ndarray
    start_log_price: np.ndarray
    shares_per_session: np.ndarray


def symbol_names(n_symbols: int) -> list[str]:
    """Tickers ``SYN000``.. of a synthetic market with ``n_symbols`` symbols."""
    width = max(3, len(str(n_symbols - 1)))
    return [f"{SYMBOL_PREFIX}{i:0{width}d}" for i in range(n_symbols)]


def alpha_symbols(n_symbols: int) -> list[str]:
    """The symbols carrying ``+ALPHA_ANNUAL`` (number ``0 mod ALPHA_EVERY``)."""
    return symbol_names(n_symbols)[0::ALPHA_EVERY]


def drag_symbols(n_symbols: int) -> list[str]:
    """The symbols carrying ``-ALPHA_ANNUAL`` (number ``1 mod ALPHA_EVERY``)."""
    return symbol_names(n_symbols)[1::ALPHA_EVERY]


def _universe(n_symbols: int, rng: np.random.Generator, alpha_annual: float) -> _Universe:
    index = np.arange(n_symbols)
    alpha = np.where(index % ALPHA_EVERY == 0, alpha_annual, 0.0)
    alpha = np.where(index % ALPHA_EVERY == 1, -alpha_annual, alpha)
    low_shares, high_shares = SHARES_PER_SESSION_RANGE
    return _Universe(
        beta=rng.uniform(*BETA_RANGE, n_symbols),
        sector=index % N_SECTORS,
        idio_vol_annual=IDIO_VOL_ANNUAL * rng.uniform(*IDIO_SCALE_RANGE, n_symbols),
        drift_annual=MARKET_DRIFT_ANNUAL + alpha,
        start_log_price=np.log(rng.uniform(*START_PRICE_RANGE_USD, n_symbols)),
        shares_per_session=np.exp(rng.uniform(math.log(low_shares), math.log(high_shares), n_symbols)),
    )


def _student_t(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Student-t draws scaled to unit variance."""
    return rng.standard_t(T_DOF, size=shape) / np.sqrt(T_DOF / (T_DOF - 2.0))


def _u_shape(position: np.ndarray, curvature: float) -> np.ndarray:
    """``1 + c (2x - 1)^2`` for ``x`` in [0, 1], shape of ``position``."""
    return 1.0 + curvature * (2.0 * position - 1.0) ** 2


def _factor_shocks(rng: np.random.Generator, universe: _Universe, rows: int) -> np.ndarray:
    """Annualised-vol-weighted shocks ``(rows, M)``: market + sector + idiosyncratic, Student-t."""
    market = _student_t(rng, (rows, 1))
    sectors = _student_t(rng, (rows, N_SECTORS))
    idio = _student_t(rng, (rows, universe.beta.shape[0]))
    return (
        universe.beta * MARKET_VOL_ANNUAL * market
        + SECTOR_VOL_ANNUAL * sectors[:, universe.sector]
        + universe.idio_vol_annual * idio
    )


def _total_vol_annual(universe: _Universe) -> np.ndarray:
    """Annual volatility of each symbol's factor shock, ``(M,)``."""
    return np.sqrt(
        (universe.beta * MARKET_VOL_ANNUAL) ** 2 + SECTOR_VOL_ANNUAL**2 + universe.idio_vol_annual**2
    )


class _Generator:
    """Generates the market session chunk by session chunk, carrying GARCH and price state."""

    def __init__(
        self,
        n_symbols: int,
        bars_per_session: np.ndarray,
        seed: int,
        signal: SignalSpec,
        alpha_annual: float,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.universe = _universe(n_symbols, self.rng, alpha_annual)
        self.rho = signal.rho
        scaled = signal.active and signal.kind not in AR_KINDS
        self.planter = SignalPlanter(signal, n_symbols) if scaled else None
        self.last_demeaned = np.zeros(n_symbols)
        self.vol_annual = _total_vol_annual(self.universe)
        self.bars_per_session = bars_per_session
        self.h = np.ones(n_symbols)
        self.last_z = np.zeros(n_symbols)
        self.last_close_log = self.universe.start_log_price.copy()

    def chunk(self, first: int, stop: int) -> tuple[np.ndarray, ...]:
        """OHLCV ``(B, M)`` arrays for sessions ``first..stop-1`` (``B`` = their bars)."""
        u = self.universe
        counts = self.bars_per_session[first:stop]
        n_sessions, n_bars = counts.shape[0], int(counts.sum())
        session_of_bar = np.repeat(np.arange(n_sessions), counts)
        bar_start = np.cumsum(counts) - counts
        position_in_session = np.arange(n_bars) - bar_start[session_of_bar]
        x = (position_in_session + 0.5) / counts[session_of_bar]
        vol_profile = _u_shape(x, INTRADAY_VOL_CURVATURE)
        vol_profile /= np.sqrt(np.add.reduceat(vol_profile**2, bar_start) / counts)[session_of_bar]
        day_share = np.sqrt((1.0 - OVERNIGHT_VARIANCE_SHARE) / TRADING_DAYS_PER_YEAR)
        bar_scale = (day_share * vol_profile / np.sqrt(counts[session_of_bar]))[:, None]
        shocks = _factor_shocks(self.rng, u, n_bars) * bar_scale
        gap_scale = np.sqrt(OVERNIGHT_VARIANCE_SHARE / TRADING_DAYS_PER_YEAR)
        gaps = _factor_shocks(self.rng, u, n_sessions) * gap_scale
        daily_std = self.vol_annual / np.sqrt(TRADING_DAYS_PER_YEAR)
        z = (np.add.reduceat(shocks, bar_start, axis=0) + gaps) / daily_std
        h = np.empty((n_sessions, u.beta.shape[0]))
        for day in range(n_sessions):
            self.h = (1.0 - GARCH_ALPHA - GARCH_BETA) + GARCH_ALPHA * self.last_z**2 + GARCH_BETA * self.h
            h[day] = self.h
            self.last_z = z[day]
        vol_mult = np.sqrt(h)
        drift_per_bar = (u.drift_annual / TRADING_DAYS_PER_YEAR)[None, :] / counts[session_of_bar][:, None]
        returns = shocks * vol_mult[session_of_bar] + drift_per_bar
        gap_returns = gaps * vol_mult
        step = returns.copy()
        step[bar_start] += gap_returns
        bar_vol = np.abs(bar_scale) * self.vol_annual * vol_mult[session_of_bar]
        draws_up = self.rng.standard_normal(returns.shape)
        draws_down = self.rng.standard_normal(returns.shape)
        volume_profile = _u_shape(x, INTRADAY_VOLUME_CURVATURE)
        volume_profile /= (np.add.reduceat(volume_profile, bar_start) / counts)[session_of_bar]
        shares = (u.shares_per_session / counts[session_of_bar][:, None]) * volume_profile[:, None]
        noise = np.exp(VOLUME_NOISE_LOG_STD * self.rng.standard_normal(returns.shape))

        def bar_volume(rows: np.ndarray | slice | int, bar_returns: np.ndarray) -> np.ndarray:
            move = 1.0 + VOLUME_RESPONSE_TO_MOVE * np.abs(bar_returns) / bar_vol[rows]
            return np.asarray(np.round(shares[rows] * noise[rows] * move))

        def log_volume(k: int, planted_k: np.ndarray) -> np.ndarray:
            return np.log1p(bar_volume(k, returns[k] + planted_k))

        if self.rho != 0.0:
            planted = self._planted(step)
            returns += planted
            step += planted
        elif self.planter is not None:
            planted = self.planter.plant(step, log_volume if self.planter.signal.kind == "volume" else None)
            returns += planted
            step += planted
        close_log = self.last_close_log + np.cumsum(step, axis=0)
        open_log = close_log - returns
        self.last_close_log = close_log[-1].copy()
        high_log = np.maximum(open_log, close_log) + INTRABAR_RANGE_SCALE * bar_vol * np.abs(draws_up)
        low_log = np.minimum(open_log, close_log) - INTRABAR_RANGE_SCALE * bar_vol * np.abs(draws_down)
        volume = bar_volume(slice(None), returns)
        return np.exp(open_log), np.exp(high_log), np.exp(low_log), np.exp(close_log), volume

    def _planted(self, step: np.ndarray) -> np.ndarray:
        """The planted terms ``(B, M)`` for base close-to-close returns ``step`` ``(B, M)``.

        ``planted[k] = rho * d[k - 1]`` with ``d[k] = demeaned(step[k]) + planted[k]`` (the planted
        terms have zero cross-sectional mean), carried across chunks in ``last_demeaned``. A loop
        over bars of ``(M,)`` vector operations: cheap next to the rest of the generator.
        """
        base = step - step.mean(axis=1, keepdims=True)
        planted = np.empty_like(step)
        previous = self.last_demeaned
        for k in range(step.shape[0]):
            planted[k] = self.rho * previous
            previous = base[k] + planted[k]
        self.last_demeaned = previous.copy()
        return planted


def _check_arguments(n_symbols: int, n_days: int, freq: str) -> None:
    if n_symbols < 1:
        raise SpecError(f"--symbols {n_symbols}: need at least 1 symbol")
    if n_days < 1:
        raise SpecError(f"--days {n_days}: need at least 1 session")
    if freq not in ("1min", "1d"):
        raise SpecError(f"--freq {freq!r}: the synthetic market has 1min or 1d bars")


def _symbol_column(names: list[str], bars_per_symbol: int) -> pd.Series:
    """``(M * B,)`` symbol column (symbol-major), built through arrow without per-row Python."""
    codes = pa.array(np.repeat(np.arange(len(names), dtype=np.int32), bars_per_symbol))
    column = pa.DictionaryArray.from_arrays(codes, pa.array(names, pa.string())).cast(pa.string())
    return pd.Series(column.to_pandas(), name="symbol")


def synth_market(
    n_symbols: int,
    n_days: int,
    freq: Literal["1min", "1d"],
    seed: int,
    start: str = DEFAULT_START,
    *,
    signal: SignalSpec = NO_SIGNAL,
    alpha_annual: float = ALPHA_ANNUAL,
) -> pd.DataFrame:
    """Generate the synthetic market (see the module docstring for the model and its signals).

    Args:
        n_symbols: number of symbols ``M`` (``SYN000``...).
        n_days: number of XNAS sessions.
        freq: ``"1min"`` (regular-hours minutes; 390 a full day, 210 a half day) or ``"1d"``.
        seed: random seed; the same arguments give identical bars.
        start: first calendar date (the first session is on or after it).
        signal: the planted observable signal (default none).
        alpha_annual: the drift alpha of the ``0 mod 4`` names (and drag of the ``1 mod 4`` names),
            log return a year; 0 switches it off. The random draws do not depend on it or on ``signal``.

    Returns:
        Bar-schema frame sorted by symbol then timestamp, ``M x bars`` rows (prices USD, volume shares).

    Raises:
        SpecError: a non-positive count or an unknown frequency.
        DataError: the sessions run past what the XNAS calendar knows.
    """
    _check_arguments(n_symbols, n_days, freq)
    if not (math.isfinite(alpha_annual) and abs(alpha_annual) < 1.0):
        raise SpecError(f"alpha_annual {alpha_annual}: must be a log drift a year in (-1, 1), e.g. 0.1")
    grid = sessions_from(pd.Timestamp(start), n_days)
    if freq == "1d":
        counts = np.ones(n_days, dtype=np.int64)
        stamps = grid.session_open_ns
    else:
        counts = (grid.session_close_ns - grid.session_open_ns) // NS_PER_MINUTE
        first_bar = np.cumsum(counts) - counts
        minute = np.arange(int(counts.sum())) - np.repeat(first_bar, counts)
        stamps = np.repeat(grid.session_open_ns, counts) + minute * NS_PER_MINUTE
    n_bars = int(counts.sum())
    generator = _Generator(n_symbols, counts, seed, signal, alpha_annual)
    columns = {name: np.empty((n_symbols, n_bars)) for name in ("open", "high", "low", "close", "volume")}
    sessions_per_chunk = max(1, _CHUNK_BARS_PER_SYMBOL // int(counts.max()))
    for first in range(0, n_days, sessions_per_chunk):
        stop = min(n_days, first + sessions_per_chunk)
        lo, hi = int(counts[:first].sum()), int(counts[:stop].sum())
        for name, values in zip(columns, generator.chunk(first, stop), strict=True):
            columns[name][:, lo:hi] = values.T
    timestamps = pd.DatetimeIndex(np.tile(stamps, n_symbols).astype("datetime64[ns]")).tz_localize("UTC")
    frame = pd.DataFrame(
        {
            "timestamp": timestamps,
            "symbol": _symbol_column(symbol_names(n_symbols), n_bars),
            **{name: values.reshape(-1) for name, values in columns.items()},
        },
        copy=False,
    )
    return frame.loc[:, list(BAR_COLUMNS)]


def _signal_note(signal: SignalSpec) -> str:
    """The manifest's line on the planted signal: its kind, target IC and (AR kinds) coefficient."""
    if signal.kind in AR_KINDS:
        return (
            f"planted signal: {signal.kind}, rho = {signal.rho:+g} "
            f"(AR(1) of demeaned bar returns; information coefficient {signal.strength:g})"
        )
    return f"planted signal: {signal.kind}, information coefficient {signal.strength:g} (finpod.data.signals)"


def write_synth_dataset(
    out: Path,
    n_symbols: int,
    n_days: int,
    freq: Literal["1min", "1d"],
    seed: int,
    start: str = DEFAULT_START,
    *,
    signal: SignalSpec = NO_SIGNAL,
    alpha_annual: float = ALPHA_ANNUAL,
) -> Manifest:
    """Generate the synthetic market and write it as a dataset folder (see :func:`synth_market`).

    Args:
        out: the dataset folder to create (must not exist).
        n_symbols: number of symbols.
        n_days: number of XNAS sessions.
        freq: ``"1min"`` or ``"1d"``.
        seed: random seed.
        start: first calendar date.
        signal: the planted observable signal.
        alpha_annual: drift alpha of the ``0 mod 4`` names (log a year; 0 = off).

    Returns:
        The manifest; its notes name the seed, the alpha/drag symbols and the planted signal.
    """
    bars = synth_market(n_symbols, n_days, freq, seed, start, signal=signal, alpha_annual=alpha_annual)
    report = validate_bars(bars, f"synthetic market seed {seed}")
    alpha, drag = alpha_symbols(n_symbols), drag_symbols(n_symbols)
    notes = [
        f"synthetic market: seed {seed}, {n_symbols} symbols, {n_days} sessions from {start}, {freq}",
        f"drift alpha: {', '.join(alpha)} +{alpha_annual:.0%} a year (log) above the market",
        f"drift alpha: {', '.join(drag) or 'none'} -{alpha_annual:.0%} a year (log) below the market",
        _signal_note(signal),
    ]
    return write_dataset(
        bars,
        out,
        source="synthetic",
        frequency=freq,
        adjustment="synthetic",
        repairs={ZERO_VOLUME_BARS: report.zero_volume_bars},
        notes=notes,
    )
