"""The observation an agent sees at a bar's close: causal features, holdings, time. Pure, batched.

Layout of one observation row, size ``D = M * F + M + 2``, in this order:
``[features of bar t (M * F, asset-major: asset_1's F features, then asset_2's, ...),
current weights of asset_1 .. asset_M at t's close (M), cash share (1),
position of bar t in its trading session in [0, 1] (1)]``.

One clock: nothing in a row depends on where the env's episode started or when it truncates, so a
row means the same in training (short random episodes), validation and backtest (one episode over a
whole segment) and paper trading. The only time the agent sees is the bar's own (its position in
the session, and the calendar features of the feature set). A truncated episode's final row is
therefore an ordinary state, and bootstrapping the critic on it is consistent with training.

The per-bar part (features, session position) is precomputed once per bar in a template table
``(T, D)``; a step gathers template rows and writes the portfolio part in place, so building an
observation is one row gather plus ``M + 2`` columns instead of a concatenation.
"""

from __future__ import annotations

import torch

from podracer.api import EntityLayout

NUM_PORTFOLIO_COLUMNS_BEYOND_ASSETS = 1
"""Cash share, written per step after the ``M`` weights."""
NUM_BAR_COLUMNS_AFTER_PORTFOLIO = 1
"""Session position, taken from the template."""


def observation_size(num_assets: int, num_features: int) -> int:
    """``D``, the length of an observation row for ``M`` assets with ``F`` features each."""
    return (
        num_assets * num_features
        + num_assets
        + NUM_PORTFOLIO_COLUMNS_BEYOND_ASSETS
        + NUM_BAR_COLUMNS_AFTER_PORTFOLIO
    )


def entity_layout(num_assets: int, num_features: int, action_globals: int) -> EntityLayout:
    """The observation's structure for a cross-sectional policy: assets are the entities.

    Entity features are the ``F`` features (asset-major), the one per-entity extra is the current
    weight, and every column after the weights is a global (counted, not named, so a new clock
    column needs no change here). ``action_globals`` is 1 in ``weights`` mode (cash comes first in
    the action), 0 in ``share_delta`` mode.
    """
    return EntityLayout(
        num_entities=num_assets,
        entity_features=num_features,
        entity_extras=1,
        num_globals=observation_size(num_assets, num_features) - num_assets * (num_features + 1),
        action_globals=action_globals,
    )


def observation_template(features: torch.Tensor, session_progress: torch.Tensor) -> torch.Tensor:
    """Per-bar template rows ``(T, D)``: features and session position filled, portfolio columns 0.

    Args:
        features: float32 ``(T, M, F)`` causal features.
        session_progress: float32 ``(T,)`` position of each bar in its session, in ``[0, 1]``.
    """
    num_bars, num_assets, num_features = features.shape
    template = torch.zeros(
        (num_bars, observation_size(num_assets, num_features)), dtype=torch.float32, device=features.device
    )
    template[:, : num_assets * num_features] = features.reshape(num_bars, -1)
    template[:, -1] = session_progress
    return template


def all_cash_rows(features: torch.Tensor, session_progress: torch.Tensor) -> torch.Tensor:
    """Observation rows ``(T, D)`` of an account that holds only cash at each bar: the template
    (:func:`observation_template`) with the cash share 1 (where the env starts every pass).

    Args:
        features: float32 ``(T, M, F)`` causal features.
        session_progress: float32 ``(T,)`` position of each bar in its session, in ``[0, 1]``.
    """
    rows = observation_template(features, session_progress)
    rows[:, -NUM_BAR_COLUMNS_AFTER_PORTFOLIO - 1] = 1.0  # the cash share, the last portfolio column
    return rows


def template_rows(template: torch.Tensor, bars: torch.Tensor) -> torch.Tensor:
    """Fresh rows ``(N, D)`` of the template ``(T, D)`` at ``bars`` ``(N,)`` int64: ``index_select``.

    With an even ``D`` the rows are gathered as 8-byte words (the same bits): a float32 row of
    ``4 D`` bytes that is not a multiple of 16 (``D = 1302`` at ``M = 100``) misses torch's
    vectorised CUDA gather, and its element-by-element gather then costs about half as much with
    half the elements (measured on an H100 in BENCHMARKS.md, "Scaling out").
    """
    if template.dtype == torch.float32 and template.shape[1] % 2 == 0 and template.is_contiguous():
        return template.view(torch.int64).index_select(0, bars).view(torch.float32)
    return template.index_select(0, bars)


def fill_observation(
    rows: torch.Tensor,
    holdings_usd: torch.Tensor,
    cash_usd: torch.Tensor,
    equity_usd: torch.Tensor,
) -> torch.Tensor:
    """Write the portfolio columns into freshly gathered template rows, in place; returns ``rows``.

    Args:
        rows: ``(N, D)`` template rows of the observed bars (a fresh tensor, overwritten).
        holdings_usd: ``(N, M)`` value of each holding at the observed bar's close (shares x close).
        cash_usd: ``(N,)`` cash.
        equity_usd: ``(N,)`` equity at the observed bar's close (USD, > 0).
    """
    num_assets = holdings_usd.shape[1]
    weights_end = rows.shape[1] - NUM_PORTFOLIO_COLUMNS_BEYOND_ASSETS - NUM_BAR_COLUMNS_AFTER_PORTFOLIO
    inverse_equity = equity_usd.reciprocal().unsqueeze(1)
    torch.mul(holdings_usd, inverse_equity, out=rows[:, weights_end - num_assets : weights_end])
    rows[:, weights_end : weights_end + 1] = cash_usd.unsqueeze(1) * inverse_equity
    return rows
