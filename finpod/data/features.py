"""The standard causal feature set, computed in torch on aligned ``(T, M)`` bars.

Every feature at bar ``t`` uses bars ``<= t`` only: differences look back, rolling windows end at
``t`` (differences of running sums), EMAs are exact causal recursions (evaluated block-wise with a
lower-triangular matrix, so future rows enter with weight exactly 0). Features, in order:

=============== ================================================================ ==============
name            definition (``c`` close, ``v`` volume, ``r`` 1-bar log return)   warm-up (bars)
=============== ================================================================ ==============
xs_logret_h     ``log c[t] - log c[t-h]`` for h in :data:`RETURN_HORIZONS_BARS`,  h
                minus its mean over the bar's warm, trading symbols (cross-sectional)
volatility      population std of ``r`` over :data:`VOLATILITY_WINDOW_BARS`      window
rsi             Wilder RSI (EMAs of gains/losses of ``r``), 0..100; 50 if flat   period
macd            ``(EMA_fast(c) - EMA_slow(c)) / c``                              slow
macd_hist       ``macd - EMA_signal(macd)``                                      slow + signal
bollinger       ``(c - SMA(c)) / (width * std(c))`` over the Bollinger window    window - 1
volume_z        z-score of ``log1p(v)`` in its rolling window; 0 if flat         window - 1
minute_sin/cos  1min: minute since the regular open / 390 as an angle            0
weekday_sin/cos 1d: weekday / 5 as an angle (clock: market-wide, not normalised) 0
=============== ================================================================ ==============

A cell is *warm* when the symbol has had its first real bar at least ``warm-up`` bars before
(``t - first_bar >= warm-up``); only then is the window made of the symbol's own bars.

The returns are **cross-sectional** (:attr:`FeatureSpec.cross_sectional`): each bar's mean over its
warm symbols still trading is taken out (:func:`demean_across_symbols_`). A long-only book's relative weights
depend on how an asset moved against the others, not on the market's move, which every asset
shares. The raw returns make a per-asset network learn that difference through its nonlinearity,
and a market move shifts every asset into another part of it. Measured on the skill bench's
tuning seeds, the demeaned returns doubled a pod's held-out share early in training on the volume
kind and raised its peak on the multi-bar reversal (BENCHMARKS.md "Cross-sectional returns").
The other features keep the market's level (volatility, RSI, MACD, Bollinger). Per-asset
features are normalised ``(x - mean) / std`` with the mean and std of warm cells in the TRAIN rows
only, clipped to ``+-clip_sigmas``; cold cells (warm-up, or before the symbol's first bar) get the
neutral value 0 (the train mean). A feature with zero train variance is only centred. The output
is float32, NaN-free, on the device of the inputs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import torch

from finpod.data.calendar import FULL_SESSION_MINUTES, NS_PER_MINUTE, session_day_numbers
from finpod.errors import DataError

RETURN_HORIZONS_BARS: Final[tuple[int, ...]] = (1, 5, 15, 60)
VOLATILITY_WINDOW_BARS: Final[int] = 30
RSI_PERIOD_BARS: Final[int] = 14
MACD_FAST_BARS: Final[int] = 12
MACD_SLOW_BARS: Final[int] = 26
MACD_SIGNAL_BARS: Final[int] = 9
BOLLINGER_WINDOW_BARS: Final[int] = 20
BOLLINGER_WIDTH_SIGMAS: Final[float] = 2.0
VOLUME_WINDOW_BARS: Final[int] = 30
CLIP_SIGMAS: Final[float] = 5.0
TRADING_DAYS_PER_WEEK: Final[int] = 5
RSI_NEUTRAL: Final[float] = 50.0
EMA_CHUNK_BARS: Final[int] = 128
"""Rows per block of the chunked EMA (its cost is ``T * M * EMA_CHUNK_BARS`` multiply-adds)."""
COLUMN_CHUNK_SYMBOLS: Final[int] = 50
"""Symbols per block when computing raw features (bounds temporaries to ~20 ``(T, 50)`` tensors)."""
ROW_CHUNK_BARS: Final[int] = 8192
"""Rows per chunk when fitting statistics and normalising (bounds ``(rows, M, F)`` temporaries)."""
_EPOCH_WEEKDAY: Final[int] = 3
"""1970-01-01 was a Thursday (Monday = 0)."""


@dataclass(frozen=True)
class FeatureSpec:
    """One feature column.

    Attributes:
        name: column name in ``Panel.feature_names``.
        warmup_bars: bars after a symbol's first bar before the value is warm.
        per_asset: True for features of one symbol (normalised, neutral before warm-up); False for
            market-wide clock features (kept as computed everywhere).
        cross_sectional: the bar's mean over its warm symbols is subtracted before normalisation
            (:func:`demean_across_symbols_`).
    """

    name: str
    warmup_bars: int
    per_asset: bool
    cross_sectional: bool = False


@dataclass(frozen=True)
class FeatureStats:
    """Normalisation statistics fitted on the train segment.

    Attributes:
        names: the ``F`` feature names the statistics belong to.
        mean: float32 ``(F,)`` train mean of each feature (0 for clock features).
        std: float32 ``(F,)`` train std of each feature (1 for clock features and flat features).
    """

    names: tuple[str, ...]
    mean: torch.Tensor
    std: torch.Tensor

    def to(self, device: torch.device | str) -> FeatureStats:
        """The same statistics on ``device``."""
        return FeatureStats(self.names, self.mean.to(device), self.std.to(device))


def feature_specs(freq: str) -> tuple[FeatureSpec, ...]:
    """The feature columns for bars of frequency ``freq`` (``"1min"`` or ``"1d"``), in order."""
    clock = "minute" if freq == "1min" else "weekday"
    return (
        *(FeatureSpec(f"xs_logret_{h}", h, True, cross_sectional=True) for h in RETURN_HORIZONS_BARS),
        FeatureSpec(f"volatility_{VOLATILITY_WINDOW_BARS}", VOLATILITY_WINDOW_BARS, True),
        FeatureSpec(f"rsi_{RSI_PERIOD_BARS}", RSI_PERIOD_BARS, True),
        FeatureSpec("macd", MACD_SLOW_BARS, True),
        FeatureSpec("macd_hist", MACD_SLOW_BARS + MACD_SIGNAL_BARS, True),
        FeatureSpec(f"bollinger_{BOLLINGER_WINDOW_BARS}", BOLLINGER_WINDOW_BARS - 1, True),
        FeatureSpec(f"volume_z_{VOLUME_WINDOW_BARS}", VOLUME_WINDOW_BARS - 1, True),
        FeatureSpec(f"{clock}_sin", 0, False),
        FeatureSpec(f"{clock}_cos", 0, False),
    )


def bar_phase(
    timestamps_ns: np.ndarray, session_ids: np.ndarray, session_open_ns: np.ndarray, freq: str
) -> np.ndarray:
    """Clock angle of each bar in radians, float64 ``(T,)``.

    Args:
        timestamps_ns: int64 ``(T,)`` UTC bar starts.
        session_ids: int64 ``(T,)`` session of each bar.
        session_open_ns: int64 ``(S,)`` regular open of each session (UTC ns).
        freq: ``"1min"``: ``2 pi * minutes since the regular open / 390``; ``"1d"``:
            ``2 pi * weekday / 5`` (Monday 0).
    """
    if freq == "1min":
        minutes = (timestamps_ns - session_open_ns[session_ids]) / NS_PER_MINUTE
        return 2.0 * math.pi * minutes / FULL_SESSION_MINUTES
    weekday = (session_day_numbers(timestamps_ns) + _EPOCH_WEEKDAY) % 7
    return 2.0 * math.pi * weekday / TRADING_DAYS_PER_WEEK


def lag_difference(x: torch.Tensor, lag_bars: int) -> torch.Tensor:
    """``x[t] - x[t - lag_bars]`` along rows, 0 for the first ``lag_bars`` rows; ``(T, M)``."""
    out = torch.zeros_like(x)
    out[lag_bars:] = x[lag_bars:] - x[:-lag_bars]
    return out


@functools.lru_cache(maxsize=64)
def _decay_matrix(size: int, decay: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(size, size)`` lower-triangular ``W[i, j] = decay ** (i - j)`` for ``j <= i``, else exactly 0.

    Cached (read-only): the online features of paper trading rebuild the same few matrices every bar.
    """
    lags = torch.arange(size, device=device, dtype=torch.float64)
    lag_matrix = lags[:, None] - lags[None, :]
    return torch.where(lag_matrix >= 0, decay ** lag_matrix.clamp(min=0), 0.0).to(dtype)


