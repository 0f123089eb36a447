"""Run-ahead backtests: many bars at a time while the account holds, the same ledger as bar by bar."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from finpod.backtest import runner
from finpod.backtest.ensemble import EnsemblePolicy, ensemble_policy
from finpod.backtest.run_ahead import DENSE_SHARE, MAX_BARS, MIN_BARS, next_block_bars, run_ahead, runs_ahead
from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.env.shape import EnvShape
from finpod.pipeline.training import agent_factory, deterministic_policy
from podracer.ppo import PPOConfig

CPU = torch.device("cpu")
LEDGER_FIELDS = ("equity_usd", "cash_usd", "shares", "cost_usd", "traded_usd", "fill_price_usd")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def minute_panel() -> Panel:
    bars = synth_market(4, 12, "1min", seed=5, start="2021-03-01")
    days = sorted(bars["timestamp"].dt.date.unique())
    segments = {"train": (days[0], days[5]), "validation": (days[6], days[-1])}
    return build_panel(
        bars, freq="1min", start=days[0], end=days[-1], segments=segments, device=CPU, benchmark_symbol=None
    )


def _traders(panel: Panel, policy: str = "mlp", scale: float = 0.1) -> dict[str, object]:
    shape = EnvShape.of(panel.num_assets, panel.num_features, "weights")
    config = PPOConfig(hidden_sizes=(64, 64), activation="tanh", policy=policy, rollout_steps=16)
    agents = [agent_factory(shape, CPU)(config, seed) for seed in range(3)]
    for seed, agent in enumerate(agents):  # distinct, decisive traders
        with torch.no_grad():
            generator = torch.Generator().manual_seed(seed)
            for parameter in agent.model.parameters():
                parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return {"best": deterministic_policy(agents[0]), "ensemble": ensemble_policy(agents, "weights")}


def _trade_bars(ledger: object) -> np.ndarray:
    return np.flatnonzero(ledger.traded_usd > 0)  # type: ignore[attr-defined]


WEIGHT_ROUNDING = 1e-6
"""How far a run-ahead trade may differ from the bar-by-bar one, as a fraction of the account's equity:
a K-row matrix product may round a float32 action differently from a one-row product (a weight to
~6e-8), so a trade, the difference between a target and a holding, moves by about that much equity."""


def _assert_close_ledgers(ours: list[object], theirs: list[object]) -> None:
    """The same trades on the same bars; every amount within :data:`WEIGHT_ROUNDING` of equity."""
    for mine, reference in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(_trade_bars(mine), _trade_bars(reference))
        equity = reference.equity_usd  # type: ignore[attr-defined]
        for name in ("equity_usd", "cash_usd", "cost_usd", "traded_usd"):
            gap = np.abs(getattr(mine, name) - getattr(reference, name))
            assert np.all(gap <= WEIGHT_ROUNDING * equity), (name, float(np.max(gap / equity)))
        value_gap = np.abs(mine.shares - reference.shares) * reference.close_usd  # type: ignore[attr-defined]
        assert np.all(value_gap <= WEIGHT_ROUNDING * equity[:, None]), float(np.max(value_gap))


@pytest.mark.parametrize(
    ("band", "whole_shares", "participation"),
    [(0.03, False, 1.0), (0.0, False, 1.0), (0.03, True, 0.001)],
    ids=["band", "every-bar", "whole-shares-volume-cap"],
)
def test_running_ahead_gives_the_bar_by_bar_ledgers(
    minute_panel: Panel, band: float, whole_shares: bool, participation: float
) -> None:
    traders = list(_traders(minute_panel).values())
    config = EnvConfig(
        fee_rate=0.001, rebalance_band=band, whole_shares=whole_shares, max_participation=participation
    )
    ahead = [run_ahead(minute_panel, "validation", config, trader, CPU) for trader in traders]  # type: ignore[arg-type]
    assert all(ledger is not None for ledger in ahead)
    stepped = runner.run_policies(minute_panel, "validation", config, traders, CPU, ahead=False)
    _assert_close_ledgers(ahead, stepped)
    bars = len(stepped[0].equity_usd)
    for ledger in ahead:
        trades = len(_trade_bars(ledger))
        assert 3 < trades < bars - 1 if band else trades > bars // 2  # some bars trade, others hold


def test_blocks_grow_while_the_account_holds_and_shrink_after_a_trade(minute_panel: Panel) -> None:
    best = _traders(minute_panel)["best"]
    blocks: Counter[int] = Counter()
    ledger = run_ahead(minute_panel, "validation", EnvConfig(rebalance_band=0.03), best, CPU, blocks)
    assert ledger is not None
    trades, bars = len(_trade_bars(ledger)), len(ledger.equity_usd)
    assert sum(length * count for length, count in blocks.items()) >= bars - 1  # every bar, some twice
    assert sum(blocks.values()) <= 2 * trades + bars // MIN_BARS
    assert max(blocks) > 16  # long stretches without a trade ran as long blocks
    assert next_block_bars(kept=8, block=8) == 16
    assert next_block_bars(kept=MAX_BARS, block=MAX_BARS) == MAX_BARS
    assert next_block_bars(kept=3, block=64) == 3
    assert next_block_bars(kept=1, block=64) == MIN_BARS == 1


def test_a_trader_runs_ahead_the_same_alone_beside_others_and_at_any_thread_count(
    minute_panel: Panel,
) -> None:
    traders = list(_traders(minute_panel).values())
    config = EnvConfig(fee_rate=0.001, rebalance_band=0.03)
    together = runner.run_policies(minute_panel, "validation", config, traders, CPU)
    alone = runner.run_policies(minute_panel, "validation", config, traders[1:], CPU)
    torch.set_num_threads(2)
    two_threads = runner.run_policies(minute_panel, "validation", config, traders, CPU)
    assert torch.get_num_threads() == 2  # restored after the pass's one thread
    for name in LEDGER_FIELDS:
        np.testing.assert_array_equal(getattr(together[1], name), getattr(alone[0], name), err_msg=name)
        for mine, other in zip(together, two_threads, strict=True):
            np.testing.assert_array_equal(getattr(mine, name), getattr(other, name), err_msg=name)


def test_only_row_wise_policies_run_ahead(minute_panel: Panel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents' frozen policies (flat MLP, cross-sectional) and ensembles of them run ahead, with the
    bar-by-bar ledgers; a user's function steps bar by bar beside them."""
    flat = _traders(minute_panel)
    cross = _traders(minute_panel, policy="cross_sectional", scale=0.03)
    for trader in (*flat.values(), *cross.values()):
        assert runs_ahead(trader)  # type: ignore[arg-type]
    user = _traders(minute_panel, policy="cross_sectional", scale=0.03)["best"]
    function = lambda obs: user(obs)  # noqa: E731  (a plain function: not known to be row-wise)
    assert not runs_ahead(function)
    assert not runs_ahead(EnsemblePolicy([flat["best"], function], "weights"))
    with pytest.raises(ValueError, match="row-wise frozen policy"):
        run_ahead(minute_panel, "validation", EnvConfig(), function, CPU)
    config = EnvConfig(rebalance_band=0.03)
    traders = [cross["best"], function, cross["ensemble"]]
    stepped_calls: list[int] = []
    step_policies = runner.step_policies

    def spy(panel: Panel, segment: str, config: EnvConfig, policies: list[object], *args: object) -> object:
        stepped_calls.append(len(policies))
        return step_policies(panel, segment, config, policies, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "step_policies", spy)
    ledgers = runner.run_policies(minute_panel, "validation", config, traders, CPU)  # type: ignore[arg-type]
    assert stepped_calls == [1]  # only the plain function stepped
    stepped = runner.run_policies(minute_panel, "validation", config, traders, CPU, ahead=False)  # type: ignore[arg-type]
    _assert_close_ledgers(ledgers, stepped)
    for ledger in (ledgers[0], ledgers[2]):
        assert 3 < len(_trade_bars(ledger)) < DENSE_SHARE * len(ledger.equity_usd)


