"""Episodes: determinism, independent envs, truncation vs termination, rewards, and user errors."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
import torch

from env.panels import random_panel
from finpod.env import EnvConfig, TradingEnv
from finpod.env import market as market_module
from finpod.env.market import CLOSE_ROW
from finpod.env.observation import all_cash_rows
from finpod.errors import SpecError

PANEL = random_panel(num_bars=300, num_assets=6, num_features=3, seed=11)
TRAIN_START, TRAIN_STOP = PANEL.segments["train"]


def _rollout(env: TradingEnv, num_steps: int, action_seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(action_seed)
    outputs: list[torch.Tensor] = []
    obs, _ = env.reset()
    outputs.append(obs)
    for _ in range(num_steps):
        actions = torch.rand(env.num_envs, env.action_dim, generator=generator)
        obs, reward, terminated, truncated, info = env.step(actions)
        outputs += [obs, reward, terminated, truncated, *info.values()]
    return outputs


def test_same_seed_gives_bit_identical_rollouts() -> None:
    config = EnvConfig(horizon_bars=17, half_spread_bps=3.0)
    first = _rollout(TradingEnv(PANEL, "train", config, num_envs=32, seed=5), 60, action_seed=1)
    second = _rollout(TradingEnv(PANEL, "train", config, num_envs=32, seed=5), 60, action_seed=1)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


def test_different_seeds_give_different_start_bars() -> None:
    config = EnvConfig(horizon_bars=17)
    one = TradingEnv(PANEL, "train", config, num_envs=32, seed=5)
    other = TradingEnv(PANEL, "train", config, num_envs=32, seed=6)
    assert not torch.equal(one.bar_index, other.bar_index)
    reseeded = TradingEnv(PANEL, "train", config, num_envs=32, seed=6)
    reseeded.reset(seed=5)
    assert torch.equal(one.bar_index, reseeded.bar_index)


def test_envs_start_on_their_own_bars_inside_the_segment() -> None:
    horizon = 40
    env = TradingEnv(PANEL, "train", EnvConfig(horizon_bars=horizon), num_envs=256, seed=0)
    starts = env.state.start
    assert len(torch.unique(starts)) > 100
    assert int(starts.min()) >= TRAIN_START
    assert int(starts.max()) <= TRAIN_STOP - 1 - horizon
    assert int(starts.min()) < TRAIN_START + 10
    assert int(starts.max()) > TRAIN_STOP - 1 - horizon - 10


def test_resetting_one_env_does_not_move_another() -> None:
    config = EnvConfig(horizon_bars=50)
    env = TradingEnv(PANEL, "train", config, num_envs=8, seed=3)
    twin = TradingEnv(PANEL, "train", config, num_envs=8, seed=3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        actions = torch.rand(8, env.action_dim, generator=generator)
        env.step(actions)
        twin.step(actions)
    mask = torch.zeros(8, dtype=torch.bool)
    mask[2] = True
    obs = env.reset_envs(mask)
    assert env.cash_usd[2] == config.initial_cash_usd
    assert not env.shares[2].any()
    assert env.bar_index[2] == env.state.start[2]
    assert obs[2, -2] == 1.0  # cash share: a fresh episode holds only cash
    assert not obs[2, -2 - env.num_assets : -2].any()
    others = ~mask
    for ours, theirs in zip(env.state, twin.state, strict=True):
        assert torch.equal(ours[others], theirs[others])
    for _ in range(10):
        actions = torch.rand(8, env.action_dim, generator=generator)
        obs, reward, _, _, info = env.step(actions)
        twin_obs, twin_reward, _, _, twin_info = twin.step(actions)
        assert torch.equal(obs[others], twin_obs[others])
        assert torch.equal(reward[others], twin_reward[others])
        assert torch.equal(info["equity_usd"][others], twin_info["equity_usd"][others])


def test_truncation_at_the_horizon_and_never_termination() -> None:
    horizon = 7
    config = EnvConfig(horizon_bars=horizon, random_start=False)
    env = TradingEnv(PANEL, "train", config, num_envs=4, seed=0)
    obs, info = env.reset()
    assert (info["bar_index"] == TRAIN_START).all()
    for step in range(1, 2 * horizon + 1):
        obs, _, terminated, truncated, info = env.step(torch.rand(4, env.action_dim))
        assert not terminated.any()
        assert bool(truncated.all()) == (step % horizon == 0)
        assert not bool(truncated.any()) or step % horizon == 0
        assert (info["bar_index"] == TRAIN_START + (step - 1) % horizon + 1).all()
        if step % horizon == 0:
            assert (obs[:, -2] == 1.0).all()  # the next episode starts in cash
            assert (env.bar_index == TRAIN_START).all()
        else:
            assert torch.equal(info["final_obs"], obs)


def test_one_clock_a_bar_looks_the_same_in_a_short_episode_and_a_whole_segment_run() -> None:
    """Training (short episodes) and evaluation (one episode over the segment) see the same rows.

    Same bar, same portfolio: the same observation, whatever the episode's start or horizon; the
    final observation of a truncated training episode is the evaluation run's mid-episode one.
    """
    horizon = 7
    short_config = EnvConfig(horizon_bars=horizon, random_start=False)
    short = TradingEnv(PANEL, "train", short_config, num_envs=3, seed=0)
    whole = TradingEnv(PANEL, "train", EnvConfig(horizon_bars=10_000, random_start=False), num_envs=3, seed=0)
    short_obs, _ = short.reset()
    whole_obs, _ = whole.reset()
    assert torch.equal(short_obs, whole_obs)
    generator = torch.Generator().manual_seed(4)
    for step in range(1, horizon + 1):
        actions = torch.rand(3, short.action_dim, generator=generator)
        short_obs, _, _, short_truncated, short_info = short.step(actions)
        whole_obs, _, _, whole_truncated, _ = whole.step(actions)
        assert bool(short_truncated.all()) == (step == horizon)
        assert not whole_truncated.any()
        assert torch.equal(short_info["final_obs"], whole_obs)


def test_backtest_mode_runs_the_whole_segment_once_and_truncates_at_its_end() -> None:
    start, stop = PANEL.segments["backtest"]
    config = EnvConfig(horizon_bars=10_000, random_start=False)
    env = TradingEnv(PANEL, "backtest", config, num_envs=3, seed=0)
    env.reset()
    for bar in range(start + 1, stop):
        _, _, _, truncated, info = env.step(torch.rand(3, env.action_dim))
        assert (info["bar_index"] == bar).all()
        assert bool(truncated.all()) == (bar == stop - 1)


@pytest.mark.parametrize("reward", ["log_return", "pnl", "risk_penalised", "excess_log_return"])
def test_reward_modes(reward: str) -> None:
    config = EnvConfig(reward=reward, reward_scale=10.0, risk_penalty=3.0, horizon_bars=30)  # type: ignore[arg-type]
    env = TradingEnv(PANEL, "train", config, num_envs=16, seed=1)
    env.reset()
    for _ in range(20):
        before = env.equity_usd.double()
        _, got, _, _, info = env.step(torch.rand(16, env.action_dim))
        after = info["equity_usd"].double()
        log_return = torch.log(after / before)
        bar = info["bar_index"]
        close = PANEL.close.double()
        equal_weight = torch.log((close[bar] / close[bar - 1]).mean(dim=1))
        expected = {
            "log_return": log_return,
            "excess_log_return": (log_return - equal_weight) - 3.0 * (log_return - equal_weight) ** 2,
            "pnl": (after - before) / config.initial_cash_usd,
            "risk_penalised": log_return - 3.0 * log_return**2,
        }[reward] * 10.0
        torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)


def test_all_zero_weights_mean_all_cash() -> None:
    config = EnvConfig(max_participation=math.inf, horizon_bars=30)
    liquid = random_panel(num_bars=300, num_assets=6, num_features=3, seed=11, untradable_fraction=0.0)
    env = TradingEnv(liquid, "train", config, num_envs=4, seed=0)  # no filled bar blocks a sell
    env.step(torch.rand(4, env.action_dim))
    assert (env.shares.sum(dim=1) > 0).all()
    _, _, _, _, info = env.step(torch.zeros(4, env.action_dim))
    assert not info["shares"].any()
    assert torch.equal(info["cash_usd"], info["equity_usd"])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("initial_cash_usd", 0.0, "initial_cash_usd"),
        ("fee_rate", -0.1, "fee_rate"),
        ("fee_rate", 1.0, "fee_rate"),
        ("half_spread_bps", -1.0, "half_spread_bps"),
        ("max_participation", 0.0, "max_participation"),
        ("max_participation", math.nan, "max_participation"),
        ("action_mode", "long_short", "action_mode"),
        ("fill", "same_close", "fill"),
        ("reward", "sharpe", "reward"),
        ("max_shares", -5.0, "max_shares"),
        ("reward_scale", math.inf, "reward_scale"),
        ("risk_penalty", -1.0, "risk_penalty"),
        ("horizon_bars", 0, "horizon_bars"),
        ("horizon_bars", 2.5, "horizon_bars"),
        ("rebalance_band", -0.01, "rebalance_band"),
        ("rebalance_band", 1.0, "rebalance_band"),
        ("rebalance_band", math.nan, "rebalance_band"),
        ("start_portfolio", "random", "start_portfolio"),
    ],
)
def test_bad_config_is_a_one_line_spec_error(field: str, value: object, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        EnvConfig(**{field: value})  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


def test_bad_env_arguments_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="segment 'test'"):
        TradingEnv(PANEL, "test", EnvConfig(), num_envs=2, seed=0)
    with pytest.raises(SpecError, match="num_envs"):
        TradingEnv(PANEL, "train", EnvConfig(), num_envs=0, seed=0)
    tiny = random_panel(num_bars=5, num_assets=2, num_features=1, seed=0, segments={"train": (0, 1)})
    with pytest.raises(SpecError, match="at least 2"):
        TradingEnv(tiny, "train", EnvConfig(), num_envs=2, seed=0)
    env = TradingEnv(PANEL, "train", EnvConfig(), num_envs=2, seed=0)
    with pytest.raises(SpecError, match="actions must have shape"):
        env.step(torch.rand(2, env.action_dim - 1))
    with pytest.raises(SpecError, match="bool mask"):
        env.reset_envs(torch.ones(2))
    np.testing.assert_equal(env.obs_dim, PANEL.num_assets * PANEL.num_features + PANEL.num_assets + 2)


def test_envs_on_one_panel_share_its_tables_until_the_panel_goes() -> None:
    panel = random_panel(num_bars=50, num_assets=3, num_features=2, seed=0)
    train = TradingEnv(panel, "train", EnvConfig(), num_envs=2, seed=0)
    validation = TradingEnv(panel, "validation", EnvConfig(random_start=False), num_envs=2, seed=1)
    assert train.market.obs_template is validation.market.obs_template
    assert train.market.bars is validation.market.bars
    at_close = TradingEnv(panel, "train", EnvConfig(fill="next_close"), num_envs=2, seed=0)
    assert at_close.market.bars is not train.market.bars
    before = len(market_module._TABLES)
    del panel, train, validation, at_close
    gc.collect()
    assert len(market_module._TABLES) == before - 2


def test_host_episode_clock_matches_the_always_autoresetting_step() -> None:
    config = EnvConfig(horizon_bars=6, half_spread_bps=2.0)
    clocked = TradingEnv(PANEL, "train", config, num_envs=6, seed=4)
    plain = TradingEnv(PANEL, "train", config, num_envs=6, seed=4)
    generator = torch.Generator().manual_seed(2)
    partial_truncations = 0
    for step in range(40):
        if step in (3, 17):
            mask = torch.tensor([True, False, False, True, False, step == 17])
            clocked.reset_envs(mask)
            plain.reset_envs(mask)
        actions = torch.rand(6, clocked.action_dim, generator=generator)
        obs, reward, terminated, truncated, info = clocked.step(actions)
        plain.state, out = plain.step_fn(plain.state, actions)
        assert torch.equal(obs, out.obs)
        assert torch.equal(info["final_obs"], out.final_obs)
        assert torch.equal(reward, out.reward)
        assert torch.equal(truncated, out.truncated)
        assert torch.equal(terminated, out.terminated)
        for ours, theirs in zip(clocked.state, plain.state, strict=True):
            assert torch.equal(ours, theirs)
        partial_truncations += int(0 < int(truncated.sum()) < 6)
    assert partial_truncations > 0, "the resets should have put the envs' episodes out of phase"


def test_all_cash_rows_are_what_the_env_shows_an_account_that_holds_only_cash() -> None:
    """:func:`all_cash_rows` (the probes' and the skill bench's score-IC rows) equals the env's first
    observation of a pass (all cash) at every start bar."""
    config = EnvConfig(horizon_bars=5, random_start=False)
    progress = torch.from_numpy(market_module.session_progress(PANEL.session_ids))
    rows = all_cash_rows(PANEL.features.float(), progress)
    for segment in ("train", "validation", "backtest"):
        start, _ = PANEL.segments[segment]
        obs, _ = TradingEnv(PANEL, segment, config, num_envs=1, seed=0).reset()
        assert torch.equal(obs[0], rows[start])


@pytest.mark.parametrize("whole_shares", [False, True])
def test_an_invested_start_holds_equal_weights_of_the_tradable_assets_and_is_worth_the_initial_cash(
    whole_shares: bool,
) -> None:
    panel = random_panel(num_bars=200, num_assets=5, num_features=2, seed=3, untradable_fraction=0.3)
    config = EnvConfig(horizon_bars=9, start_portfolio="equal_weight", whole_shares=whole_shares)
    env = TradingEnv(panel, "train", config, num_envs=64, seed=1)
    obs, _ = env.reset()
    state = env.state
    close = env.market.bars[state.t, CLOSE_ROW].to(torch.float64)  # the env's float32 closes
    tradable = panel.tradable[state.t] & (close > 0)
    holdings = state.shares * close
    assert not state.shares[~tradable].any(), "an asset not tradable at the start bar is held"
    assert (state.cash_usd >= 0).all()
    np.testing.assert_allclose(state.equity_usd.numpy(), config.initial_cash_usd, rtol=1e-12)
    np.testing.assert_allclose(
        (state.cash_usd + holdings.sum(1)).numpy(), state.equity_usd.numpy(), rtol=1e-15
    )
    count = tradable.sum(1, keepdim=True).clamp(min=1).to(torch.float64)
    target = torch.where(tradable, config.initial_cash_usd / count, 0.0)
    if whole_shares:
        assert torch.equal(state.shares, state.shares.round())
        assert ((target - holdings) < close).all()
        assert (holdings <= target * (1 + 1e-12)).all()
    else:
        np.testing.assert_allclose(holdings.numpy(), target.numpy(), rtol=1e-12, atol=1e-6)
    # the agent sees the book it holds: weights and cash share at the start bar's close
    weights = obs[:, 5 * 2 : 5 * 2 + 5].double()
    np.testing.assert_allclose(weights.numpy(), (holdings / state.equity_usd[:, None]).numpy(), atol=1e-6)


def test_holding_an_invested_start_costs_nothing_and_a_cash_target_pays_the_fee_to_get_out() -> None:
    panel = random_panel(num_bars=120, num_assets=4, num_features=2, seed=5, untradable_fraction=0.0)
    config = EnvConfig(
        horizon_bars=20,
        start_portfolio="equal_weight",
        fee_rate=0.002,
        rebalance_band=0.01,
        max_participation=math.inf,
    )
    env = TradingEnv(panel, "train", config, num_envs=16, seed=2)
    env.reset()
    close = env.market.bars[env.state.t, CLOSE_ROW].to(torch.float64)
    hold = (
        torch.cat([env.state.cash_usd[:, None], env.state.shares * close], 1) / env.state.equity_usd[:, None]
    )
    *_, info = env.step(hold.float())
    assert not info["cost_usd"].any()
    env.reset()
    cash_only = torch.zeros(env.num_envs, env.action_dim)
    cash_only[:, 0] = 1.0
    *_, info = env.step(cash_only)
    assert (info["cost_usd"] > 0).all()
    assert not info["shares"].any()


def test_reset_at_starts_invested_books_at_the_chosen_bars() -> None:
    config = EnvConfig(horizon_bars=5, start_portfolio="equal_weight")
    env = TradingEnv(PANEL, "train", config, num_envs=3, seed=0)
    starts = torch.tensor([TRAIN_START, TRAIN_START + 7, TRAIN_START + 30])
    env.reset_at(starts)
    assert torch.equal(env.state.t, starts)
    np.testing.assert_allclose(env.state.equity_usd.numpy(), config.initial_cash_usd, rtol=1e-12)
    assert env.state.shares.any(dim=1).all()


def test_a_fully_invested_book_ignores_the_cash_score() -> None:
    panel = random_panel(num_bars=80, num_assets=3, num_features=2, seed=4, untradable_fraction=0.0)
    base = EnvConfig(horizon_bars=10, fee_rate=0.001, max_participation=math.inf)
    invested = EnvConfig(horizon_bars=10, fee_rate=0.001, max_participation=math.inf, fully_invested=True)
    mostly_cash = torch.tensor([[0.9, 0.05, 0.03, 0.02]]).repeat(4, 1)
    free = TradingEnv(panel, "train", base, num_envs=4, seed=3)
    mandated = TradingEnv(panel, "train", invested, num_envs=4, seed=3)
    *_, free_info = free.step(mostly_cash)
    *_, mandated_info = mandated.step(mostly_cash)
    assert (free_info["cash_usd"] > 0.8 * base.initial_cash_usd).all()
    assert (mandated_info["cash_usd"] < 1e-6 * base.initial_cash_usd).all(), "the cash score was traded"
    # the same book as the asset scores alone ask for
    assets_only = mostly_cash.clone()
    assets_only[:, 0] = 0.0
    again = TradingEnv(panel, "train", base, num_envs=4, seed=3)
    *_, same = again.step(assets_only)
    assert torch.equal(same["shares"], mandated_info["shares"])
    all_zero = torch.zeros(4, 4)
    all_zero[:, 0] = 1.0  # only a cash score: nothing to spread, so the book stays in cash
    fresh = TradingEnv(panel, "train", invested, num_envs=4, seed=3)
    *_, cash_info = fresh.step(all_zero)
    assert not cash_info["shares"].any()
