"""Running per-feature observation statistics and the normalisation they give.

:class:`RunningMeanStd` keeps a running mean and variance per observation feature (merged from
batch sums, so a round's statistics fold in once at its end); :class:`NormalizationConstants` is
what :class:`podracer.ppo.PPOAgent` caches per change of those statistics.
"""

from __future__ import annotations

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
