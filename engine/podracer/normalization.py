"""Running per-feature observation statistics and the normalisation they give.

:class:`RunningMeanStd` keeps a running mean and variance per observation feature (merged from
batch sums, so a round's statistics fold in once at its end); :class:`NormalizationCache` holds the
normalisation constants of those statistics (:class:`NormalizationConstants`) and recomputes them
only when the statistics change, as :class:`podracer.ppo.PPOAgent` uses them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn


class NormalizationConstants(NamedTuple):
    """Normalisation constants and the statistics (tensors and versions) they were computed from."""

    mean: torch.Tensor
    mean_version: int
    var: torch.Tensor
    var_version: int
    shift: torch.Tensor
    scale: torch.Tensor


class RunningMeanStd(nn.Module):
    """Per-feature running mean and variance of observations (parallel-merge update).

    Args:
        dim: ``D``, number of features.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.mean: torch.Tensor
        self.var: torch.Tensor
        self.count: torch.Tensor
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    def merge(self, batch_sum: torch.Tensor, batch_sumsq: torch.Tensor, batch_count: torch.Tensor) -> None:
        """Fold in a batch given by its per-feature sum ``(D,)``, sum of squares ``(D,)`` and row count."""
        batch_mean = batch_sum / batch_count
        batch_var = (batch_sumsq / batch_count - batch_mean.square()).clamp_min(0.0)
        total = self.count + batch_count
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * batch_count / total
        m2 = (
            self.var * self.count
            + batch_var * batch_count
            + delta.square() * self.count * batch_count / total
        )
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, obs: torch.Tensor, clip: float) -> torch.Tensor:
        """``(obs - mean) / std`` clipped to ``[-clip, clip]``, float32 ``(B, D)``."""
        return self.standardize(obs, self.mean, self.var, clip)

    @staticmethod
    def standardize(obs: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, clip: float) -> torch.Tensor:
        """``(obs - mean) / sqrt(var + 1e-8)`` clipped to ``[-clip, clip]`` in ``obs``'s dtype ``(B, D)``."""
        shift, scale = RunningMeanStd.constants(mean, var, obs.dtype)
        return RunningMeanStd.rescale(obs, shift, scale, clip)

    @staticmethod
    def constants(
        mean: torch.Tensor, var: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, sqrt(var + 1e-8))`` ``(D,)`` in ``dtype``: what :meth:`rescale` needs."""
        return mean.to(dtype), var.to(dtype).add(1e-8).sqrt()

    @staticmethod
    def rescale(obs: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, clip: float) -> torch.Tensor:
        """``(obs - shift) / scale`` clipped to ``[-clip, clip]`` ``(B, D)``, with :meth:`constants`."""
        return ((obs - shift) / scale).clamp_(-clip, clip)


TieStatistics = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""``(mean, var) -> (mean, var)`` ``(D,)``: the statistics to normalise with (e.g. every entity's
features alike, :meth:`podracer.entity.EntityLayout.tie_statistics`)."""


class NormalizationCache:
    """The normalisation constants ``(shift, scale)`` of running statistics, kept until they change.

    Recomputed once per change of the statistics (every in-place write to a tensor bumps its
    version counter: a merge, a load, a fusion average), not once per step: one batch-1 evaluation
    step is a handful of small ops, and these were a third of them.

    Args:
        stats: the running statistics (read live).
        tie: applied to ``(mean, var)`` before the constants are computed, or ``None``.
    """

    def __init__(self, stats: RunningMeanStd, tie: TieStatistics | None = None) -> None:
        """See the class docstring."""
        self.stats = stats
        self.tie = tie
        self._cached: NormalizationConstants | None = None

    def constants(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(shift, scale)`` ``(D,)`` in ``dtype`` of the current statistics, tied if asked."""
        stats, cached = self.stats, self._cached
        if not (
            cached is not None
            and cached.mean is stats.mean
            and cached.var is stats.var
            and (cached.mean_version, cached.var_version) == (stats.mean._version, stats.var._version)
            and cached.shift.dtype == dtype
        ):
            with torch.inference_mode(False):
                mean, var = stats.mean, stats.var
                if self.tie is not None:
                    mean, var = self.tie(mean, var)
                shift, scale = RunningMeanStd.constants(mean, var, dtype)
            cached = self._cached = NormalizationConstants(
                stats.mean, stats.mean._version, stats.var, stats.var._version, shift, scale
            )
        return cached.shift, cached.scale

    def normalize(self, obs: torch.Tensor, clip: float) -> torch.Tensor:
        """``obs`` ``(B, D)`` standardised with :meth:`constants` and clipped to ``[-clip, clip]``."""
        shift, scale = self.constants(obs.dtype)
        return RunningMeanStd.rescale(obs, shift, scale, clip)


def add_feature_noise(
    obs: torch.Tensor, std: float, columns: int, generator: torch.Generator
) -> torch.Tensor:
    """``obs`` ``(B, D)`` with ``N(0, std^2)`` noise added to its first ``columns`` columns (a new tensor).

    The noise ``(B, columns)`` is one draw from ``generator``; ``std`` 0 returns ``obs`` itself and
    draws nothing.
    """
    if std == 0.0:
        return obs
    noise = torch.randn(obs.shape[0], columns, generator=generator, device=obs.device, dtype=obs.dtype)
    noisy = obs.clone()
    noisy[:, :columns] += std * noise
    return noisy
