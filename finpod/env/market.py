"""The market the env trades in: the panel's segment packed into tables the step gathers by bar index.

Shapes: ``T`` bars, ``M`` assets, ``F`` features per asset, ``N`` envs. Everything lives on one device.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np
import torch

from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.observation import observation_template
from finpod.errors import SpecError

FILL_ROW, CLOSE_ROW, BUY_CAP_ROW, SELL_CAP_ROW = 0, 1, 2, 3
"""Rows of :attr:`Market.bars`: fill price, close, buy limit and sell limit (see :class:`Market`)."""
NUM_BAR_ROWS = 4


class Market(NamedTuple):
    """Static, read-only market tables and episode bounds of one panel segment.

    Attributes:
        bars: float32 ``(T, 4, M)``, per bar: ``[fill price (USD/share, the open or the close by
            EnvConfig.fill), close (USD/share), buy limit (shares: max_participation x volume when
            tradable, 0 when not; inf when uncapped), sell limit (shares: max_participation x volume;
            when uncapped, inf on a bar that is tradable or has volume, 0 on a filled bar)]``.
            One gather of a bar's row serves the whole step.
        obs_template: float32 ``(T, D)``, per bar the observation's bar part (features, position of
            the bar in its session) with the portfolio columns 0 (see :mod:`finpod.env.observation`).
        equal_weight_log_return: float32 ``(T,)``, ``log(mean_m close[t, m] / close[t - 1, m])`` over
            all ``M`` assets (0 at ``t = 0``): the equal-weight basket's close-to-close log return,
            subtracted by the ``excess_log_return`` reward.
        fill_to_close_return: float32 ``(T, M)``, ``close / fill - 1`` per bar and asset (0 where the
            fill price is not positive): what a unit weight bought at the bar's fill earns by its
            close, the action-free outcome of :mod:`finpod.env.entity_outcomes`.
        first_bar: first bar index of the segment.
        last_bar: last bar index of the segment (inclusive): no episode steps past it.
        horizon_bars: steps per episode before the segment end cuts it.
        num_starts: how many start bars an episode may draw (1 when starts are not random).
    """

    bars: torch.Tensor
    obs_template: torch.Tensor
    equal_weight_log_return: torch.Tensor
    fill_to_close_return: torch.Tensor
    first_bar: int
    last_bar: int
    horizon_bars: int
    num_starts: int


def build_market(panel: Panel, segment: str, config: EnvConfig, device: torch.device) -> Market:
    """Pack ``panel``'s tables for the env and check that segment ``segment`` can hold an episode.

    Args:
        panel: the calendar-aligned market (any device; copied to ``device``).
        segment: ``"train"``, ``"validation"`` or ``"backtest"`` (any name the panel has).
        config: env settings (fill mode, volume cap, horizon, random starts).
        device: where the env runs.

    Returns:
        The :class:`Market` of the whole panel with the segment's episode bounds. Its tables are
        read-only and shared by every env built on the same panel object, fill mode, volume cap and
        device (they are about the panel's size, so a pool of envs must not copy them each); a
        panel must therefore not be modified in place once an env trades it.

    Raises:
        SpecError: the segment is unknown, out of the panel, or shorter than two bars.
    """
    if segment not in panel.segments:
        known = ", ".join(sorted(panel.segments)) or "none"
        raise SpecError(f"env segment {segment!r} is not in the panel (known: {known}); pick one of those")
    start, stop = panel.segments[segment]
    if not (0 <= start < stop <= panel.num_bars):
        raise SpecError(
            f"env segment {segment!r} has bar range [{start}, {stop}) outside the panel's "
            f"{panel.num_bars} bars; rebuild the panel"
        )
    if stop - start < 2:
        raise SpecError(
            f"env segment {segment!r} has {stop - start} bar(s); an env step needs at least 2 "
            f"(observe at t, fill at t+1): widen the segment's dates"
        )
    segment_bars = stop - start
    horizon = min(config.horizon_bars, segment_bars - 1)
    num_starts = segment_bars - horizon if config.random_start else 1

    bars, template, equal_weight, fill_to_close = _shared_tables(panel, config, device)
    return Market(
        bars=bars,
        obs_template=template,
        equal_weight_log_return=equal_weight,
        fill_to_close_return=fill_to_close,
        first_bar=start,
        last_bar=stop - 1,
        horizon_bars=horizon,
        num_starts=num_starts,
    )


_TableKey = tuple[int, str, float, str]
_Tables = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
NUM_TABLES = 4
"""The leading fields of :class:`Market` that are shared tables (the rest are the segment's ints)."""
_TABLES: dict[_TableKey, _Tables] = {}
"""Market tables by (panel id, fill mode, max participation, device); dropped with their panel."""


def _shared_tables(panel: Panel, config: EnvConfig, device: torch.device) -> _Tables:
    """The ``bars`` ``(T, 4, M)``, ``obs_template`` ``(T, D)``, ``equal_weight_log_return`` ``(T,)``
    and ``fill_to_close_return`` ``(T, M)`` tables of ``panel``, built once."""
    key = (id(panel), config.fill, config.max_participation, str(device))
    if key not in _TABLES:
        _TABLES[key] = _build_tables(panel, config, device)
        weakref.finalize(panel, _TABLES.pop, key, None)
    return _TABLES[key]


def _build_tables(panel: Panel, config: EnvConfig, device: torch.device) -> _Tables:
    fill = panel.open if config.fill == "next_open" else panel.close
    if config.volume_capped:
        sell_cap = panel.volume * config.max_participation
    else:
        # No size cap, but a filled bar (no bar: not tradable, zero volume) has no price to sell at.
        has_bar = panel.tradable | (panel.volume > 0.0)
        sell_cap = torch.full_like(panel.volume, math.inf).masked_fill_(~has_bar, 0.0)
    buy_cap = torch.where(panel.tradable, sell_cap, torch.zeros_like(sell_cap))
    bars = torch.stack([fill, panel.close, buy_cap, sell_cap], dim=1)
    progress = torch.from_numpy(session_progress(panel.session_ids)).to(device)
    template = observation_template(panel.features.to(device=device, dtype=torch.float32), progress)
    close = panel.close.to(device=device, dtype=torch.float64)
    equal_weight = torch.zeros(close.shape[0], dtype=torch.float64, device=device)
    equal_weight[1:] = torch.log((close[1:] / close[:-1]).mean(dim=1))
    bars = bars.to(device=device, dtype=torch.float32).contiguous()
    fill_price, close_price = bars[:, FILL_ROW], bars[:, CLOSE_ROW]
    priced = fill_price > 0.0
    fill_to_close = torch.where(priced, close_price / torch.where(priced, fill_price, 1.0) - 1.0, 0.0)
    return bars, template, equal_weight.to(torch.float32), fill_to_close.contiguous()


def session_progress(session_ids: np.ndarray) -> np.ndarray:
    """Position of each bar in its session, in ``[0, 1]``: float32 ``(T,)`` from int64 ``(T,)`` ids.

    Bars of one session must be contiguous (as :class:`Panel` guarantees); a one-bar session gets 0.
    """
    ids = np.asarray(session_ids, dtype=np.int64)
    bar_index = np.arange(ids.shape[0])
    is_first = np.ones(ids.shape[0], dtype=bool)
    is_first[1:] = ids[1:] != ids[:-1]
    first_of_session = np.maximum.accumulate(np.where(is_first, bar_index, 0))
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    denominator = np.maximum(counts[inverse] - 1, 1)
    return ((bar_index - first_of_session) / denominator).astype(np.float32)
