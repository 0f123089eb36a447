"""The validation score the leaderboard ranks by: annualised Sharpe of daily validation returns."""

from __future__ import annotations

import empyrical as ep
import pytest
import torch

from finpod.backtest.runner import run_backtest
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.pipeline.training import validation_score

CPU = torch.device("cpu")
CONFIG = EnvConfig(initial_cash_usd=1_000.0, fee_rate=0.001, random_start=False)


def _constant(weights: list[float]) -> object:
    target = torch.tensor([weights])
    return lambda obs: target.expand(obs.shape[0], target.shape[1])


def test_cash_scores_zero(tiny_panel: Panel) -> None:
    assert validation_score(tiny_panel, CONFIG, _constant([1.0, 0.0, 0.0]), CPU) == 0.0


def test_score_is_the_sharpe_of_the_validation_returns(tiny_panel: Panel) -> None:
    policy = _constant([0.2, 0.8, 0.0])
    returns = run_backtest(tiny_panel, "validation", CONFIG, {"p": policy}, CPU).traders["p"].returns
    expected = float(ep.sharpe_ratio(returns.to_numpy()))
    assert validation_score(tiny_panel, CONFIG, policy, CPU) == pytest.approx(expected)
    assert expected > 0.0
