"""The oracle: the best policy of a stated family that knows the planted signal, fitted through the env.

Every kind of planted signal (:mod:`finpod.data.signals`) has a predictor that is a causal function of
the observation's features: ``xs_logret_1``, ``xs_logret_5``, ``xs_logret_60`` (returns minus the bar's
cross-sectional mean) and ``volume_z_30``, read back in raw units through the panel's train
normalisation statistics (an affine map per feature; clipped cells stay clipped). The oracle's scores
are exactly that predictor (:func:`signal_scores`); it trades them with the tilt family of
:mod:`finpod.tilt` (tilt strength, concentration on the top names, a no-trade band), its parameters
chosen on the TRAIN segment through the same env with the same costs (:func:`fit_oracle`: every grid
member in one batched env pass). So it is a ceiling for a policy of that family that knows the model;
its Sharpe minus equal weight's (both through the same env) is the *available edge*, and an agent's
share captured is ``(agent - EW) / (oracle - EW)``. A share above 1 is possible (a richer policy, or
the fit's train/held-out difference) and rare. The oracle ignores the drift alpha (invisible to an
agent).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

import empyrical as ep
import numpy as np
import pandas as pd
import torch

from finpod.backtest.pyfolio_format import ledger_to_result
from finpod.backtest.result import TraderResult
from finpod.backtest.runner import run_policy
from finpod.data.panel import Panel
from finpod.data.signals import (
    LONG_HORIZON_BARS,
    SHORT_HORIZON_BARS,
    VOLUME_PIVOT_SIGMAS,
    VOLUME_WINDOW_BARS,
    SignalSpec,
)
from finpod.env.config import EnvConfig
from finpod.errors import SpecError
from finpod.report.metrics import SESSIONS_PER_YEAR
from finpod.tilt import BarScores, ScoreFn, TiltFit, TiltParams, fit_tilt, tilt_policy
from podracer.api import Policy

ONE_BAR: Final[str] = "xs_logret_1"
SHORT: Final[str] = f"xs_logret_{SHORT_HORIZON_BARS}"
LONG: Final[str] = f"xs_logret_{LONG_HORIZON_BARS}"
VOLUME: Final[str] = f"volume_z_{VOLUME_WINDOW_BARS}"
ORACLE_SEGMENT: Final[str] = "train"
"""The oracle's family parameters are fitted here, never on validation or backtest bars."""
STD_FLOOR: Final[float] = 1e-12
"""A flat cross-section has z-score 0."""
MIN_EDGE_SHARPE: Final[float] = 1e-6
"""An oracle edge below this (annualised Sharpe) is rounding (the null case's oracle IS equal
weight, its weights computed another way): no share is defined."""
EQUAL_WEIGHT_MEMBER: Final[TiltParams] = TiltParams(tilt=0.0, top_fraction=1.0, band=0.0)
"""Without a signal the oracle is equal weight (a concentration would pick names at random)."""


def _check_weights_mode(config: EnvConfig) -> None:
    if config.action_mode != "weights":
        raise SpecError(
            f"env action_mode {config.action_mode!r}: the oracle and equal-weight policies target "
            "weights; set env.action_mode = 'weights'"
        )


def _zs(values: torch.Tensor) -> torch.Tensor:
    """Cross-sectional z-score along dim 1 (0 where flat)."""
    centred = values - values.mean(dim=1, keepdim=True)
    spread = centred.square().mean(dim=1, keepdim=True).sqrt()
    return torch.where(spread > STD_FLOOR, centred / spread.clamp_min(STD_FLOOR), 0.0)


def signal_scores(panel: Panel, signal: SignalSpec) -> ScoreFn:
    """The planted signal's true predictor read from observations: ``(N, D) -> (N, M)``.

    Args:
        panel: the market the env trades (its features and train normalisation statistics).
        signal: the planted signal (kind; the strength does not change the ranking).

    Raises:
        SpecError: the panel lacks a feature the kind needs, or its normalisation statistics.
    """
    num_assets, num_features = panel.num_assets, panel.num_features
    if not signal.active:
        return BarScores(
            lambda obs: torch.zeros((obs.shape[0], num_assets), dtype=obs.dtype, device=obs.device)
        )
    needed = {ONE_BAR} | ({SHORT} if signal.kind in ("reversal_5", "nonlinear") else set())
    needed |= {LONG} if signal.kind == "momentum_60" else set()
    needed |= {VOLUME} if signal.kind == "volume" else set()
    missing = sorted(needed - set(panel.feature_names))
    if missing:
        raise SpecError(f"the panel has no {missing[0]} feature; build it with finpod's features")
    if panel.feature_stats is None:
        raise SpecError("the panel has no feature statistics; build it with finpod's features")
    index = {name: panel.feature_names.index(name) for name in needed}
    mean = {name: float(panel.feature_stats.mean[i]) for name, i in index.items()}
    std = {name: float(panel.feature_stats.std[i]) for name, i in index.items()}
    kind = signal.kind

    def raw(obs: torch.Tensor, name: str) -> torch.Tensor:
        cells = obs[:, : num_assets * num_features].view(-1, num_assets, num_features)
        return cells[:, :, index[name]] * std[name] + mean[name]

    def scores(obs: torch.Tensor) -> torch.Tensor:
        one = raw(obs, ONE_BAR)
        if kind in ("reversal", "momentum"):
            return -one if kind == "reversal" else one
        if kind == "reversal_5":
            return -raw(obs, SHORT)
        if kind == "momentum_60":
            return raw(obs, LONG)
        demeaned = one - one.mean(dim=1, keepdim=True)
        if kind == "volume":
            return demeaned * (raw(obs, VOLUME) - VOLUME_PIVOT_SIGMAS)
        before = raw(obs, SHORT) - one
        return _zs(demeaned) * _zs(before)

    return BarScores(scores)


