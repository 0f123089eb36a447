"""The account of one env over a whole segment, recorded step by step on the device.

Shared by the traders' and the baselines' runs, so both produce their :class:`Ledger` the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import torch

from finpod.backtest.pyfolio_format import Ledger
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig


def backtest_config(config: EnvConfig, panel: Panel, segment: str) -> EnvConfig:
    """``config`` in backtest mode: fixed start at the segment's first bar, one episode to its end."""
    start, stop = panel.segment(segment)
    return dataclasses.replace(config, random_start=False, horizon_bars=max(stop - start - 1, 1))


class LedgerRecorder:
    """Device buffers ``(n, ...)`` for the ``n`` bars of a segment, copied to the host once.

    Row 0 is the segment's first bar (all cash); row ``k`` is what the env's step ``k`` returned
    (its ``info``, or the fields of a :class:`~finpod.env.dynamics.StepOutput`) for one env of the
    batch. Nothing syncs with the host until :meth:`ledger`.

    Args:
        panel: the market the env trades (symbols, prices).
        segment: the segment the env runs over in one episode.
        config: the env's settings (initial cash, fill mode, half-spread).
        device: where the env runs.
        env_index: which env of a batch this recorder follows (row ``env_index`` of every ``info``).
    """

    def __init__(
        self, panel: Panel, segment: str, config: EnvConfig, device: torch.device, env_index: int = 0
    ) -> None:
        self._panel, self._config, self._env = panel, config, env_index
        self.start, stop = panel.segment(segment)
        self.num_bars = n = stop - self.start
        m = panel.num_assets
        self._equity = torch.full((n,), config.initial_cash_usd, dtype=torch.float64, device=device)
        self._cash = self._equity.clone()
        self._shares = torch.zeros((n, m), dtype=torch.float64, device=device)
        self._cost = torch.zeros(n, dtype=torch.float64, device=device)
        self._traded = torch.zeros(n, dtype=torch.float64, device=device)
        self._bar = torch.arange(n, dtype=torch.int64, device=device) + self.start

    def record(self, row: int, info: Mapping[str, torch.Tensor]) -> None:
        """Store the followed env's ``equity_usd``, ``cash_usd``, ``shares``, ``cost_usd``,
        ``traded_usd`` and ``bar_index`` in row ``row``."""
        env = self._env
        self._equity[row] = info["equity_usd"][env]
        self._cash[row] = info["cash_usd"][env]
        self._shares[row] = info["shares"][env]
        self._cost[row] = info["cost_usd"][env]
        self._traded[row] = info["traded_usd"][env]
        self._bar[row] = info["bar_index"][env]

    def ledger(self) -> Ledger:
        """The recorded account as a :class:`Ledger` (host numpy arrays).

        Raises:
            RuntimeError: a recorded step was not on the bar its row stands for.
        """
        start, n, panel = self.start, self.num_bars, self._panel
        bars = self._bar.cpu().numpy()
        wrong = np.flatnonzero(bars != np.arange(start, start + n))
        if wrong.size:
            row = int(wrong[0])
            raise RuntimeError(f"backtest env stepped to bar {bars[row]}, expected {start + row}")
        shares = self._shares.cpu().numpy()
        fill_source = panel.open if self._config.fill == "next_open" else panel.close
        fill = fill_source[start : start + n].double().cpu().numpy()
        bought = np.diff(shares, axis=0, prepend=0.0) > 0
        slip = self._config.half_spread_fraction
        return Ledger(
            first_bar=start,
            symbols=panel.symbols,
            close_usd=panel.close[start : start + n].double().cpu().numpy(),
            equity_usd=self._equity.cpu().numpy(),
            cash_usd=self._cash.cpu().numpy(),
            shares=shares,
            fill_price_usd=np.where(bought, fill * (1.0 + slip), fill * (1.0 - slip)),
            cost_usd=self._cost.cpu().numpy(),
            traded_usd=self._traded.cpu().numpy(),
        )