def test_traders_run_ahead_only_where_accounts_can_hold(
    minute_panel: Panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a band, frozen traders run ahead (one thread); without one they trade on every bar and step."""
    traders = list(_traders(minute_panel).values())
    used: Counter[int] = Counter()
    ledgers = runner.run_policies(
        minute_panel, "validation", EnvConfig(rebalance_band=0.05), traders, CPU, used
    )
    assert used == Counter({1: 2 * (len(ledgers[0].equity_usd) - 1)})
    assert runner.worth_running_ahead(EnvConfig(rebalance_band=0.03))
    assert not runner.worth_running_ahead(EnvConfig(rebalance_band=0.0))
    assert not runner.worth_running_ahead(EnvConfig(rebalance_band=0.03, action_mode="share_delta"))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("ran ahead without a band")

    monkeypatch.setattr(runner, "run_ahead", refuse)
    runner.run_policies(minute_panel, "validation", EnvConfig(rebalance_band=0.0), traders, CPU)


def test_a_trader_that_trades_on_most_bars_steps_instead(minute_panel: Panel) -> None:
    """Running ahead gives up on a dense trader after PROBE_BARS bars; it then steps with the others."""
    best = _traders(minute_panel)["best"]
    dense, sparse = EnvConfig(rebalance_band=0.001), EnvConfig(rebalance_band=0.05)
    assert run_ahead(minute_panel, "validation", dense, best, CPU, give_up_if_dense=True) is None  # type: ignore[arg-type]
    assert run_ahead(minute_panel, "validation", sparse, best, CPU, give_up_if_dense=True) is not None  # type: ignore[arg-type]
    used: Counter[int] = Counter()
    ledger = runner.run_policies(minute_panel, "validation", dense, [best], CPU, used)[0]  # type: ignore[list-item]
    stepped = runner.run_policies(minute_panel, "validation", dense, [best], CPU, ahead=False)[0]  # type: ignore[list-item]
    for name in LEDGER_FIELDS:
        np.testing.assert_array_equal(getattr(ledger, name), getattr(stepped, name), err_msg=name)
    assert len(_trade_bars(ledger)) > DENSE_SHARE * len(ledger.equity_usd)
