"""The observation an agent sees at a bar's close: causal features, holdings, time. Pure, batched.

Layout of one observation row, size ``D = M * F + M + 3``, in this order:
``[features of bar t (M * F, asset-major: asset_1's F features, then asset_2's, ...),
current weights of asset_1 .. asset_M at t's close (M), cash share (1),
episode progress in [0, 1] (1), position of bar t in its trading session in [0, 1] (1)]``.
"""

from __future__ import annotations

import torch

NUM_TIME_FEATURES = 2
"""Episode progress and session progress."""


def observation_size(num_assets: int, num_features: int) -> int:
    """``D``, the length of an observation row for ``M`` assets with ``F`` features each."""
    return num_assets * num_features + num_assets + 1 + NUM_TIME_FEATURES


def build_observation(
    features: torch.Tensor,
    holdings_usd: torch.Tensor,
    cash_usd: torch.Tensor,
    equity_usd: torch.Tensor,
    episode_progress: torch.Tensor,
    session_progress: torch.Tensor,
) -> torch.Tensor:
    """Assemble observations ``(N, D)`` float32 in the layout of this module's docstring.

    Args:
        features: ``(N, M * F)`` features of the observed bar.
        holdings_usd: ``(N, M)`` value of each holding at the observed bar's close (shares x close).
        cash_usd: ``(N,)`` cash.
        equity_usd: ``(N,)`` equity at the observed bar's close (USD, > 0).
        episode_progress: ``(N,)`` steps taken / episode length, in ``[0, 1]``.
        session_progress: ``(N,)`` position of the bar in its session, in ``[0, 1]``.
    """
    inverse_equity = equity_usd.reciprocal().unsqueeze(1)
    return torch.cat(
        [
            features,
            holdings_usd * inverse_equity,
            cash_usd.unsqueeze(1) * inverse_equity,
            episode_progress.unsqueeze(1),
            session_progress.unsqueeze(1),
        ],
        dim=1,
    )
