"""The panel: a calendar-aligned market on one device, the only thing the env and backtest read.

Shapes: ``T`` bars (rows of the exchange calendar, in time order), ``M`` assets, ``F`` features.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from finpod.data.features import FeatureStats

SEGMENT_NAMES: tuple[str, ...] = ("train", "validation", "backtest")


@dataclass(frozen=True)
class Panel:
    """Market panel aligned to the exchange calendar.

    Attributes:
        timestamps_ns: int64 ``(T,)`` numpy array, bar START in UTC nanoseconds since the epoch.
        session_ids: int64 ``(T,)`` numpy array, index of the trading session (day) of each bar,
            0 for the first session in the panel; bars of one session are contiguous.
        symbols: the ``M`` tradable asset tickers, in column order.
        open, high, low, close: float32 ``(T, M)`` adjusted prices (USD per share). A missing bar is
            filled from the last close (open = high = low = close = last close). Before a symbol's
            first bar every price is that first bar's open: a placeholder from the future, never
            tradable, for valuing a zero position only (``1.0`` for a symbol with no bar at all).
        volume: float32 ``(T, M)`` adjusted shares traded in the bar (0 for a filled bar).
        features: float32 ``(T, M, F)`` causal features (value at t uses bars <= t only), normalised
            with statistics from the train segment only.
        feature_names: the ``F`` feature names, in the last axis' order.
        tradable: bool ``(T, M)``: listed, in the universe that day, and has a real (unfilled) bar.
        segments: name -> ``(start, stop)`` bar-index range (stop exclusive) for ``train``,
            ``validation`` and ``backtest``.
        frequency: ``"1min"`` or ``"1d"``.
        benchmark_symbol: ticker of the market benchmark (e.g. QQQ) when the dataset has one.
        benchmark_close: float32 ``(T,)`` adjusted close of the benchmark, or ``None``.
        benchmark_open: float32 ``(T,)`` adjusted open of the benchmark, or ``None`` (then the
            market baseline fills at the next bar's close instead of its open).
        benchmark_volume: float32 ``(T,)`` benchmark volume (0 on a filled bar), or ``None`` (then
            the market baseline is not volume-capped).
        feature_stats: the train-segment normalisation statistics the features were built with
            (reuse them to build the same features on new bars), or ``None``.
        real: bool ``(T, M)``: the symbol has a real (unfilled) bar, in the universe or not (what
            the features' warm-up and cross-sectional means count), or ``None`` for a panel built
            without it (:meth:`real_bars` then falls back to ``tradable | volume > 0``).
    """

    timestamps_ns: np.ndarray
    session_ids: np.ndarray
    symbols: tuple[str, ...]
    open: torch.Tensor
    high: torch.Tensor
    low: torch.Tensor
    close: torch.Tensor
    volume: torch.Tensor
    features: torch.Tensor
    feature_names: tuple[str, ...]
    tradable: torch.Tensor
    segments: dict[str, tuple[int, int]] = field(default_factory=dict)
    frequency: str = "1min"
    benchmark_symbol: str | None = None
    benchmark_close: torch.Tensor | None = None
    benchmark_open: torch.Tensor | None = None
    benchmark_volume: torch.Tensor | None = None
    feature_stats: FeatureStats | None = None
    real: torch.Tensor | None = None

    @property
    def num_bars(self) -> int:
        """``T``, the number of calendar bars."""
        return int(self.close.shape[0])

    @property
    def num_assets(self) -> int:
        """``M``, the number of tradable assets."""
        return int(self.close.shape[1])

    @property
    def num_features(self) -> int:
        """``F``, the number of features per asset and bar."""
        return int(self.features.shape[2])

    @property
    def device(self) -> torch.device:
        """The device every tensor of the panel lives on."""
        return self.close.device

    def segment(self, name: str) -> tuple[int, int]:
        """Bar-index range ``(start, stop)`` of segment ``name`` (stop exclusive)."""
        if name not in self.segments:
            known = ", ".join(sorted(self.segments)) or "none"
            raise KeyError(f"panel has no segment {name!r} (known: {known})")
        return self.segments[name]

    def real_bars(self) -> torch.Tensor:
        """Bool ``(T, M)``: which bars are real (:attr:`real`; a panel built without it: tradable or
        traded some volume)."""
        return self.real if self.real is not None else self.tradable | (self.volume > 0)

    def nbytes(self) -> int:
        """Bytes held by the panel's tensors (its own size, for memory budgets)."""
        tensors = [self.open, self.high, self.low, self.close, self.volume, self.features, self.tradable]
        for extra in (self.benchmark_close, self.benchmark_open, self.benchmark_volume, self.real):
            if extra is not None:
                tensors.append(extra)
        own = sum(t.element_size() * t.nelement() for t in tensors)
        return int(own + self.timestamps_ns.nbytes + self.session_ids.nbytes)

    def to(self, device: torch.device | str) -> Panel:
        """A copy of the panel with every tensor on ``device``."""
        dev = torch.device(device)

        def moved(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor.to(dev)

        return Panel(
            timestamps_ns=self.timestamps_ns,
            session_ids=self.session_ids,
            symbols=self.symbols,
            open=self.open.to(dev),
            high=self.high.to(dev),
            low=self.low.to(dev),
            close=self.close.to(dev),
            volume=self.volume.to(dev),
            features=self.features.to(dev),
            feature_names=self.feature_names,
            tradable=self.tradable.to(dev),
            segments=dict(self.segments),
            frequency=self.frequency,
            benchmark_symbol=self.benchmark_symbol,
            benchmark_close=moved(self.benchmark_close),
            benchmark_open=moved(self.benchmark_open),
            benchmark_volume=moved(self.benchmark_volume),
            feature_stats=None if self.feature_stats is None else self.feature_stats.to(dev),
            real=moved(self.real),
        )
