"""The planted, observable signals of the synthetic market: their models, strengths and predictors.

Every kind plants a term in the open-to-close log return of bar ``t + 1`` that a causal function of
bars ``<= t`` predicts; the planted terms sum to zero across symbols (the market and sector moves are
untouched). Notation, per bar ``t`` and symbol ``m``: ``d[t, m]`` is the symbol's close-to-close log
return of bar ``t`` (overnight gap and planted term included) minus the cross-sectional mean of that
bar; ``D_h[t, m] = d[t] + ... + d[t - h + 1]`` is the cross-sectionally demeaned ``h``-bar return (the
feature ``xs_logret_h``, before normalisation); ``v[t, m]`` is the z-score of ``log1p(volume)``
in its trailing window of :data:`VOLUME_WINDOW_BARS` bars (the feature ``volume_z_30``, population
std); ``zs(x)`` is a cross-sectional z-score (mean 0, std 1 across the ``M`` symbols of one bar).

The **strength** of every kind is its target information coefficient (IC): the cross-sectional
Pearson correlation, averaged over bars, between the kind's predictor at bar ``t`` and ``d[t + 1]``.
Real daily effects have ICs of about 0.02-0.08 (the skill bench's range); the demo's one-bar
reversal of 0.2 is a smoke test, far stronger than any real market offers.

=============== ===================================================================== ==============
kind            predictor ``p[t]`` (the model)                                         planted term
=============== ===================================================================== ==============
``reversal``    ``-d[t]``: one-bar reversal                                            AR(1)
``momentum``    ``+d[t]``: one-bar momentum                                            AR(1)
``reversal_5``  ``-D_5[t]``: multi-bar (weekly on daily bars) reversal                 scaled
``momentum_60`` ``+D_60[t]``: multi-bar (about a quarter on daily bars) momentum       scaled
``volume``      ``d[t] (v[t] - 1)``: high volume (above +1 sigma) continues, the rest   scaled
                reverses, the more so the quieter the bar (mostly a reversal on average)
``nonlinear``   ``zs(d[t]) zs(D_5[t] - d[t])``: a move that agrees with the four bars    scaled
                before it goes on, one that disagrees reverses; uncorrelated with every
                single feature, so a linear model of the features cannot fit it
=============== ===================================================================== ==============

**AR(1)** (the original kinds, unchanged bit for bit): bar ``t + 1`` gets ``rho * d[t]`` with
``rho = -strength`` (reversal) or ``+strength`` (momentum), so ``d`` is a stationary AR(1) with lag-1
autocorrelation ``rho``: the IC is ``strength``.

**Scaled** (the other kinds): bar ``t + 1`` gets ``a * s[t + 1] * zs(p[t])`` with
``a = IC / sqrt(1 - IC^2)`` and ``s[t + 1]`` the cross-sectional std of bar ``t + 1``'s demeaned
close-to-close return BEFORE the planted term, so the correlation of ``zs(p[t])`` with ``d[t + 1]``
is ``a / sqrt(1 + a^2) = IC`` on every bar. Until a symbol has :func:`warmup_bars` bars of history
nothing is planted (the predictor's window is not full).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, get_args

import numpy as np

from finpod.data.choices import SignalKind
from finpod.errors import SpecError

SIGNAL_KINDS: Final[tuple[str, ...]] = get_args(SignalKind)
AR_KINDS: Final[tuple[str, ...]] = ("reversal", "momentum")
"""The kinds planted as an AR(1) of demeaned returns (the original model)."""
MAX_SIGNAL_STRENGTH: Final[float] = 0.9
"""The IC (AR(1) coefficient for the AR kinds, which must stay below 1 for stationarity) is capped here."""
SHORT_HORIZON_BARS: Final[int] = 5
"""The window of ``reversal_5`` and of the ``nonlinear`` kind's trend (the feature ``xs_logret_5``)."""
LONG_HORIZON_BARS: Final[int] = 60
"""The window of ``momentum_60`` (the feature ``xs_logret_60``)."""
VOLUME_WINDOW_BARS: Final[int] = 30
"""The trailing window of the volume z-score (the feature ``volume_z_30``)."""
VOLUME_PIVOT_SIGMAS: Final[float] = 1.0
"""``volume``: above this volume z-score a move continues, below it the move reverses."""
HISTORY_BARS: Final[int] = max(LONG_HORIZON_BARS, VOLUME_WINDOW_BARS)
ZSCORE_STD_FLOOR: Final[float] = 1e-12
"""A cross-section whose spread is below this (in log return units) has no ranking: z-score 0."""


@dataclass(frozen=True)
class SignalSpec:
    """The planted, observable signal (see the module docstring for every kind's model).

    Attributes:
        kind: one of :data:`SIGNAL_KINDS` (``"none"`` plants nothing).
        strength: the target information coefficient in ``[0, MAX_SIGNAL_STRENGTH]`` (for the AR(1)
            kinds also ``|rho|``, the lag-1 autocorrelation of demeaned bar returns).
    """

    kind: SignalKind = "none"
    strength: float = 0.0

    def __post_init__(self) -> None:
        """Reject an unknown kind or a strength outside ``[0, MAX_SIGNAL_STRENGTH]`` (one line, the fix)."""
        if self.kind not in SIGNAL_KINDS:
            raise SpecError(f"--signal {self.kind!r}: pick one of {', '.join(SIGNAL_KINDS)}")
        if not (math.isfinite(self.strength) and 0.0 <= self.strength <= MAX_SIGNAL_STRENGTH):
            raise SpecError(
                f"--signal-strength {self.strength}: must be in [0, {MAX_SIGNAL_STRENGTH}] "
                "(the target information coefficient), e.g. 0.04"
            )

    @property
    def active(self) -> bool:
        """Whether anything is planted."""
        return self.kind != "none" and self.strength > 0.0

    @property
    def rho(self) -> float:
        """The AR(1) kinds' signed coefficient: ``-strength`` (reversal), ``+strength`` (momentum), else 0."""
        if self.kind not in AR_KINDS:
            return 0.0
        return -self.strength if self.kind == "reversal" else self.strength

    @property
    def loading(self) -> float:
        """The scaled kinds' ``a = IC / sqrt(1 - IC^2)`` (planted std per std of the base cross-section)."""
        return self.strength / math.sqrt(1.0 - self.strength**2)


