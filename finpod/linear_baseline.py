"""The linear baseline: ridge regression on the observation's per-asset features, traded like the oracle.

"Does the RL trader beat a linear model on the same features?" Every run answers it. The model:

* **target** ``y[t, m]``: bar ``t + 1``'s close-to-close log return of asset ``m`` minus the
  cross-sectional mean over the assets tradable at ``t`` and ``t + 1``;
* **inputs** ``x[t, m]``: asset ``m``'s per-asset features at bar ``t`` exactly as the observation
  carries them (train-normalised), minus their cross-sectional mean (clock features, the same for
  every asset, drop out);
* **fit**: ``beta = (X'X + lambda * tr(X'X) / F * I)^-1 X'y`` in closed form (float64), on the TRAIN
  segment's rows only (the last train bar, whose target lies in validation, is left out);
  ``lambda`` from :data:`RIDGE_PENALTIES` is the one whose predictions have the highest mean
  cross-sectional correlation with the target on the VALIDATION rows (ties: the larger ``lambda``);
* **trading**: the scores ``x[t] . beta`` go through the tilt family of :mod:`finpod.tilt` (tilt,
  concentration, no-trade band), its member fitted on the TRAIN segment through the env with the
  traders' costs, the same family and grid as the oracle's.

The backtest segment's bars never enter the fit (a test corrupts them and finds the coefficients
bit-identical).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import torch

from finpod.data.features import feature_specs
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.errors import DataError
from finpod.report.verdict import LINEAR_NAME
from finpod.tilt import BarScores, ScoreFn, TiltFit, TiltParams, fit_tilt, tilt_policy
from podracer.api import Policy

FIT_SEGMENT: Final[str] = "train"
PENALTY_SEGMENT: Final[str] = "validation"
RIDGE_PENALTIES: Final[tuple[float, ...]] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
"""Ridge penalties relative to the mean eigenvalue of ``X'X`` (scale-free)."""
MIN_ASSETS: Final[int] = 2
"""A cross-section of one asset has nothing to rank."""
CHUNK_BARS: Final[int] = 4096
"""Bars whose rows are built at once (bounds ``(bars, M, K)`` float64 temporaries)."""
DENOMINATOR_FLOOR: Final[float] = 1e-300
"""Guards the correlation's division where a side is flat (those bars count 0)."""


@dataclass(frozen=True)
class RidgeFit:
    """The fitted ridge regression.

    Attributes:
        feature_names: the ``K`` per-asset features it reads.
        feature_index: their columns in the panel's ``F`` features.
        coefficients: float64 ``(K,)`` coefficients (per unit of normalised feature, log return).
        penalty: the chosen relative penalty.
        validation_ic: mean cross-sectional correlation of prediction and target on validation,
            per penalty, in :data:`RIDGE_PENALTIES` order.
        train_rows: ``(bar, asset)`` rows fitted.
    """

    feature_names: tuple[str, ...]
    feature_index: tuple[int, ...]
    coefficients: torch.Tensor
    penalty: float
    validation_ic: tuple[float, ...]
    train_rows: int

    def to_json(self) -> dict[str, Any]:
        """Coefficients by feature, penalty and validation ICs as plain values."""
        return {
            "coefficients": dict(zip(self.feature_names, self.coefficients.tolist(), strict=True)),
            "penalty": self.penalty,
            "penalties": list(RIDGE_PENALTIES),
            "validation_ic": list(self.validation_ic),
            "train_rows": self.train_rows,
        }


@dataclass(frozen=True)
class LinearTrader:
    """The linear baseline: its ridge fit, its tilt family member and its policy.

    Attributes:
        ridge: the regression.
        tilt: the family member fitted on train through the env.
        policy: observations ``(N, D)`` -> target weights ``(N, M + 1)``.
    """

    ridge: RidgeFit
    tilt: TiltFit
    policy: Policy

    def to_json(self) -> dict[str, Any]:
        """The ridge and the family member as plain values (``metrics.json``)."""
        return {"ridge": self.ridge.to_json(), "trading": self.tilt.to_json()}


