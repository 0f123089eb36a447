"""Validation as contiguous chunks side by side: the plan covers the segment, and the score is close
to the continuous pass's on a synthetic minute market (exact where the portfolio has no memory)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pytest
import torch

from finpod.backtest.chunked import chunk_plan, chunked_equity
from finpod.backtest.runner import run_policy
from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.env.shape import EnvShape
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError
from finpod.pipeline.training import agent_factory, deterministic_policy, validation_score
from podracer.ppo import PPOConfig

CPU = torch.device("cpu")
SESSIONS = 40
CHUNKS, WARMUP_BARS = 16, 390
CONFIG = EnvConfig(fee_rate=0.002, half_spread_bps=1.0, max_participation=0.1, rebalance_band=0.01)


@pytest.fixture(scope="module")
def minute_panel() -> Panel:
    """5 synthetic symbols, 40 minute sessions: 8 to train, 32 (12,480 bars) to validate."""
    bars = synth_market(5, SESSIONS, "1min", seed=3, start="2019-01-02")
    first, last = bars["timestamp"].min().date(), bars["timestamp"].max().date()
    split = first + dt.timedelta(days=10)
    segments = {"train": (first, split), "validation": (split + dt.timedelta(days=1), last)}
    return build_panel(
        bars, freq="1min", start=first, end=last, segments=segments, device=CPU, benchmark_symbol=None
    )


@pytest.mark.parametrize(("bars", "chunks", "warmup"), [(12_480, 64, 390), (1000, 7, 50), (98, 64, 0)])
def test_the_chunks_score_every_row_once_after_a_whole_warm_up(bars: int, chunks: int, warmup: int) -> None:
    plan = chunk_plan(bars, chunks, warmup)
    scored = np.concatenate([np.arange(a, b) for a, b in zip(plan.first_rows, plan.stop_rows, strict=True)])
    np.testing.assert_array_equal(scored, np.arange(1, bars))
    assert 1 < plan.num_chunks <= chunks
    assert plan.starts[0] == 0
    assert plan.first_rows[0] == 1
    assert (plan.first_rows[1:] - 1 - plan.starts[1:] >= warmup).all()  # a whole warm-up before each
    assert (plan.stop_rows - 1 - plan.starts <= plan.steps).all()  # every scored row is reached
    assert (plan.starts + plan.steps <= bars - 1).all()  # and no env steps past the segment


def test_one_chunk_or_a_short_segment_is_the_continuous_pass() -> None:
    assert chunk_plan(5000, 1, 390).num_chunks == 1
    one = chunk_plan(700, 64, 390)  # a second chunk would score fewer rows than its warm-up
    assert (one.num_chunks, one.steps, one.stop_rows[-1]) == (1, 699, 700)
    assert chunk_plan(1000, 64, 390).num_chunks == 2


def test_without_portfolio_memory_the_stitched_curve_is_the_continuous_one(minute_panel: Panel) -> None:
    """A constant target with no band and no volume cap rebalances to the same weights every bar,
    so after its first trade a chunk's account is the continuous one scaled: the returns agree."""
    config = dataclasses.replace(CONFIG, rebalance_band=0.0, max_participation=float("inf"))
    target = torch.tensor([[0.1, 0.3, 0.1, 0.2, 0.2, 0.1]])

    def constant(obs: torch.Tensor) -> torch.Tensor:
        return target.expand(obs.shape[0], -1)

    continuous = run_policy(minute_panel, "validation", config, constant, CPU).equity_usd
    start, stop = minute_panel.segment("validation")
    plan = chunk_plan(stop - start, CHUNKS, 5)
    stitched = chunked_equity(minute_panel, "validation", config, constant, CPU, plan)
    np.testing.assert_allclose(stitched, continuous, rtol=1e-9)


def test_the_chunked_score_is_close_to_the_continuous_score(minute_panel: Panel) -> None:
    """Untrained PPO policies read their current weights, and the 1 % band gives the account a long
    memory: the chunked score is an approximation, measured here (1.339 vs 1.346 over 32 sessions)."""
    make = agent_factory(
        EnvShape.of(minute_panel.num_assets, minute_panel.num_features, CONFIG.action_mode), CPU
    )
    policy = deterministic_policy(make(PPOConfig(hidden_sizes=(64, 64)), seed=1))
    continuous = validation_score(minute_panel, CONFIG, policy, CPU)
    chunked = validation_score(minute_panel, CONFIG, policy, CPU, chunks=CHUNKS, warmup_bars=WARMUP_BARS)
    assert continuous != chunked  # a different pass...
    assert chunked == pytest.approx(continuous, abs=0.05)  # ...and a close score
    again = validation_score(minute_panel, CONFIG, policy, CPU, chunks=CHUNKS, warmup_bars=WARMUP_BARS)
    assert again == chunked


def test_reset_at_refuses_starts_without_room_for_an_episode(minute_panel: Panel) -> None:
    config = dataclasses.replace(CONFIG, random_start=False, horizon_bars=100)
    env = TradingEnv(minute_panel, "validation", config, 2, 0, CPU)
    first, stop = minute_panel.segment("validation")
    obs, info = env.reset_at(torch.tensor([first, stop - 101]))
    assert info["bar_index"].tolist() == [first, stop - 101]
    assert obs.shape[0] == 2
    with pytest.raises(SpecError, match="start bars must lie in"):
        env.reset_at(torch.tensor([first, stop - 100]))
    with pytest.raises(SpecError, match="int64 start bars of shape"):
        env.reset_at(torch.tensor([first]))


