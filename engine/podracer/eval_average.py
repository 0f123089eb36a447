"""Polyak averaging: an exponential moving average of a network's parameters, for evaluation.

A PPO agent's weights move with every round's noisy gradient. Where the signal is weak (a realistic
trading edge: most of each reward is noise), the weights of any one round are the trend plus that
round's noise, and a validation score of them ranks the noise as much as the trend. The average of
the last ``~1 / (1 - decay)`` rounds keeps the trend and damps the noise (Polyak and Juditsky 1992;
the weight EMA that stochastic weight averaging and many RL code bases evaluate). Training goes on
from the current weights; only the deterministic policy (validation scores, snapshots' traders,
backtests, paper trading) uses the average.

The average is :class:`torch.optim.swa_utils.AveragedModel` with an EMA update; buffers are copied.
Its first update copies the weights, so an agent evaluated before any round evaluates its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

EvalAverage = AveragedModel
"""The averaged copy of a network (its ``module`` is a network of the same class)."""


def eval_average(model: torch.nn.Module, decay: float) -> EvalAverage | None:
    """An EMA copy of ``model`` with ``decay`` per update, or ``None`` when ``decay`` is 0 (no average)."""
    if decay <= 0.0:
        return None
    average = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=False)
    average.requires_grad_(False)
    return average


def update_average(average: EvalAverage | None, model: torch.nn.Module) -> None:
    """Fold ``model``'s current parameters into ``average`` (a no-op without one)."""
    if average is not None:
        with torch.no_grad():
            average.update_parameters(model)


def evaluated_model(average: EvalAverage | None, model: torch.nn.Module) -> torch.nn.Module:
    """The network evaluation uses: the average once it holds an update, else ``model`` itself."""
    if average is None or int(average.n_averaged) == 0:
        return model
    module: torch.nn.Module = average.module
    return module


def average_state(average: EvalAverage | None) -> dict[str, Any] | None:
    """The average as plain tensors for a snapshot (``None`` without one)."""
    if average is None:
        return None
    return {k: v.detach().clone() for k, v in average.state_dict().items()}


def load_average(average: EvalAverage | None, state: Mapping[str, Any] | None) -> None:
    """Restore ``average`` from :func:`average_state`'s output; with ``state`` ``None`` (a snapshot
    taken without an average) it starts over: its next update copies the weights."""
    if average is None:
        return
    if state is None:
        average.n_averaged.zero_()
        return
    average.load_state_dict(dict(state))


__all__ = [
    "EvalAverage",
    "average_state",
    "eval_average",
    "evaluated_model",
    "load_average",
    "update_average",
]
