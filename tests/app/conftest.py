"""Fixtures of the app tests: a tiny hand-made panel with known prices, and a report stand-in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from finpod.data.panel import Panel
from finpod.pipeline import main as pipeline_main

BARS_PER_SESSION = 3


@pytest.fixture
def tiny_panel() -> Panel:
    """Two assets, a benchmark, 6 sessions x 3 bars; validation = sessions 0-1, backtest = 2-5.

    Asset A's close rises 1 USD per bar from 10; asset B is flat at 20; opens equal the previous
    close; the benchmark doubles over the panel.
    """
    sessions = 6
    n = sessions * BARS_PER_SESSION
    days = pd.date_range("2021-01-04", periods=sessions, freq="B", tz="UTC")
    stamps = [d + pd.Timedelta(hours=14, minutes=30 + i) for d in days for i in range(BARS_PER_SESSION)]
    close_a = 10.0 + np.arange(n)
    close = np.stack([close_a, np.full(n, 20.0)], axis=1)
    opens = np.vstack([close[:1], close[:-1]])
    as_t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return Panel(
        timestamps_ns=pd.DatetimeIndex(stamps).as_unit("ns").asi8,
        session_ids=np.repeat(np.arange(sessions), BARS_PER_SESSION).astype(np.int64),
        symbols=("AAA", "BBB"),
        open=as_t(opens),
        high=as_t(np.maximum(opens, close)),
        low=as_t(np.minimum(opens, close)),
        close=as_t(close),
        volume=as_t(np.full((n, 2), 1e6)),
        features=torch.zeros((n, 2, 1)),
        feature_names=("zero",),
        tradable=torch.ones((n, 2), dtype=torch.bool),
        segments={"validation": (0, 6), "backtest": (6, n)},
        frequency="1min",
        benchmark_symbol="QQQ",
        benchmark_close=as_t(np.linspace(100.0, 200.0, n)),
    )


@dataclass(frozen=True)
class _Paths:
    html: Path


@pytest.fixture
def no_report(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Skip report rendering in tests about training and selection; records what it was given."""
    calls: list[dict[str, Any]] = []

    def record(out_dir: Path, **inputs: Any) -> _Paths:
        calls.append({"out_dir": out_dir, **inputs})
        return _Paths(out_dir / "report.html")

    monkeypatch.setattr(pipeline_main, "write_report", record)
    return calls