def per_asset_features(panel: Panel) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Names and panel columns of the per-asset features (the clock features excluded)."""
    per_asset = {spec.name for spec in feature_specs(panel.frequency) if spec.per_asset}
    pairs = [(name, i) for i, name in enumerate(panel.feature_names) if name in per_asset]
    return tuple(name for name, _ in pairs), tuple(i for _, i in pairs)


def _rows(
    panel: Panel, lo: int, hi: int, index: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Demeaned inputs ``(B, M, K)``, targets ``(B, M)`` and validity ``(B, M)`` (float64) of bars
    ``lo .. hi - 1``, whose targets are the returns of bars ``lo + 1 .. hi``."""
    valid = (panel.tradable[lo:hi] & panel.tradable[lo + 1 : hi + 1]).to(torch.float64)
    log_close = panel.close[lo : hi + 1].to(torch.float64).log()
    target = log_close[1:] - log_close[:-1]
    x = panel.features[lo:hi][:, :, list(index)].to(torch.float64)
    count = valid.sum(dim=1, keepdim=True).clamp_min(1.0)
    target = (target - (target * valid).sum(dim=1, keepdim=True) / count) * valid
    x = (x - (x * valid[..., None]).sum(dim=1, keepdim=True) / count[..., None]) * valid[..., None]
    return x, target, valid