@pytest.fixture(scope="module")
def daily_panel() -> Panel:
    """20 synthetic symbols, daily bars: two years to train, a half-year to validate (the demo's shape)."""
    bars = synth_market(20, 650, "1d", seed=5, start="2016-01-04")
    segments = {
        "train": (dt.date(2016, 1, 4), dt.date(2017, 12, 29)),
        "validation": (dt.date(2018, 1, 2), dt.date(2018, 6, 29)),
    }
    return build_panel(
        bars,
        freq="1d",
        start=dt.date(2016, 1, 4),
        end=dt.date(2018, 6, 29),
        segments=segments,
        device=CPU,
        benchmark_symbol=None,
    )


def test_a_daily_spec_s_default_chunks_score_as_the_continuous_pass_does(daily_panel: Panel) -> None:
    """finpod's daily defaults (16 chunks, 5 bars of warm-up; ``finpod.spec.sections``): a weights
    policy without a band holds its targets a bar after a chunk starts in cash, so the chunked score
    of finpod's default cross-sectional agent is the continuous one to within float rounding of
    the stitched curve's levels."""
    from finpod.spec.agent import ppo_config_from
    from finpod.spec.sections import DAILY_VALIDATION_CHUNKS, DAILY_VALIDATION_WARMUP_BARS

    config = EnvConfig(fee_rate=0.0005)
    start, stop = daily_panel.segment("validation")
    plan = chunk_plan(stop - start, DAILY_VALIDATION_CHUNKS, DAILY_VALIDATION_WARMUP_BARS)
    assert DAILY_VALIDATION_CHUNKS // 2 < plan.num_chunks <= DAILY_VALIDATION_CHUNKS
    assert plan.steps < (stop - start) / 4  # the point: several times fewer sequential steps
    make = agent_factory(EnvShape.of(daily_panel.num_assets, daily_panel.num_features, "weights"), CPU)
    for seed in (1, 2):
        policy = deterministic_policy(make(ppo_config_from({}), seed=seed))
        continuous = validation_score(daily_panel, config, policy, CPU)
        chunked = validation_score(
            daily_panel,
            config,
            policy,
            CPU,
            chunks=DAILY_VALIDATION_CHUNKS,
            warmup_bars=DAILY_VALIDATION_WARMUP_BARS,
        )
        assert chunked == pytest.approx(continuous, abs=1e-6)  # measured: within 2e-9


def _first_feature(panel: Panel):  # type: ignore[no-untyped-def]
    """A score per asset: its first feature in the observation (a fixed, history-free signal)."""
    assets, features = panel.num_assets, panel.num_features

    def scores(obs: torch.Tensor) -> torch.Tensor:
        return obs[:, : assets * features].reshape(obs.shape[0], assets, features)[..., 0]

    return scores


def test_a_long_fit_window_is_traded_in_chunks_with_the_continuous_sharpes(minute_panel: Panel) -> None:
    """The tilt family's fit over 12,480 bars runs as 6 chunks side by side; with no band and no
    volume cap a member's holdings have no memory, so every Sharpe is the continuous pass's."""
    from finpod.tilt import FIT_CHUNK_BARS, TiltParams, batch_sharpes, chunked_sharpes, tilt_policy

    start, stop = minute_panel.segment("validation")
    assert (stop - start) // FIT_CHUNK_BARS == 6
    config = dataclasses.replace(CONFIG, rebalance_band=0.0, max_participation=float("inf"))
    members = [TiltParams(0.0, 1.0, 0.0), TiltParams(2.0, 0.5, 0.0), TiltParams(8.0, 0.25, 0.0)]
    score_fn = _first_feature(minute_panel)
    chunked = chunked_sharpes(minute_panel, "validation", config, score_fn, members, CPU)
    policy = tilt_policy(minute_panel, score_fn, members)
    continuous = batch_sharpes(minute_panel, "validation", config, policy, len(members), CPU)
    assert len(set(continuous.round(6))) == 3  # three different traders
    np.testing.assert_allclose(chunked, continuous, rtol=1e-6)


def test_with_bands_the_chunked_fit_ranks_the_members_as_the_continuous_pass_does(
    minute_panel: Panel,
) -> None:
    """With bands and a volume cap the chunks approximate: each chunk's account starts at the initial
    cash, while a continuous account that churned for weeks is smaller and meets the volume cap
    less. Measured here: the same pick (equal weight, 1.321 vs 1.335); the churning members lose
    less (-239 vs -309 Sharpe) and two near-tied losers swap ranks (Spearman 0.94)."""
    from finpod.tilt import TiltParams, batch_sharpes, chunked_sharpes, tilt_policy

    members = [
        TiltParams(t, f, b / 5)
        for t, f, b in [
            (0.0, 1.0, 0.0),
            (1.0, 0.5, 0.25),
            (4.0, 0.5, 0.5),
            (16.0, 0.25, 0.0),
            (2.0, 1.0, 0.75),
            (8.0, 0.5, 0.25),
        ]
    ]
    score_fn = _first_feature(minute_panel)
    chunked = chunked_sharpes(minute_panel, "validation", CONFIG, score_fn, members, CPU)
    policy = tilt_policy(minute_panel, score_fn, members)
    continuous = batch_sharpes(minute_panel, "validation", CONFIG, policy, len(members), CPU)
    assert int(np.argmax(chunked)) == int(np.argmax(continuous)) == 0
    assert chunked[0] == pytest.approx(continuous[0], abs=0.05)
    ranks = np.argsort(np.argsort(chunked)), np.argsort(np.argsort(continuous))
    assert np.corrcoef(*ranks)[0, 1] >= 0.9
