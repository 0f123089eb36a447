"""A tiny daily market and spec for end-to-end tests of the main job (seconds on a CPU)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from finpod.data.calendar import bar_starts
from finpod.data.store import write_dataset
from finpod.spec import Spec

SYMBOLS = ("AAA", "BBB", "CCC", "QQQ")
FIRST_DAY, LAST_DAY = "2019-01-02", "2019-12-31"
SEGMENTS = {
    "train": ["2019-01-02", "2019-06-28"],
    "validation": ["2019-07-01", "2019-09-30"],
    "backtest": ["2019-10-01", "2019-12-31"],
}
START_PRICE_USD = 50.0
DAILY_VOL = 0.015
VOLUME_SHARES = 1e6


def tiny_bars(seed: int) -> pd.DataFrame:
    """Daily random-walk bars (bar schema) for :data:`SYMBOLS` over 2019."""
    rng = np.random.default_rng(seed)
    stamps = bar_starts("1d", FIRST_DAY, LAST_DAY)
    frames = []
    for symbol in SYMBOLS:
        close = START_PRICE_USD * np.exp(np.cumsum(rng.normal(0.0005, DAILY_VOL, len(stamps))))
        opens = np.concatenate([[START_PRICE_USD], close[:-1]])
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": stamps,
                    "symbol": symbol,
                    "open": opens,
                    "high": np.maximum(opens, close) * 1.002,
                    "low": np.minimum(opens, close) * 0.998,
                    "close": close,
                    "volume": VOLUME_SHARES,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def garble_backtest(bars: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The same bars with every bar of the backtest segment replaced by random (valid) garbage."""
    rng = np.random.default_rng(seed)
    out = bars.copy()
    later = out["timestamp"] >= pd.Timestamp(SEGMENTS["backtest"][0], tz="UTC")
    count = int(later.sum())
    low = rng.uniform(1.0, 1000.0, count)
    high = low * rng.uniform(1.0, 3.0, count)
    out.loc[later, "low"] = low
    out.loc[later, "high"] = high
    out.loc[later, "open"] = rng.uniform(low, high)
    out.loc[later, "close"] = rng.uniform(low, high)
    out.loc[later, "volume"] = rng.uniform(0.0, 1e9, count)
    return out


def write_tiny_dataset(folder: Path, bars: pd.DataFrame) -> Path:
    """Write ``bars`` as a dataset folder and return it."""
    write_dataset(bars, folder, source="test", frequency="1d", adjustment="none", repairs={}, notes=[])
    return folder


def tiny_spec(dataset: Path, *, budget_env_steps: int = 1536) -> Spec:
    """A spec over a tiny dataset: two slots, fixed seed, a budget of a few PPO rounds, and a
    trajectory archive (so every trader a run can hold is there)."""
    return Spec.from_dict(
        {
            "name": "tiny",
            "seed": 3,
            "device": "cpu",
            "frequency": "1d",
            "universe": "all",
            "benchmark_symbol": "QQQ",
            "data": {"source": "dataset", "path": str(dataset)},
            "segments": SEGMENTS,
            "env": {"num_envs": 4, "horizon_bars": 20, "fee_rate": 0.001},
            "agent": {"rollout_steps": 32, "hidden_sizes": [16], "num_minibatches": 2, "update_epochs": 2},
            "tournament": {
                "pool_size": 2,  # two lineages: the ensemble trader exists
                "leaderboard_size": 3,
                "budget_env_steps": budget_env_steps,
                "budget_seconds": 600.0,
                "ensemble_k": 2,
                "archive_size": 8,  # the trajectory trader exists (finpod's default keeps none)
            },
        }
    )


def trajectory_name(traders: Iterable[str]) -> str:
    """The one trajectory trader among ``traders`` (``trajectory<n>``: its member count depends on the
    rounds a run judged); fails when there is none or several."""
    found = [name for name in traders if re.fullmatch(r"trajectory\d+", name)]
    assert len(found) == 1, f"expected one trajectory trader, got {found}"
    return found[0]


def expected_traders(traders: Iterable[str]) -> list[str]:
    """The traders and baselines of a tiny run's report, in order (its trajectory trader named as
    ``traders`` name it)."""
    return ["best", "ensemble_top2", trajectory_name(traders), "equal_weight", "linear", "market", "cash"]
