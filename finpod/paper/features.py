"""Online causal features: the panel's features at the newest bar, computed from a rolling window.

The live trader cannot rebuild the whole panel each minute, so it keeps the last ``window_bars``
aligned bars and runs the SAME functions the panel builder runs (:func:`finpod.data.features.raw_features`,
then, on the last row, :func:`~finpod.data.features.demean_across_symbols_` and
:func:`~finpod.data.features.normalise_features_` with the run's train statistics). Every
feature is causal and its look-back is finite or decays exponentially (EMAs: after 512 bars a
seed's weight is below ``1e-16``), so the window's last row equals the panel's row to float32
rounding; ``tests/paper/test_features_online.py`` proves it.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import torch

from finpod.data.features import (
    CLIP_SIGMAS,
    FeatureStats,
    bar_phase,
    demean_across_symbols_,
    feature_specs,
    normalise_features_,
    raw_features,
)
from finpod.errors import DataError

NEVER: Final[int] = np.iinfo(np.int64).max // 2
"""Bar count of a symbol that has not had a real bar yet."""


class OnlineFeatures:
    """The feature row ``(M, F)`` of each new bar, from the last ``window_bars`` aligned bars.

    Args:
        num_assets: ``M``.
        freq: ``"1min"`` or ``"1d"``.
        stats: the run's train-segment normalisation statistics.
        window_bars: rows kept (the look-back of every feature must fit; 512 by default).
        clip_sigmas: the panel's clip.
    """

    def __init__(
        self,
        num_assets: int,
        freq: str,
        stats: FeatureStats,
        window_bars: int,
        clip_sigmas: float = CLIP_SIGMAS,
    ) -> None:
        self.specs = feature_specs(freq)
        longest = max(s.warmup_bars for s in self.specs)
        if window_bars <= longest:
            raise DataError(f"paper.warmup_bars must exceed the longest feature warm-up ({longest} bars)")
        self.freq = freq
        self.stats = stats.to("cpu")
        self.window_bars = window_bars
        self.clip_sigmas = clip_sigmas
        self._close = np.zeros((0, num_assets), dtype=np.float32)
        self._volume = np.zeros((0, num_assets), dtype=np.float32)
        self._real = np.zeros((0, num_assets), dtype=bool)
        self._count = 0
        self._first_bar = np.full(num_assets, NEVER, dtype=np.int64)

    @property
    def bars_seen(self) -> int:
        """Rows pushed so far."""
        return self._count

    def seed(self, close: np.ndarray, volume: np.ndarray, real: np.ndarray) -> None:
        """Add ``k`` aligned bars of history without computing their features (warm-up).

        Args:
            close: float32 ``(k, M)`` aligned closes.
            volume: float32 ``(k, M)`` volumes.
            real: bool ``(k, M)`` real bars.
        """
        real = np.asarray(real, dtype=bool)
        if real.shape[0] == 0:
            return
        seen = real.any(axis=0)
        first = np.where(seen, np.argmax(real, axis=0) + self._count, NEVER)
        self._first_bar = np.minimum(self._first_bar, first)
        self._close = np.concatenate([self._close, close.astype(np.float32)])[-self.window_bars :]
        self._volume = np.concatenate([self._volume, volume.astype(np.float32)])[-self.window_bars :]
        self._real = np.concatenate([self._real, real])[-self.window_bars :]
        self._count += real.shape[0]

    def push(
        self, bar_ns: int, session_open_ns: int, close: np.ndarray, volume: np.ndarray, real: np.ndarray
    ) -> torch.Tensor:
        """Add one aligned bar and return its features.

        Args:
            bar_ns: bar start, UTC ns.
            session_open_ns: its session's regular open, UTC ns.
            close: float32 ``(M,)`` aligned close (a missing bar carries the last close).
            volume: float32 ``(M,)`` volume (0 for a filled bar).
            real: bool ``(M,)`` the symbol had a real bar (its first one starts its warm-up).

        Returns:
            float32 ``(M, F)``, equal to the panel's row for the same bars.
        """
        self._first_bar = np.where(real & (self._first_bar == NEVER), self._count, self._first_bar)
        self._close = np.concatenate([self._close, close[None].astype(np.float32)])[-self.window_bars :]
        self._volume = np.concatenate([self._volume, volume[None].astype(np.float32)])[-self.window_bars :]
        self._real = np.concatenate([self._real, np.asarray(real, dtype=bool)[None]])[-self.window_bars :]
        self._count += 1
        phase = bar_phase(
            np.array([bar_ns], dtype=np.int64),
            np.zeros(1, dtype=np.int64),
            np.array([session_open_ns]),
            self.freq,
        )
        angle = torch.zeros(self._close.shape[0], dtype=torch.float64)
        angle[-1] = float(phase[0])
        raw = raw_features(torch.from_numpy(self._close), torch.from_numpy(self._volume), angle, self.freq)
        last = raw[-1:].clone()
        first_rel = torch.from_numpy(
            np.where(self._first_bar == NEVER, 1, self._first_bar - (self._count - 1))
        )
        demean_across_symbols_(last, first_rel, self.specs, torch.from_numpy(self._real))
        return normalise_features_(last, self.stats, first_rel, self.specs, self.clip_sigmas)[0]