def oracle_policy(panel: Panel, signal: SignalSpec, params: TiltParams | None = None) -> Policy:
    """The oracle's deterministic policy for ``panel``'s env (``weights`` action mode).

    Args:
        panel: the market the env trades.
        signal: the planted signal's true kind.
        params: the family member (default: tilt 1 on every name, no band); :func:`fit_oracle`
            chooses it on train.

    Returns:
        ``obs (N, D) -> actions (N, M + 1)`` over ``[cash, asset_1 .. asset_M]``; equal weight when
        the signal is ``none``.
    """
    return tilt_policy(panel, signal_scores(panel, signal), params or TiltParams())


@dataclass(frozen=True)
class OracleFit:
    """The oracle of one market: the signal it knows, its family member fitted on train, its policy.

    Attributes:
        signal: the planted signal.
        fit: the tilt family's member chosen on the train segment (and its train Sharpe).
        policy: the deterministic policy with that member.
    """

    signal: SignalSpec
    fit: TiltFit
    policy: Policy

    def to_json(self) -> dict[str, Any]:
        """Kind, strength, family and fitted parameters as plain values."""
        return {
            "kind": self.signal.kind,
            "information_coefficient": self.signal.strength,
            **self.fit.to_json(),
        }


def fit_oracle(panel: Panel, signal: SignalSpec, config: EnvConfig, device: torch.device) -> OracleFit:
    """The oracle with its family member chosen on the TRAIN segment through the env with costs.

    Args:
        panel: the market (must hold the train segment; its other segments are not read).
        signal: the planted signal's true kind.
        config: the traders' env settings (``weights`` mode; fee, spread, caps, band).
        device: where the env runs.
    """
    _check_weights_mode(config)
    scores = signal_scores(panel, signal)
    grid = None if signal.active else [EQUAL_WEIGHT_MEMBER]
    fit = fit_tilt(panel, ORACLE_SEGMENT, config, scores, device, grid)
    return OracleFit(signal, fit, tilt_policy(panel, scores, fit.params))


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
    return segment_result(panel, segment, config, policy, device).returns


def segment_result(
    panel: Panel, segment: str, config: EnvConfig, policy: Policy, device: torch.device
) -> TraderResult:
    """Daily returns, equity, costs and turnover of ``policy`` over ``segment`` (one deterministic pass)."""
    _check_weights_mode(config)
    ledger = run_policy(panel, segment, config, policy, device)
    return ledger_to_result("policy", "trader", panel, ledger, config.initial_cash_usd)


def cost_drag(result: TraderResult) -> tuple[float, float]:
    """What a trader's costs took: ``(annual cost in % of equity, Sharpe before costs)``.

    Each session's fees plus slippage are divided by the equity it started with (the previous
    session's close, the initial capital for the first), summed over the segment and annualised
    over 252 sessions; the Sharpe before costs is that of the daily returns with each session's
    cost fraction added back (0 for a session that started with no equity). NaN for an empty
    segment.
    """
    if result.returns.empty:
        return math.nan, math.nan
    equity = result.equity_usd.to_numpy(float)
    first_return = float(result.returns.iloc[0])
    first_equity = equity[0] / (1.0 + first_return) if first_return > -1.0 else 0.0
    start_equity = np.concatenate([[first_equity], equity[:-1]])
    costs = result.costs_usd.to_numpy(float)
    cost_fraction = np.divide(costs, start_equity, out=np.zeros_like(costs), where=start_equity > 0.0)
    annual_pct = 100.0 * float(cost_fraction.mean()) * SESSIONS_PER_YEAR
    gross = result.returns + cost_fraction
    return annual_pct, returns_sharpe(gross)


def returns_sharpe(returns: pd.Series) -> float:
    """Annualised Sharpe (empyrical, 252 sessions, zero risk-free) of daily returns; 0 when flat."""
    sharpe = float(ep.sharpe_ratio(returns.to_numpy()))
    return sharpe if math.isfinite(sharpe) else 0.0


def share_captured(agent_sharpe: float, oracle_sharpe: float, equal_weight_sharpe: float) -> float:
    """``(agent - EW) / (oracle - EW)``; NaN when the oracle does not beat equal weight (no edge to share)."""
    edge = oracle_sharpe - equal_weight_sharpe
    return (agent_sharpe - equal_weight_sharpe) / edge if edge > MIN_EDGE_SHARPE else math.nan
