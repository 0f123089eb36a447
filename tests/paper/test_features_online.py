"""The online features (a rolling window through the panel's own functions) equal the panel's."""

from __future__ import annotations

import pytest
import torch

from finpod.data.features import FeatureStats
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.errors import DataError
from finpod.paper.features import OnlineFeatures
from finpod.paper.limits import session_of_bar
from finpod.paper.replay import FEATURE_TOLERANCE

WINDOW = 400
SEEDED = 450
"""Rows given as history; the pushed rows after them cover the 2019-11-29 half day (210 minutes)."""
PUSHED = 220


def test_online_features_equal_the_panel_over_minutes_and_a_half_day() -> None:
    bars = synth_market(n_symbols=3, n_days=4, freq="1min", seed=5, start="2019-11-26")
    bars = bars.drop(index=bars.index[500:530])  # missing minutes: filled bars, not tradable
    segments = {"train": ("2019-11-26", "2019-11-27"), "validation": ("2019-11-29", "2019-12-02")}
    panel = build_panel(
        bars, freq="1min", start="2019-11-26", end="2019-12-02", segments=segments, device="cpu"
    )
    assert panel.feature_stats is not None
    close, volume = panel.close.numpy(), panel.volume.numpy()
    real = panel.real_bars().numpy()  # the bars the panel's features counted
    assert not real[SEEDED : SEEDED + PUSHED].all()  # filled bars among the pushed ones

    def worst(online: OnlineFeatures, rows: range) -> float:
        out = 0.0
        for t in rows:
            stamp = int(panel.timestamps_ns[t])
            row = online.push(stamp, session_of_bar(stamp).open_ns, close[t], volume[t], real[t])
            out = max(out, float((row - panel.features[t]).abs().max()))
        return out

    start = OnlineFeatures(panel.num_assets, "1min", panel.feature_stats, WINDOW)
    assert (
        worst(start, range(60)) <= 1e-5
    )  # the window holds the panel's first row: same inputs, cold cells too
    slid = OnlineFeatures(panel.num_assets, "1min", panel.feature_stats, WINDOW)
    slid.seed(close[:SEEDED], volume[:SEEDED], real[:SEEDED])
    assert worst(slid, range(SEEDED, SEEDED + PUSHED)) <= FEATURE_TOLERANCE  # older EMA seeds weigh ~1e-14


def test_window_shorter_than_a_warm_up_is_refused() -> None:
    stats = FeatureStats(("x",), torch.zeros(1), torch.ones(1))
    with pytest.raises(DataError, match="warmup_bars"):
        OnlineFeatures(2, "1min", stats, 30)