def discounted_cumsum(x: torch.Tensor, decay: float, initial: torch.Tensor) -> torch.Tensor:
    """``y[t] = x[t] + decay * y[t-1]`` down the rows of ``x`` ``(T, M)``, with ``y[-1] = initial`` ``(M,)``.

    Exact and causal: blocks of :data:`EMA_CHUNK_BARS` rows are solved with a lower-triangular
    matrix (future rows enter with weight exactly 0) and the block-end states, themselves a
    discounted cumsum with ``decay ** block``, are solved the same way, recursively (no Python loop
    over rows or blocks).
    """
    num_rows, num_cols = x.shape
    block = EMA_CHUNK_BARS
    rows = torch.arange(1, min(num_rows, block) + 1, device=x.device, dtype=torch.float64)
    if num_rows <= block:
        weights = _decay_matrix(num_rows, decay, x.dtype, x.device)
        return torch.matmul(weights, x) + (decay**rows).to(x.dtype)[:, None] * initial[None, :]
    num_blocks = -(-num_rows // block)
    padded = torch.zeros(num_blocks * block, num_cols, dtype=x.dtype, device=x.device)
    padded[:num_rows] = x
    partial = torch.matmul(
        _decay_matrix(block, decay, x.dtype, x.device), padded.view(num_blocks, block, num_cols)
    )
    block_end = discounted_cumsum(partial[:, -1, :], decay**block, initial)
    carry_in = torch.cat([initial[None, :], block_end[:-1]])
    partial += (decay**rows).to(x.dtype)[None, :, None] * carry_in[:, None, :]
    return partial.view(num_blocks * block, num_cols)[:num_rows]


def ema(x: torch.Tensor, span_bars: float, *, alpha: float | None = None) -> torch.Tensor:
    """Causal exponential moving average down the rows of ``x`` ``(T, M)``, seeded with row 0.

    ``y[t] = a * x[t] + (1 - a) * y[t-1]``, ``y[-1] = x[0]``, ``a = alpha`` or ``2 / (span + 1)``;
    exact (no truncation), through :func:`discounted_cumsum`.

    Returns:
        float32 ``(T, M)`` on ``x``'s device.
    """
    a = 2.0 / (span_bars + 1.0) if alpha is None else alpha
    return discounted_cumsum(a * x, 1.0 - a, x[0])


def rolling_std_mean(x: torch.Tensor, window_bars: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Population std and mean of the trailing ``window_bars`` rows (ending at ``t``) of ``(T, M)``.

    Window sums are differences of float64 running sums (so the device must support float64:
    CPU and CUDA do) of ``x - x[0]`` and its square; the shift by row 0 keeps the squares small
    and the variance free of cancellation for prices and returns. Rows before a full
    window average the rows they have (they are warm-up rows).

    On a CPU the sums run symbol-major, over an ``(M, T)`` copy (torch's CPU cumsum down the rows
    of a ``(T, M)`` tensor was 3-4x slower than along contiguous memory): the same additions in the
    same order, so the same bits. Elsewhere (CUDA, whose scan along a contiguous dimension adds in
    another order) the rows are summed as they are.

    Returns:
        ``(std, mean)``, float32 ``(T, M)`` each (on a CPU, transposed views of ``(M, T)`` tensors).
    """
    if x.device.type != "cpu":
        return _rolling_std_mean_along(x.to(torch.float64), window_bars, dim=0)
    std, mean = _rolling_std_mean_along(x.t().to(torch.float64), window_bars, dim=1)
    return std.t(), mean.t()


def _rolling_std_mean_along(
    series: torch.Tensor, window_bars: int, dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rolling_std_mean` of float64 ``series`` whose time axis is ``dim`` (0: ``(T, M)``,
    rows summed by the device's own scan; 1: ``(M, T)``, each symbol over contiguous memory)."""

    def bars(index: slice) -> tuple[slice, ...]:
        return (slice(None),) * dim + (index,)

    first = series[bars(slice(0, 1))]
    shifted = (series - first).contiguous()
    sums = torch.cumsum(shifted, dim=dim)
    squares = torch.cumsum(shifted.square_(), dim=dim)
    del shifted
    sums[bars(slice(window_bars, None))] -= sums[bars(slice(None, -window_bars))].clone()
    squares[bars(slice(window_bars, None))] -= squares[bars(slice(None, -window_bars))].clone()
    rows = torch.arange(1, series.shape[dim] + 1, device=series.device, dtype=torch.float64)
    count = rows.clamp(max=window_bars).unsqueeze(1 - dim)
    mean = sums.div_(count)
    variance = squares.div_(count).sub_(mean.square()).clamp_(min=0.0)
    return variance.sqrt_().to(torch.float32), (mean + first).to(torch.float32)


def _safe_ratio(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """``numerator / denominator`` where the denominator is positive, else 0."""
    positive = denominator > 0
    return torch.where(positive, numerator / torch.where(positive, denominator, 1.0), 0.0)


def _asset_features_(close: torch.Tensor, volume: torch.Tensor, out: torch.Tensor) -> None:
    """Write the per-asset features of a block of symbols into ``out`` ``(T, m, >=10)``, table order."""
    log_close = torch.log(close)
    for f, horizon in enumerate(RETURN_HORIZONS_BARS):  # lag_difference, written in place
        out[:horizon, :, f] = 0.0
        torch.sub(log_close[horizon:], log_close[:-horizon], out=out[horizon:, :, f])
    step_return = lag_difference(log_close, 1)
    del log_close
    col = len(RETURN_HORIZONS_BARS)
    out[:, :, col] = rolling_std_mean(step_return, VOLATILITY_WINDOW_BARS)[0]
    rsi_alpha = 1.0 / RSI_PERIOD_BARS
    gain = ema(step_return.clamp(min=0.0), RSI_PERIOD_BARS, alpha=rsi_alpha)
    loss = ema(step_return.neg_().clamp_(min=0.0), RSI_PERIOD_BARS, alpha=rsi_alpha)
    total = gain + loss
    out[:, :, col + 1] = torch.where(total > 0, 100.0 * _safe_ratio(gain, total), RSI_NEUTRAL)
    del gain, loss, total, step_return
    macd = (ema(close, MACD_FAST_BARS) - ema(close, MACD_SLOW_BARS)).div_(close)
    out[:, :, col + 2] = macd
    out[:, :, col + 3] = macd - ema(macd, MACD_SIGNAL_BARS)
    del macd
    price_std, price_mean = rolling_std_mean(close, BOLLINGER_WINDOW_BARS)
    out[:, :, col + 4] = _safe_ratio(close - price_mean, BOLLINGER_WIDTH_SIGMAS * price_std)
    del price_std, price_mean
    log_volume = torch.log1p(volume)
    volume_std, volume_mean = rolling_std_mean(log_volume, VOLUME_WINDOW_BARS)
    out[:, :, col + 5] = _safe_ratio(log_volume - volume_mean, volume_std)


def raw_features(close: torch.Tensor, volume: torch.Tensor, phase: torch.Tensor, freq: str) -> torch.Tensor:
    """Unnormalised features of every bar and symbol (see the module table).

    Computed in blocks of :data:`COLUMN_CHUNK_SYMBOLS` symbols to bound temporary memory.

    Args:
        close: float32 ``(T, M)`` positive close prices (USD).
        volume: float32 ``(T, M)`` shares per bar.
        phase: float ``(T,)`` clock angle in radians (:func:`bar_phase`).
        freq: ``"1min"`` or ``"1d"`` (names the clock features).

    Returns:
        float32 ``(T, M, F)`` on ``close``'s device, F = ``len(feature_specs(freq))``.
    """
    specs = feature_specs(freq)
    num_asset = sum(spec.per_asset for spec in specs)
    num_rows, num_cols = close.shape
    out = torch.empty(num_rows, num_cols, len(specs), dtype=torch.float32, device=close.device)
    for lo in range(0, num_cols, COLUMN_CHUNK_SYMBOLS):
        hi = min(num_cols, lo + COLUMN_CHUNK_SYMBOLS)
        _asset_features_(close[:, lo:hi], volume[:, lo:hi], out[:, lo:hi])
    angle = phase.to(device=close.device, dtype=torch.float32)
    out[:, :, num_asset] = torch.sin(angle)[:, None]
    out[:, :, num_asset + 1] = torch.cos(angle)[:, None]
    return out


def zero_cold_(
    features: torch.Tensor, first_bar: torch.Tensor, specs: tuple[FeatureSpec, ...]
) -> torch.Tensor:
    """Set every cold per-asset cell of ``features`` ``(T, M, F)`` to 0, in place.

    A cell ``(t, m, f)`` is cold when ``t - first_bar[m] < warmup_bars[f]``; cold cells sit at the top
    of each column, so only those rows are touched (one small masked fill per symbol).
    """
    num_rows = features.shape[0]
    warmup = torch.tensor([s.warmup_bars for s in specs], device=features.device)
    per_asset = torch.tensor([s.per_asset for s in specs], device=features.device)
    longest = max(s.warmup_bars for s in specs if s.per_asset)
    for m, first in enumerate(first_bar.tolist()):
        stop = min(num_rows, first + longest)
        if stop <= 0:
            continue
        age = torch.arange(stop, device=features.device)[:, None] - first
        features[:stop, m, :].masked_fill_((age < warmup[None, :]) & per_asset[None, :], 0.0)
    return features


def demean_across_symbols_(
    features: torch.Tensor,
    first_bar: torch.Tensor,
    specs: tuple[FeatureSpec, ...],
    real: torch.Tensor | None = None,
) -> torch.Tensor:
    """Subtract from every warm cell of each cross-sectional feature of ``features`` ``(T, M, F)``
    the bar's mean over its *live* warm cells, in place (cold cells and the other features untouched).

    A cell of an ``h``-bar feature is live when its symbol had a real bar among the last ``h`` bars
    (``real``): a symbol that stopped trading (delisted, its close carried forward) has a return of
    0 that is no part of the market's move, and would pull the mean towards 0. Without ``real``
    every warm cell is live. A bar with no live warm symbol is left as it is.

    Args:
        features: ``(T, M, F)``; row ``t`` is bar ``t`` for ``first_bar`` (:func:`zero_cold_`'s
            convention), so one row can be demeaned alone, as the paper trader's online features do.
        first_bar: int64 ``(M,)`` each symbol's first real bar, in ``features``' row numbers.
        specs: the ``F`` feature specs.
        real: bool ``(R, M)``, ``R >= T``, whether each symbol had a real bar; its last ``T`` rows
            are ``features``' rows, the ``R - T`` before them the bars just before.
    """
    columns = [f for f, spec in enumerate(specs) if spec.cross_sectional]
    if not columns:
        return features
    first = first_bar.to(features.device)
    num_rows = features.shape[0]
    # real bars seen before each row: seen[k] = real[:k].sum(0), so the last h bars of feature row t
    # hold seen[history + t + 1] - seen[max(history + t + 1 - h, 0)] real bars
    history, seen = 0, None
    if real is not None:
        history = real.shape[0] - num_rows
        if history < 0:
            raise ValueError(f"real has {real.shape[0]} rows, fewer than the {num_rows} feature rows")
        counts = real.to(device=features.device, dtype=torch.int32).cumsum(dim=0, dtype=torch.int32)
        seen = torch.cat([counts.new_zeros(1, counts.shape[1]), counts])
    for lo, hi in _row_chunks((0, num_rows)):
        rows = torch.arange(lo, hi, device=features.device)
        age = rows[:, None] - first[None, :]
        for f in columns:
            horizon = specs[f].warmup_bars
            warm = age >= horizon
            live = warm
            if seen is not None:
                end = history + rows + 1
                recent = seen[end] - seen[(end - horizon).clamp_min(0)]
                live = warm & (recent > 0)
            cells = features[lo:hi, :, f]
            count = live.sum(dim=1, keepdim=True)
            total = torch.where(live, cells, 0.0).sum(dim=1, keepdim=True, dtype=torch.float64)
            mean = (total / count.clamp_min(1)).to(cells.dtype)
            cells.sub_(torch.where(warm, mean, 0.0))
    return features


def warm_counts(
    first_bar: torch.Tensor, specs: tuple[FeatureSpec, ...], rows: tuple[int, int]
) -> torch.Tensor:
    """float64 ``(F,)``: number of warm cells of each feature among ``rows`` (start, stop) of all symbols."""
    lo, hi = rows
    warmup = torch.tensor([s.warmup_bars if s.per_asset else 0 for s in specs], device=first_bar.device)
    first = torch.where(
        torch.tensor([s.per_asset for s in specs], device=first_bar.device)[None, :],
        first_bar[:, None] + warmup[None, :],
        lo,
    )
    return (hi - first.clamp(min=lo, max=hi)).sum(dim=0).to(torch.float64)


def _row_chunks(rows: tuple[int, int]) -> list[tuple[int, int]]:
    """``rows`` split into consecutive ranges of at most :data:`ROW_CHUNK_BARS` bars."""
    return [(lo, min(rows[1], lo + ROW_CHUNK_BARS)) for lo in range(rows[0], rows[1], ROW_CHUNK_BARS)]


def fit_feature_stats(
    raw: torch.Tensor, first_bar: torch.Tensor, specs: tuple[FeatureSpec, ...], train_rows: tuple[int, int]
) -> FeatureStats:
    """Mean and std of each per-asset feature over the warm cells of the train rows only.

    Sets the cold cells of ``raw`` to 0 first (in place, :func:`zero_cold_`): sums then run over
    whole row chunks and the cold cells' share is removed exactly (two passes: mean, then squared
    deviations; float32 chunk sums accumulated in float64).

    Args:
        raw: float32 ``(T, M, F)`` from :func:`raw_features`; its cold cells are zeroed.
        first_bar: int64 ``(M,)`` row of each symbol's first real bar.
        specs: the ``F`` feature specs.
        train_rows: ``(start, stop)`` bar range of the train segment (stop exclusive).

    Raises:
        DataError: a feature has no warm cell in the train rows (train segment too short).
    """
    zero_cold_(raw, first_bar, specs)
    per_asset = torch.tensor([s.per_asset for s in specs], device=raw.device)
    count = warm_counts(first_bar, specs, train_rows)
    empty = per_asset & (count == 0)
    if empty.any():
        spec = specs[int(torch.nonzero(empty)[0])]
        raise DataError(
            f"train segment has no bar where feature {spec.name} is warmed up (it needs "
            f"{spec.warmup_bars} bars after a symbol's first bar); lengthen the train segment"
        )
    num_features = len(specs)
    total = torch.zeros(num_features, dtype=torch.float64, device=raw.device)
    for lo, hi in _row_chunks(train_rows):
        total += raw[lo:hi].reshape(-1, num_features).sum(dim=0).to(torch.float64)
    mean = total / count.clamp(min=1.0)
    squares = torch.zeros_like(total)
    mean32 = mean.to(raw.dtype)
    for lo, hi in _row_chunks(train_rows):
        deviation = raw[lo:hi].reshape(-1, num_features) - mean32
        squares += deviation.square_().sum(dim=0).to(torch.float64)
    cells = (train_rows[1] - train_rows[0]) * raw.shape[1]
    squares -= (cells - count) * mean.square()  # the cold cells (value 0) added mean^2 each
    std = (squares.clamp(min=0.0) / count.clamp(min=1.0)).sqrt()
    usable = per_asset & torch.isfinite(std) & (std > 0)
    return FeatureStats(
        names=tuple(s.name for s in specs),
        mean=torch.where(per_asset, mean, 0.0).to(torch.float32),
        std=torch.where(usable, std, 1.0).to(torch.float32),
    )


def normalise_features_(
    raw: torch.Tensor,
    stats: FeatureStats,
    first_bar: torch.Tensor,
    specs: tuple[FeatureSpec, ...],
    clip_sigmas: float,
) -> torch.Tensor:
    """Normalise ``raw`` ``(T, M, F)`` in place with ``stats``, clip, and neutralise cold cells.

    Raises:
        DataError: ``stats`` were fitted for other features.
    """
    names = tuple(s.name for s in specs)
    if stats.names != names:
        raise DataError(
            f"feature statistics are for {', '.join(stats.names)}, not {', '.join(names)}; "
            "refit them on this frequency's train segment"
        )
    per_asset = torch.tensor([s.per_asset for s in specs], device=raw.device)
    bound = torch.where(per_asset, clip_sigmas, torch.inf).to(raw.dtype)
    for lo, hi in _row_chunks((0, raw.shape[0])):
        raw[lo:hi].sub_(stats.mean).div_(stats.std).clamp_(-bound, bound)
    return zero_cold_(raw, first_bar, specs)


def build_features(
    close: torch.Tensor,
    volume: torch.Tensor,
    first_bar: torch.Tensor,
    phase: torch.Tensor,
    freq: str,
    train_rows: tuple[int, int],
    *,
    stats: FeatureStats | None = None,
    clip_sigmas: float = CLIP_SIGMAS,
    real: torch.Tensor | None = None,
) -> tuple[torch.Tensor, FeatureStats]:
    """Causal, train-normalised features of aligned bars.

    Args:
        close: float32 ``(T, M)`` close prices (USD), positive.
        volume: float32 ``(T, M)`` shares per bar.
        first_bar: int64 ``(M,)`` row of each symbol's first real bar.
        phase: ``(T,)`` clock angle in radians (:func:`bar_phase`).
        freq: ``"1min"`` or ``"1d"``.
        train_rows: ``(start, stop)`` rows of the train segment; statistics come from them only.
        stats: statistics to reuse instead of fitting (e.g. a trained agent's, for new data).
        clip_sigmas: normalised values are clipped to ``[-clip_sigmas, clip_sigmas]``.
        real: bool ``(T, M)`` whether each symbol had a real bar (not a carried-forward close): the
            cross-sectional returns are demeaned over symbols still trading
            (:func:`demean_across_symbols_`); ``None``: every bar is real.

    Returns:
        ``(features, stats)``: float32 ``(T, M, F)`` NaN-free features and the statistics used.
    """
    specs = feature_specs(freq)
    raw = raw_features(close, volume, phase, freq)
    first = first_bar.to(close.device)
    demean_across_symbols_(raw, first, specs, real)
    used = fit_feature_stats(raw, first, specs, train_rows) if stats is None else stats.to(close.device)
    return normalise_features_(raw, used, first, specs, clip_sigmas), used