NO_SIGNAL: Final[SignalSpec] = SignalSpec()


def warmup_bars(kind: str) -> int:
    """Bars of history a symbol needs before ``kind``'s predictor is defined (0 for the AR kinds)."""
    return {
        "reversal_5": SHORT_HORIZON_BARS,
        "momentum_60": LONG_HORIZON_BARS,
        "volume": VOLUME_WINDOW_BARS,
        "nonlinear": SHORT_HORIZON_BARS,
    }.get(kind, 0)


def cross_sectional_z(values: np.ndarray) -> np.ndarray:
    """``zs`` along the last axis: demeaned and divided by the population std; 0 where flat."""
    centred = values - values.mean(axis=-1, keepdims=True)
    spread = np.sqrt(np.mean(centred**2, axis=-1, keepdims=True))
    return np.where(spread > ZSCORE_STD_FLOOR, centred / np.maximum(spread, ZSCORE_STD_FLOOR), 0.0)


def predictor(kind: str, demeaned: np.ndarray, volume_z: np.ndarray) -> np.ndarray:
    """``p[t]`` of a scaled kind from the trailing history (oldest row first, newest last).

    Args:
        kind: a scaled kind (not ``none`` or an AR kind).
        demeaned: ``(H, M)`` demeaned close-to-close log returns ``d``, the last row is bar ``t``.
        volume_z: ``(M,)`` the volume z-score ``v[t]``.

    Returns:
        ``(M,)`` the predictor (not yet z-scored).
    """
    if kind == "reversal_5":
        return -demeaned[-SHORT_HORIZON_BARS:].sum(axis=0)
    if kind == "momentum_60":
        return demeaned[-LONG_HORIZON_BARS:].sum(axis=0)
    if kind == "volume":
        return demeaned[-1] * (volume_z - VOLUME_PIVOT_SIGMAS)
    before = demeaned[-SHORT_HORIZON_BARS:-1].sum(axis=0)
    return cross_sectional_z(demeaned[-1]) * cross_sectional_z(before)


class RollingVolumeZ:
    """The trailing z-score of ``log1p(volume)`` per symbol, bar by bar (population std; 0 if flat)."""

    def __init__(self, n_symbols: int) -> None:
        self._window = np.zeros((VOLUME_WINDOW_BARS, n_symbols))
        self._count = 0

    @property
    def warm(self) -> bool:
        """Whether a full window has been seen."""
        return self._count >= VOLUME_WINDOW_BARS

    def push(self, log_volume: np.ndarray) -> np.ndarray:
        """Add bar ``t``'s ``log1p(volume)`` ``(M,)``; returns ``v[t]`` ``(M,)``."""
        self._window[self._count % VOLUME_WINDOW_BARS] = log_volume
        self._count += 1
        filled = self._window[: min(self._count, VOLUME_WINDOW_BARS)]
        mean = filled.mean(axis=0)
        std = np.sqrt(np.maximum(np.mean(filled**2, axis=0) - mean**2, 0.0))
        return np.where(std > 0.0, (log_volume - mean) / np.where(std > 0.0, std, 1.0), 0.0)


class SignalPlanter:
    """Plants a scaled kind bar by bar, carrying its history across the generator's chunks.

    Args:
        signal: an active scaled kind (see :data:`AR_KINDS` for the others).
        n_symbols: ``M``.
    """

    def __init__(self, signal: SignalSpec, n_symbols: int) -> None:
        self.signal = signal
        self._history = np.zeros((HISTORY_BARS, n_symbols))
        self._bars_seen = 0
        self._volume = RollingVolumeZ(n_symbols)
        self._volume_z = np.zeros(n_symbols)

    def plant(
        self, step: np.ndarray, volume_of: Callable[[int, np.ndarray], np.ndarray] | None = None
    ) -> np.ndarray:
        """The planted terms ``(B, M)`` of a chunk with base close-to-close returns ``step`` ``(B, M)``.

        Args:
            step: base close-to-close log returns of the chunk's bars (nothing planted yet).
            volume_of: ``(k, planted_k (M,)) -> log1p(volume) (M,)`` of bar ``k`` once its planted
                term is known (required by the ``volume`` kind, whose volume depends on the move).
        """
        base = step - step.mean(axis=1, keepdims=True)
        spread = base.std(axis=1)
        planted = np.zeros_like(step)
        kind, loading = self.signal.kind, self.signal.loading
        for k in range(step.shape[0]):
            if self._bars_seen >= warmup_bars(kind) and (kind != "volume" or self._volume.warm):
                signal = predictor(kind, self._history, self._volume_z)
                planted[k] = loading * spread[k] * cross_sectional_z(signal)
            self._history = np.roll(self._history, -1, axis=0)
            self._history[-1] = base[k] + planted[k]
            self._bars_seen += 1
            if volume_of is not None:
                self._volume_z = self._volume.push(volume_of(k, planted[k]))
        return planted
