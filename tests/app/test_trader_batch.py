"""The traders' stacked bar-by-bar pass and its measured thread count: the same ledgers as one call per
trader (run-ahead, the default for these traders, is tested in test_run_ahead.py)."""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter

import numpy as np
import pytest
import torch

from finpod.backtest import runner
from finpod.backtest.ensemble import EnsemblePolicy, ensemble_policy
from finpod.backtest.thread_tuner import ThreadTuner
from finpod.backtest.trader_batch import TraderBatch
from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.synth import synth_market
from finpod.env.config import EnvConfig
from finpod.env.shape import EnvShape
from finpod.env.trading_env import TradingEnv
from finpod.pipeline.training import agent_factory, deterministic_policy
from podracer.api import StackedActors
from podracer.ppo import PPOConfig

CPU = torch.device("cpu")
LEDGER_FIELDS = ("equity_usd", "cash_usd", "shares", "cost_usd", "traded_usd", "fill_price_usd")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def panel() -> Panel:
    bars = synth_market(4, 300, "1d", seed=3)
    days = sorted(bars["timestamp"].dt.date.unique())
    segments = {"train": (days[0], days[199]), "validation": (days[200], days[-1])}
    return build_panel(
        bars, freq="1d", start=days[0], end=days[-1], segments=segments, device=CPU, benchmark_symbol=None
    )


def _policies(panel: Panel, policy: str = "mlp") -> dict[str, object]:
    shape = EnvShape.of(panel.num_assets, panel.num_features, "weights")
    config = PPOConfig(hidden_sizes=(32, 32), activation="relu", policy=policy, rollout_steps=16)
    agents = [agent_factory(shape, CPU)(config, seed) for seed in range(3)]
    for seed, agent in enumerate(agents):  # distinct, decisive traders: random heads, stats of the data
        with torch.no_grad():
            generator = torch.Generator().manual_seed(seed)
            for parameter in agent.model.parameters():
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    return {"best": deterministic_policy(agents[0]), "ensemble": ensemble_policy(agents, "weights")}


def _unstacked(policies: dict[str, object]) -> list[object]:
    """The same traders as plain functions: one call per trader per bar, no stacking."""
    return [lambda obs, policy=policy: policy(obs) for policy in policies.values()]  # type: ignore[misc]


def _assert_same_ledgers(ours: list[object], theirs: list[object]) -> None:
    for mine, reference in zip(ours, theirs, strict=True):
        for name in LEDGER_FIELDS:
            np.testing.assert_array_equal(getattr(mine, name), getattr(reference, name), err_msg=name)


def test_best_and_ensemble_run_as_one_stacked_pass_with_the_same_ledgers(panel: Panel) -> None:
    policies = _policies(panel)
    batch = TraderBatch(list(policies.values()))
    assert batch.stacked is not None
    assert batch.stacked.count == 4
    assert not TraderBatch(_unstacked(policies)).stacked
    config = EnvConfig(fee_rate=0.001)
    stacked = runner.run_policies(panel, "validation", config, list(policies.values()), CPU, ahead=False)
    plain = runner.run_policies(panel, "validation", config, _unstacked(policies), CPU)
    _assert_same_ledgers(stacked, plain)
    assert float(np.ptp(stacked[0].traded_usd)) > 0
    assert float(np.ptp(stacked[1].traded_usd)) > 0


def test_the_cross_sectional_network_runs_unstacked(panel: Panel) -> None:
    policies = _policies(panel, policy="cross_sectional")
    assert TraderBatch(list(policies.values())).stacked is None
    assert isinstance(policies["ensemble"], EnsemblePolicy)


