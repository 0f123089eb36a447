"""The oracle: a policy that knows the synthetic market's planted signal, traded through the same env.

The planted signal (:mod:`finpod.data.synth`) makes bar ``t + 1``'s open-to-close log return of symbol
``m`` carry ``rho * d[t, m]``, with ``d[t, m]`` the symbol's bar-``t`` return minus the cross-sectional
mean. ``d`` is visible in the observation: the feature ``logret_1`` minus its cross-sectional mean, up
to one positive scale (train normalisation is one affine map per feature for all symbols). The oracle
knows ``rho`` and reads exactly that: with ``z[m] = sign(rho) * (x[m] - mean x) / std x`` (``x`` the
normalised ``logret_1`` of the ``M`` assets at bar ``t``), its target weights are

    ``w[m] = max(0, 1 + tilt * z[m]) / sum_j max(0, 1 + tilt * z[j])``, no cash,

a long-only tilt of equal weight toward the names the signal favours (:data:`ORACLE_TILT`; ``tilt = 0``
is equal weight). It ignores the drift alpha (invisible to an agent) and the costs. Its Sharpe minus
equal weight's (both through the same env: same fills, costs and band) is the *available edge* a
benchmark divides by: an agent's share captured is ``(agent - EW) / (oracle - EW)``. The oracle is a
strong reference, not the optimum: an agent may score above it (a share > 1).
"""

from __future__ import annotations

import math
from typing import Final

import empyrical as ep
import pandas as pd
import torch

from finpod.backtest.pyfolio_format import ledger_to_result
from finpod.backtest.runner import run_policy
from finpod.data.panel import Panel
from finpod.data.signals import SignalSpec
from finpod.env.config import EnvConfig
from finpod.errors import SpecError
from podracer.api import Policy

ORACLE_TILT: Final[float] = 1.0
"""Weight tilt per cross-sectional standard deviation of the signal (``w ∝ max(0, 1 + tilt z)``)."""
SIGNAL_FEATURE: Final[str] = "logret_1"
"""The feature that carries the planted signal."""
STD_FLOOR: Final[float] = 1e-6
"""A flat cross-section (every ``x`` equal) gets ``z = 0``: equal weight."""


def _check_weights_mode(config: EnvConfig) -> None:
    if config.action_mode != "weights":
        raise SpecError(
            f"env action_mode {config.action_mode!r}: the oracle and equal-weight policies target "
            "weights; set env.action_mode = 'weights'"
        )


def oracle_policy(panel: Panel, signal: SignalSpec, tilt: float = ORACLE_TILT) -> Policy:
    """The oracle's deterministic policy for ``panel``'s env (``weights`` action mode).

    Args:
        panel: the market the env trades (its features name ``logret_1``).
        signal: the planted signal's true parameters (``rho``'s sign is all the oracle needs).
        tilt: weight tilt per standard deviation of the signal (>= 0).

    Returns:
        ``obs (N, D) -> actions (N, M + 1)`` over ``[cash, asset_1 .. asset_M]``; equal weight when
        the signal is ``none``.

    Raises:
        SpecError: the panel has no ``logret_1`` feature, or ``tilt`` is negative.
    """
    if SIGNAL_FEATURE not in panel.feature_names:
        raise SpecError(f"the panel has no {SIGNAL_FEATURE} feature; build it with finpod's features")
    if not (math.isfinite(tilt) and tilt >= 0.0):
        raise SpecError(f"oracle tilt {tilt}: must be a finite number >= 0, e.g. {ORACLE_TILT}")
    feature = panel.feature_names.index(SIGNAL_FEATURE)
    num_assets, num_features = panel.num_assets, panel.num_features
    sign = math.copysign(1.0, signal.rho) if signal.rho != 0.0 else 0.0

    def act(obs: torch.Tensor) -> torch.Tensor:
        x = obs[:, : num_assets * num_features].view(-1, num_assets, num_features)[:, :, feature]
        centred = x - x.mean(dim=1, keepdim=True)
        spread = centred.square().mean(dim=1, keepdim=True).sqrt()
        z = torch.where(spread > STD_FLOOR, centred / spread.clamp_min(STD_FLOOR), 0.0)
        scores = (1.0 + sign * tilt * z).clamp_min(0.0)
        weights = scores / scores.sum(dim=1, keepdim=True)
        return torch.cat([torch.zeros_like(weights[:, :1]), weights], dim=1)

    return act


def equal_weight_policy(num_assets: int) -> Policy:
    """Equal weight over the ``M`` assets, no cash, re-targeted every bar through the env (band applies)."""

    def act(obs: torch.Tensor) -> torch.Tensor:
        weights = torch.full((obs.shape[0], num_assets + 1), 1.0 / num_assets, device=obs.device)
        weights[:, 0] = 0.0
        return weights

    return act


def segment_sharpe(
    panel: Panel, segment: str, config: EnvConfig, policy: Policy, device: torch.device
) -> float:
    """Annualised Sharpe (empyrical, 252 sessions, zero risk-free) of ``policy``'s daily returns.

    One deterministic pass over ``segment`` through the env (backtest mode); 0 when the returns
    have no volatility.
    """
    return returns_sharpe(segment_returns(panel, segment, config, policy, device))


def segment_returns(
    panel: Panel, segment: str, config: EnvConfig, policy: Policy, device: torch.device
) -> pd.Series:
    """Daily simple returns of ``policy`` over ``segment``: one deterministic pass through the env."""
    _check_weights_mode(config)
    ledger = run_policy(panel, segment, config, policy, device)
    return ledger_to_result("policy", "trader", panel, ledger, config.initial_cash_usd).returns


def returns_sharpe(returns: pd.Series) -> float:
    """Annualised Sharpe (empyrical, 252 sessions, zero risk-free) of daily returns; 0 when flat."""
    sharpe = float(ep.sharpe_ratio(returns.to_numpy()))
    return sharpe if math.isfinite(sharpe) else 0.0


def share_captured(agent_sharpe: float, oracle_sharpe: float, equal_weight_sharpe: float) -> float:
    """``(agent - EW) / (oracle - EW)``; NaN when the oracle does not beat equal weight (no edge to share)."""
    edge = oracle_sharpe - equal_weight_sharpe
    return (agent_sharpe - equal_weight_sharpe) / edge if edge > 0.0 else math.nan
