"""Synthetic panels of any shape for the env tests (random tensors; no data layer involved)."""

from __future__ import annotations

import numpy as np
import torch

from finpod.data.panel import Panel

BARS_PER_SESSION = 7
"""Bars in each synthetic trading session."""


def random_panel(
    num_bars: int,
    num_assets: int,
    num_features: int,
    seed: int,
    untradable_fraction: float = 0.1,
    segments: dict[str, tuple[int, int]] | None = None,
) -> Panel:
    """A random positive-price panel with zero-volume filled bars and untradable cells.

    Prices follow a log random walk from about 10..200 USD; opens differ from the previous close;
    a fraction ``untradable_fraction`` of cells is untradable, half of them filled bars (zero
    volume, open = close = previous close). Segments default to 60/20/20 % of the bars.
    """
    rng = np.random.default_rng(seed)
    base = rng.uniform(10.0, 200.0, size=num_assets)
    log_close = np.log(base) + np.cumsum(rng.normal(0.0, 0.01, size=(num_bars, num_assets)), axis=0)
    close = np.exp(log_close)
    previous = np.vstack([base, close[:-1]])
    open_ = previous * np.exp(rng.normal(0.0, 0.005, size=(num_bars, num_assets)))
    high = np.maximum(open_, close) * 1.001
    low = np.minimum(open_, close) * 0.999
    volume = rng.uniform(50.0, 5_000.0, size=(num_bars, num_assets))
    untradable = rng.random((num_bars, num_assets)) < untradable_fraction
    filled = untradable & (rng.random((num_bars, num_assets)) < 0.5)
    for t in range(num_bars):
        row = filled[t]
        last = previous[t, row] if t == 0 else close[t - 1, row]
        close[t, row] = open_[t, row] = high[t, row] = low[t, row] = last
        volume[t, row] = 0.0
    if segments is None:
        train_stop, validation_stop = int(num_bars * 0.6), int(num_bars * 0.8)
        segments = {
            "train": (0, train_stop),
            "validation": (train_stop, validation_stop),
            "backtest": (validation_stop, num_bars),
        }
    features = rng.normal(0.0, 1.0, size=(num_bars, num_assets, num_features))

    def f32(values: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))

    return Panel(
        timestamps_ns=np.arange(num_bars, dtype=np.int64) * 60_000_000_000,
        session_ids=np.arange(num_bars, dtype=np.int64) // BARS_PER_SESSION,
        symbols=tuple(f"S{i:03d}" for i in range(num_assets)),
        open=f32(open_),
        high=f32(high),
        low=f32(low),
        close=f32(close),
        volume=f32(volume),
        features=f32(features),
        feature_names=tuple(f"f{i}" for i in range(num_features)),
        tradable=torch.from_numpy(~untradable),
        segments=segments,
    )