def test_a_pass_that_switches_thread_counts_gives_the_same_ledgers(
    panel: Panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    policies = list(_policies(panel).values())
    config = EnvConfig(fee_rate=0.001)
    one_thread = runner.run_policies(panel, "validation", config, policies, CPU, ahead=False)
    monkeypatch.setattr(runner, "ThreadTuner", functools.partial(ThreadTuner, probe_steps=3, period_steps=5))
    torch.set_num_threads(2)
    used: Counter[int] = Counter()
    switching = runner.run_policies(panel, "validation", config, policies, CPU, used, ahead=False)
    assert set(used) == {1, 2}
    assert sum(used.values()) == len(one_thread[0].equity_usd) - 1
    assert torch.get_num_threads() == 2  # restored
    _assert_same_ledgers(switching, one_thread)


def test_the_tuner_probes_each_count_then_runs_the_faster(monkeypatch: pytest.MonkeyPatch) -> None:
    times = {1: 10.0, 2: 1.0}  # seconds per step at each count: 2 threads win
    now = [0.0]
    monkeypatch.setattr("finpod.backtest.thread_tuner.time.perf_counter", lambda: now[0])
    tuner = ThreadTuner((1, 2), probe_steps=2, period_steps=4, max_period_steps=8)
    seen = []
    for step in range(40):
        if step == 26:  # the machine changes: 1 thread wins from now on
            times = {1: 1.0, 2: 10.0}
        tuner.tick()
        seen.append(torch.get_num_threads())
        now[0] += times[torch.get_num_threads()]
    tuner.close()
    probe = [1, 1, 2, 2]
    first_period, doubled, capped, after_change = [2] * 4, [2] * 8, [2] * 8, [1] * 4
    # the first winner runs one period; it wins again: the period doubles, up to max_period_steps
    # (the machine changes at step 26, in that period); a new winner: back to the first period
    assert seen == probe + first_period + probe + doubled + probe + capped + probe + after_change
    assert tuner.steps_at == Counter({2: 28, 1: 12})
    assert torch.get_num_threads() == 1  # restored
    single = ThreadTuner((1, 1), probe_steps=2, period_steps=4)
    for _ in range(9):
        single.tick()
        assert torch.get_num_threads() == 1
    assert single.candidates == (1,)
    assert single.steps_at == Counter({1: 9})


def test_an_ensemble_alone_equals_its_members_averaged(panel: Panel) -> None:
    policies = _policies(panel)
    ensemble = policies["ensemble"]
    assert isinstance(ensemble, EnsemblePolicy)
    obs = TradingEnv(panel, "validation", EnvConfig(), 1, 0, CPU).reset(seed=0)[0]
    stacked = TraderBatch([ensemble])(obs)
    assert torch.equal(stacked, ensemble(obs))
    members = torch.stack([member(obs) for member in ensemble.members])
    torch.testing.assert_close(stacked.sum(dim=1), torch.ones(1))
    assert members.shape == (3, 1, stacked.shape[1])
    assert dataclasses.is_dataclass(ensemble.members[0])


def test_frozen_networks_stay_stacked_beside_a_policy_that_is_not(
    panel: Panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass with the linear baseline among the traders (``run_backtest(one_pass=True)``): the
    networks stay one stacked pass on a CPU, and the thread tuner is not used for the mixed batch."""
    policies = _policies(panel)
    tilt = torch.tensor([[0.1, 0.2, 0.3, 0.2, 0.2]])
    other = lambda obs: tilt.expand(obs.shape[0], -1)  # noqa: E731 (a user's function, say)
    mixed = [policies["best"], other, policies["ensemble"]]
    batch = TraderBatch(mixed)  # type: ignore[list-item]
    assert batch.stacked is not None
    assert batch.stacked.count == 4
    assert not batch.all_stacked
    assert TraderBatch(list(policies.values())).all_stacked  # type: ignore[arg-type]
    assert runner.thread_candidates(batch, 3) == (runner.threads_for(3),)
    stacked_calls = []
    call = StackedActors.__call__

    def counted(self: StackedActors, obs: torch.Tensor) -> torch.Tensor:
        stacked_calls.append(obs.shape[0])
        return call(self, obs)

    monkeypatch.setattr(StackedActors, "__call__", counted)
    config = EnvConfig(fee_rate=0.001)
    together = runner.run_policies(panel, "validation", config, mixed, CPU, ahead=False)  # type: ignore[arg-type]
    plain = runner.run_policies(panel, "validation", config, [*_unstacked(policies), other], CPU)
    assert stacked_calls  # every bar's networks in one stacked call
    assert set(stacked_calls) == {4}
    _assert_same_ledgers([together[0], together[2], together[1]], plain)
    assert not np.array_equal(together[1].equity_usd, together[0].equity_usd)
