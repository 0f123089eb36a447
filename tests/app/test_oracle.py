"""The oracle: knows the planted signal, trades through the same env, and beats equal weight held out."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest
import torch

from finpod import tilt as tilt_module
from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.signals import SignalSpec
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.errors import SpecError
from finpod.linear_baseline import ridge_scores
from finpod.oracle import (
    equal_weight_policy,
    fit_oracle,
    oracle_policy,
    segment_sharpe,
    share_captured,
    signal_scores,
)
from finpod.tilt import BarScores, TiltParams, chunked_sharpes, default_grid, fit_tilt, tilt_weights

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
    feature = panel.feature_names.index("xs_logret_1")
    obs[0, feature] = 2.0  # asset 0 just rose: reversal expects it to fall, momentum to keep rising
    reversal = oracle_policy(panel, SignalSpec("reversal", 0.1))(obs)[0]
    momentum = oracle_policy(panel, SignalSpec("momentum", 0.1))(obs)[0]
    assert float(reversal[0]) == pytest.approx(0.0, abs=1e-6)  # no cash
    assert float(momentum[0]) == pytest.approx(0.0, abs=1e-6)
    assert reversal[1] < 1.0 / m < momentum[1]


def test_share_captured_and_bad_family_parameters() -> None:
    assert share_captured(1.5, 2.0, 1.0) == pytest.approx(0.5)
    assert share_captured(1.5, 1.0, 1.0) != share_captured(1.5, 1.0, 1.0)  # NaN: no edge to share
    assert math.isnan(share_captured(1.5, 1.0 + 1e-9, 1.0))  # a rounding-sized edge is no edge
    with pytest.raises(SpecError, match="tilt -1"):
        TiltParams(tilt=-1.0)
    with pytest.raises(SpecError, match="top_fraction 0"):
        TiltParams(top_fraction=0.0)
    with pytest.raises(SpecError, match=r"band 1\.5"):
        TiltParams(band=1.5)


def test_the_family_concentrates_and_holds_inside_its_band() -> None:
    scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    flat = torch.zeros(1, 4)
    top_half = tilt_weights(scores, flat, torch.tensor([[0.0, 0.5, 0.0]]))[0]
    assert top_half.tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0, 0.0])  # [cash, assets]
    tilted = tilt_weights(scores, flat, torch.tensor([[1.0, 1.0, 0.0]]))[0]
    assert tilted[1] > tilted[2] > tilted[3] > tilted[4] >= 0.0
    assert float(tilted.sum()) == pytest.approx(1.0)
    current = torch.tensor([[0.24, 0.25, 0.25, 0.26]])
    held = tilt_weights(torch.zeros(1, 4), current, torch.tensor([[0.0, 1.0, 0.02]]))[0]
    torch.testing.assert_close(held[1:], current[0])  # every target within the band: no trade
    half = torch.tensor([[0.0, 0.5, 0.1]])  # the top two names, a 0.1 band
    mixed = tilt_weights(scores, torch.tensor([[0.45, 0.0, 0.55, 0.0]]), half)[0]
    assert mixed.tolist() == pytest.approx([0.05, 0.45, 0.5, 0.0, 0.0])  # name 0 held, cash absorbs
    crowded = tilt_weights(scores, torch.tensor([[0.55, 0.0, 0.0, 0.45]]), half)[0]
    assert crowded.tolist() == pytest.approx([0.0, 0.55, 0.45, 0.0, 0.0])  # the traded name shrinks


@pytest.mark.parametrize("kind", ["reversal_5", "momentum_60", "volume", "nonlinear"])
def test_each_kinds_fitted_oracle_beats_equal_weight_on_held_out_data(kind: str) -> None:
    signal = SignalSpec(kind, 0.3)  # type: ignore[arg-type]
    panel = _panel(signal)
    oracle = fit_oracle(panel, signal, CONFIG, CPU)
    equal = segment_sharpe(panel, "backtest", CONFIG, equal_weight_policy(panel.num_assets), CPU)
    assert segment_sharpe(panel, "backtest", CONFIG, oracle.policy, CPU) > equal + 0.5
    assert oracle.to_json()["params"] != {}
    assert oracle.fit.segment == "train"


def test_the_oracle_is_fitted_on_train_only_and_is_the_best_member_there() -> None:
    signal = SignalSpec("reversal", 0.1)
    panel = _panel(signal)
    oracle = fit_oracle(panel, signal, CONFIG, CPU)
    start, _stop = panel.segment("validation")
    garbage = dataclasses.replace(panel, features=panel.features.clone(), close=panel.close.clone())
    garbage.features[start:] = torch.randn_like(garbage.features[start:])
    garbage.close[start:] = garbage.close[start:] * 3.0
    assert fit_oracle(garbage, signal, CONFIG, CPU).fit == oracle.fit
    members = [oracle.fit.params, TiltParams(), TiltParams(tilt=0.0)]
    train = fit_tilt(panel, "train", CONFIG, signal_scores(panel, signal), CPU, grid=members)
    assert train.params == oracle.fit.params
    assert train.sharpe == pytest.approx(oracle.fit.sharpe)


def _bar_scores(panel: Panel, source: str) -> BarScores:
    """The oracle's scores of a planted kind, or a ridge's on three features."""
    if source == "ridge":
        index = [panel.feature_names.index(name) for name in ("xs_logret_1", "xs_logret_5", "volume_z_30")]
        scores = ridge_scores(panel, index, torch.tensor([-0.3, 0.2, 0.05], dtype=torch.float64))
    else:
        scores = signal_scores(panel, SignalSpec(source, 0.1))  # type: ignore[arg-type]
    assert isinstance(scores, BarScores)
    return scores


@pytest.mark.parametrize("chunk_bars", [0, 60])
@pytest.mark.parametrize("source", ["volume", "nonlinear", "ridge"])
def test_a_fit_scores_each_bar_once_and_gets_the_same_sharpes(
    monkeypatch: pytest.MonkeyPatch, source: str, chunk_bars: int
) -> None:
    """Features-only scores (:class:`BarScores`: the oracle's, the ridge's) are computed once per
    bar for a fit's members side by side, in one pass (``chunk_bars`` 0) and in chunks: every
    member's Sharpe is the same as with every account scored, bit for bit."""
    if chunk_bars:
        monkeypatch.setattr(tilt_module, "FIT_CHUNK_BARS", chunk_bars)
        monkeypatch.setattr(tilt_module, "FIT_WARMUP_BARS", 7)
    panel = _panel(SignalSpec("nonlinear" if source == "ridge" else source, 0.1))  # type: ignore[arg-type]
    scores = _bar_scores(panel, source)
    rows_scored: dict[str, list[int]] = {"shared": [], "every": []}

    def counted(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
        def score(obs: torch.Tensor) -> torch.Tensor:
            rows_scored[name].append(obs.shape[0])
            return scores(obs)

        return score

    members = default_grid(panel.num_assets)
    shared = chunked_sharpes(panel, "train", CONFIG, BarScores(counted("shared")), members, CPU)
    every = chunked_sharpes(panel, "train", CONFIG, counted("every"), members, CPU)
    bars_side_by_side = 1 if chunk_bars == 0 else 4
    assert set(rows_scored["shared"]) == {bars_side_by_side}  # one row per bar
    assert set(rows_scored["every"]) == {len(members) * bars_side_by_side}  # every account
    assert shared.tolist() == every.tolist()
    assert len(set(shared.tolist())) > 10  # the members trade differently


def test_cost_drag_divides_each_session_s_costs_by_the_equity_it_started_with() -> None:
    import numpy as np
    import pandas as pd

    from finpod.backtest.result import TraderResult
    from finpod.oracle import cost_drag, returns_sharpe

    dates = pd.date_range("2020-01-02", periods=4, freq="B", tz="UTC")
    returns = pd.Series([0.01, -0.02, 0.005, 0.0], index=dates)
    equity = 1_000_000.0 * (1.0 + returns).cumprod()
    costs = pd.Series([100.0, 0.0, 50.0, 10.0], index=dates)
    empty = pd.DataFrame()
    result = TraderResult("t", "trader", returns, equity, empty, empty, costs, costs * 0.0)
    start = np.array([1_000_000.0, *equity.to_numpy()[:-1]])
    fractions = costs.to_numpy() / start
    annual_pct, gross = cost_drag(result)
    assert annual_pct == pytest.approx(100.0 * fractions.mean() * 252)
    assert gross == pytest.approx(returns_sharpe(returns + fractions))
    assert gross > returns_sharpe(returns)
    no_costs = dataclasses.replace(result, costs_usd=costs * 0.0)
    assert cost_drag(no_costs) == (0.0, pytest.approx(returns_sharpe(returns)))
    nothing = dataclasses.replace(result, returns=returns.iloc[:0], equity_usd=equity.iloc[:0])
    assert all(math.isnan(value) for value in cost_drag(nothing))
