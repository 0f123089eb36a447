"""The deterministic backtest pass: hand-checked fills, costs and baselines over a known panel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from finpod.backtest.chunked import chunk_plan, chunked_equity
from finpod.backtest.runner import run_backtest, run_policies, run_policy
from finpod.backtest.threads import SMALL_BATCH_ROWS, threads_for
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig

CASH_USD = 1_000.0
FEE_RATE = 0.01
CPU = torch.device("cpu")


def _constant(weights: list[float]) -> object:
    target = torch.tensor([weights])
    return lambda obs: target.expand(obs.shape[0], target.shape[1])


def test_all_in_one_asset_matches_hand_computation(tiny_panel: Panel) -> None:
    config = EnvConfig(initial_cash_usd=CASH_USD, fee_rate=FEE_RATE, max_participation=1.0)
    result = run_backtest(tiny_panel, "backtest", config, {"all_a": _constant([0.0, 1.0, 0.0])}, CPU)
    trader = result.traders["all_a"]
    # Observes bar 6 at its close, fills at bar 7's open (16 USD); A's last close is 27 USD.
    shares = CASH_USD / (1 + FEE_RATE) / 16.0
    assert trader.transactions["amount"].iloc[0] == pytest.approx(shares, rel=1e-5)
    assert len(trader.transactions) == 1
    assert trader.equity_usd.iloc[-1] == pytest.approx(shares * 27.0, rel=1e-5)
    assert trader.costs_usd.iloc[0] == pytest.approx(CASH_USD - shares * 16.0, rel=1e-4)
    assert list(result.traders) == ["all_a", "equal_weight", "market", "cash"]
    assert result.benchmark_name == "market"


def test_cash_policy_never_trades(tiny_panel: Panel) -> None:
    config = EnvConfig(initial_cash_usd=CASH_USD, fee_rate=FEE_RATE)
    result = run_backtest(tiny_panel, "validation", config, {"idle": _constant([1.0, 0.0, 0.0])}, CPU)
    idle = result.traders["idle"]
    assert (idle.returns == 0.0).all()
    assert idle.transactions.empty
    assert result.segment == "validation"
    assert len(idle.returns) == 2


class _NoHostRead(torch.Tensor):
    """A tensor that fails the test when the backtest loop reads it on the host (a device sync)."""

    def _fail(self, *args: object) -> None:
        raise AssertionError("run_policy read an env output on the host inside the step loop")

    __float__ = __int__ = __index__ = __bool__ = item = tolist = numpy = cpu = _fail  # type: ignore[assignment]


def test_run_policy_does_not_read_the_env_on_the_host_per_step(
    tiny_panel: Panel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finpod.backtest.runner import run_policy
    from finpod.env.trading_env import TradingEnv

    step = TradingEnv.step

    def guarded(self: TradingEnv, actions: torch.Tensor) -> tuple[object, ...]:
        obs, reward, terminated, truncated, info = step(self, actions)
        return obs, reward, terminated, truncated, {k: v.as_subclass(_NoHostRead) for k, v in info.items()}

    config = EnvConfig(initial_cash_usd=CASH_USD, fee_rate=FEE_RATE, max_participation=1.0)
    with monkeypatch.context() as patch:
        patch.setattr(TradingEnv, "step", guarded)
        ledger = run_policy(tiny_panel, "backtest", config, _constant([0.0, 1.0, 0.0]), CPU)  # type: ignore[arg-type]
    reference = run_policy(tiny_panel, "backtest", config, _constant([0.0, 1.0, 0.0]), CPU)  # type: ignore[arg-type]
    assert ledger.equity_usd.tolist() == reference.equity_usd.tolist()


def _tilted(seed: int) -> object:
    """A state-dependent policy (reads the observation), different per seed."""
    weights = torch.rand(3, generator=torch.Generator().manual_seed(seed))

    def act(obs: torch.Tensor) -> torch.Tensor:
        wobble = torch.sin(obs.sum(dim=1, keepdim=True))
        return (weights + 0.3 * wobble).clamp(0.0, 1.0)

    return act


def test_one_batched_pass_equals_one_pass_per_policy(tiny_panel: Panel) -> None:
    config = EnvConfig(initial_cash_usd=CASH_USD, fee_rate=FEE_RATE, max_participation=1.0)
    policies = [_tilted(seed) for seed in range(4)]
    batched = run_policies(tiny_panel, "backtest", config, policies, CPU)
    for policy, ledger in zip(policies, batched, strict=True):
        alone = run_policy(tiny_panel, "backtest", config, policy, CPU)
        for field in ("equity_usd", "cash_usd", "shares", "cost_usd", "traded_usd", "fill_price_usd"):
            np.testing.assert_array_equal(getattr(ledger, field), getattr(alone, field), err_msg=field)
    assert len({float(ledger.equity_usd[-1]) for ledger in batched}) == len(policies)


def test_small_batches_run_on_one_thread_and_restore_the_setting(tiny_panel: Panel) -> None:
    seen: list[int] = []

    def watching(obs: torch.Tensor) -> torch.Tensor:
        seen.append(torch.get_num_threads())
        return torch.ones((obs.shape[0], 3))

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_policy(tiny_panel, "backtest", EnvConfig(initial_cash_usd=CASH_USD), watching, CPU)
        assert set(seen) == {threads_for(1)} == {1}
        assert torch.get_num_threads() == 2
        assert threads_for(SMALL_BATCH_ROWS) == 2
    finally:
        torch.set_num_threads(before)


def test_a_segment_pass_starts_in_cash_whatever_the_training_episodes_start_with(tiny_panel: Panel) -> None:
    invested = EnvConfig(initial_cash_usd=CASH_USD, fee_rate=FEE_RATE, start_portfolio="equal_weight")
    idle = _constant([1.0, 0.0, 0.0])
    result = run_backtest(tiny_panel, "validation", invested, {"idle": idle}, CPU)
    assert result.traders["idle"].transactions.empty
    assert (result.traders["idle"].returns == 0.0).all()
    first, stop = tiny_panel.segment("validation")
    equity = chunked_equity(tiny_panel, "validation", invested, idle, CPU, chunk_plan(stop - first, 1, 0))
    np.testing.assert_array_equal(equity, CASH_USD)
