"""The oracle: knows the planted signal, trades through the same env, and beats equal weight held out."""

from __future__ import annotations

import pytest
import torch

from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.signals import SignalSpec
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.errors import SpecError
from finpod.oracle import equal_weight_policy, oracle_policy, segment_sharpe, share_captured

SEGMENTS = {
    "train": ("2016-01-04", "2016-12-30"),
    "validation": ("2017-01-03", "2017-03-31"),
    "backtest": ("2017-04-03", "2018-03-29"),
}
CONFIG = EnvConfig(fee_rate=0.0005, half_spread_bps=1.0)
CPU = torch.device("cpu")


def _panel(signal: SignalSpec) -> Panel:
    bars = synth_market(12, 565, "1d", seed=3, signal=signal, alpha_annual=0.0)
    return build_panel(
        bars,
        freq="1d",
        start="2016-01-04",
        end="2018-03-29",
        segments=SEGMENTS,
        device=CPU,
        benchmark_symbol=None,
    )


@pytest.mark.parametrize("kind", ["reversal", "momentum"])
def test_oracle_beats_equal_weight_on_held_out_data(kind: str) -> None:
    signal = SignalSpec(kind, 0.2)  # type: ignore[arg-type]
    panel = _panel(signal)
    oracle = segment_sharpe(panel, "backtest", CONFIG, oracle_policy(panel, signal), CPU)
    equal = segment_sharpe(panel, "backtest", CONFIG, equal_weight_policy(panel.num_assets), CPU)
    assert oracle > equal + 0.5
    wrong_way = oracle_policy(panel, SignalSpec("momentum" if kind == "reversal" else "reversal", 0.2))
    assert segment_sharpe(panel, "backtest", CONFIG, wrong_way, CPU) < equal


def test_oracle_without_a_signal_is_equal_weight() -> None:
    panel = _panel(SignalSpec())
    obs = torch.randn(5, panel.num_assets * panel.num_features + panel.num_assets + 3)
    actions = oracle_policy(panel, SignalSpec())(obs)
    torch.testing.assert_close(actions, equal_weight_policy(panel.num_assets)(obs))
    assert actions.sum(dim=1).tolist() == pytest.approx([1.0] * 5)


def test_oracle_tilts_toward_the_names_the_signal_favours() -> None:
    panel = _panel(SignalSpec())
    m, f = panel.num_assets, panel.num_features
    obs = torch.zeros(1, m * f + m + 3)
    feature = panel.feature_names.index("logret_1")
    obs[0, feature] = 2.0  # asset 0 just rose: reversal expects it to fall, momentum to keep rising
    reversal = oracle_policy(panel, SignalSpec("reversal", 0.1))(obs)[0]
    momentum = oracle_policy(panel, SignalSpec("momentum", 0.1))(obs)[0]
    assert reversal[0] == 0.0  # no cash
    assert momentum[0] == 0.0
    assert reversal[1] < 1.0 / m < momentum[1]


def test_share_captured_and_bad_tilt() -> None:
    assert share_captured(1.5, 2.0, 1.0) == pytest.approx(0.5)
    assert share_captured(1.5, 1.0, 1.0) != share_captured(1.5, 1.0, 1.0)  # NaN: no edge to share
    with pytest.raises(SpecError, match="tilt -1"):
        oracle_policy(_panel(SignalSpec()), SignalSpec("reversal", 0.1), tilt=-1.0)