def _chunks(
    panel: Panel, segment: str, index: tuple[int, ...]
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """:func:`_rows` of a segment's bars whose next bar is in the segment, :data:`CHUNK_BARS` at a time."""
    start, stop = panel.segment(segment)
    for lo in range(start, stop - 1, CHUNK_BARS):
        yield _rows(panel, lo, min(lo + CHUNK_BARS, stop - 1), index)


def _bar_ics(prediction: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``(B,)`` cross-sectional correlation of demeaned predictions and targets (0 where one is flat)."""
    centred = prediction * valid
    numerator = (centred * target).sum(dim=1)
    denominator = (centred.square().sum(dim=1) * target.square().sum(dim=1)).sqrt()
    return torch.where(denominator > 0.0, numerator / denominator.clamp_min(DENOMINATOR_FLOOR), 0.0)


def fit_ridge(panel: Panel) -> RidgeFit:
    """The ridge fit on the train rows, its penalty chosen on the validation rows (see the module).

    Raises:
        DataError: fewer than :data:`MIN_ASSETS` assets, or no per-asset feature.
    """
    names, index = per_asset_features(panel)
    if panel.num_assets < MIN_ASSETS or not names:
        raise DataError(
            f"linear baseline: needs >= {MIN_ASSETS} assets and per-asset features, got "
            f"{panel.num_assets} assets and {len(names)} features; fix: widen the universe"
        )
    size = len(index)
    gram = torch.zeros((size, size), dtype=torch.float64, device=panel.device)
    moment = torch.zeros(size, dtype=torch.float64, device=panel.device)
    rows = 0
    for x, y, valid in _chunks(panel, FIT_SEGMENT, index):
        flat = x.reshape(-1, size)
        gram += flat.T @ flat
        moment += flat.T @ y.reshape(-1)
        rows += int(valid.sum())
    scale = max(float(torch.trace(gram)) / size, math.ulp(1.0))
    identity = torch.eye(size, dtype=torch.float64, device=gram.device)
    fits = [torch.linalg.solve(gram + penalty * scale * identity, moment) for penalty in RIDGE_PENALTIES]
    ic_sums, bars = torch.zeros(len(fits), dtype=torch.float64), 0
    for x, y, valid in _chunks(panel, PENALTY_SEGMENT, index):
        bars += x.shape[0]
        for i, beta in enumerate(fits):
            ic_sums[i] += _bar_ics(x @ beta, y, valid).sum().cpu()
    ics = (ic_sums / max(bars, 1)).tolist()
    best = max(range(len(RIDGE_PENALTIES)), key=lambda i: (ics[i], RIDGE_PENALTIES[i]))
    return RidgeFit(
        feature_names=names,
        feature_index=index,
        coefficients=fits[best].cpu(),
        penalty=RIDGE_PENALTIES[best],
        validation_ic=tuple(ics),
        train_rows=rows,
    )


def ridge_scores(panel: Panel, feature_index: Sequence[int], coefficients: torch.Tensor) -> ScoreFn:
    """Observations ``(N, D)`` -> predicted demeaned next-bar returns ``(N, M)`` (up to a constant).

    Args:
        panel: the market the observations come from (their layout).
        feature_index: the ``K`` feature columns the ridge reads.
        coefficients: ``(K,)`` its coefficients.
    """
    num_assets, num_features = panel.num_assets, panel.num_features
    constants = {
        "columns": torch.as_tensor(list(feature_index), dtype=torch.int64),
        "beta": coefficients.float(),
    }

    def scores(obs: torch.Tensor) -> torch.Tensor:
        if constants["beta"].device != obs.device:  # once: no host copy per call (a GPU pass is graphed)
            constants.update({name: value.to(obs.device) for name, value in constants.items()})
        cells = obs[:, : num_assets * num_features].view(-1, num_assets, num_features)
        return cells.index_select(2, constants["columns"]) @ constants["beta"]

    return BarScores(scores)


def policy_from_json(panel: Panel, fit: Mapping[str, Any]) -> Policy:
    """The linear baseline's policy on ``panel`` from its saved fit (:meth:`LinearTrader.to_json`).

    Raises:
        DataError: the panel lacks a feature the ridge reads.
    """
    coefficients = fit["ridge"]["coefficients"]
    missing = [name for name in coefficients if name not in panel.feature_names]
    if missing:
        raise DataError(f"linear baseline: the panel has no {missing[0]} feature; fix: use finpod's features")
    index = [panel.feature_names.index(name) for name in coefficients]
    beta = torch.tensor(list(coefficients.values()), dtype=torch.float64)
    return tilt_policy(panel, ridge_scores(panel, index, beta), TiltParams(**fit["trading"]["params"]))


def linear_baseline(
    panel: Panel, config: EnvConfig, device: torch.device
) -> tuple[dict[str, Policy], dict[str, Any] | None, str | None]:
    """The run's linear baseline: ``({LINEAR_NAME: policy}, its fit as JSON, None)``, or
    ``({}, None, note)`` when it cannot trade (share-delta actions, a one-asset universe)."""
    if config.action_mode != "weights":
        return {}, None, "linear baseline omitted: it targets weights (env.action_mode = 'weights')"
    try:
        trader = fit_linear_trader(panel, config, device)
    except DataError as error:
        return {}, None, f"linear baseline omitted: {error}"
    return {LINEAR_NAME: trader.policy}, trader.to_json(), None


def fit_linear_trader(panel: Panel, config: EnvConfig, device: torch.device) -> LinearTrader:
    """The linear baseline of ``panel``: ridge on train (penalty on validation), family member on train.

    Args:
        panel: the market; only its train and validation segments are read.
        config: the traders' env settings (``weights`` mode; fee, spread, caps, band).
        device: where the fit's env runs.
    """
    ridge = fit_ridge(panel)
    scores = ridge_scores(panel, ridge.feature_index, ridge.coefficients)
    tilt = fit_tilt(panel, FIT_SEGMENT, config, scores, device)
    return LinearTrader(ridge, tilt, tilt_policy(panel, scores, tilt.params))


def saved_baseline(run_root: Path, panel: Panel) -> dict[str, Policy]:
    """The run's linear baseline as ``{"linear": policy}`` with the coefficients and trading
    parameters its ``metrics.json`` saved (nothing refitted), or ``{}`` for a run without one."""
    from finpod.report.verdict import LINEAR_NAME
    from finpod.report.writer import METRICS_FILE

    fit = json.loads((run_root / METRICS_FILE).read_text(encoding="utf-8")).get("linear_baseline")
    return {} if fit is None else {LINEAR_NAME: policy_from_json(panel, fit)}
