"""The accounts of a batch of envs over a whole segment, recorded step by step on the device.

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

RECORDED_FIELDS = ("equity_usd", "cash_usd", "shares", "cost_usd", "traded_usd", "bar_index")
"""The ``info`` entries (or :class:`~finpod.env.dynamics.StepOutput` fields) a recorder keeps."""
FLUSH_STEPS = 512
"""Steps whose outputs are held by reference and then copied into the buffers in one op per field
(one copy per field per step cost more than the step of a small env)."""


def backtest_config(config: EnvConfig, panel: Panel, segment: str) -> EnvConfig:
    """``config`` in backtest mode: fixed start at the segment's first bar, in cash (the ledger's row 0
    and the daily returns' base are all cash), one episode to its end."""
    start, stop = panel.segment(segment)
    return dataclasses.replace(
        config, random_start=False, horizon_bars=max(stop - start - 1, 1), start_portfolio="cash"
    )


class LedgerRecorder:
    """Device buffers ``(n, N, ...)`` for the ``n`` bars of a segment and ``N`` envs, copied to the host once.

    Row 0 is the segment's first bar (all cash); row ``k`` is what the env's step ``k`` returned
    (its ``info``, or the fields of a :class:`~finpod.env.dynamics.StepOutput`). :meth:`record`
    only keeps references to the step's outputs (fresh tensors every step); every
    :data:`FLUSH_STEPS` steps they are stacked into the buffers. Nothing syncs with the host until
    :meth:`ledgers`.

    Args:
        panel: the market the envs trade (symbols, prices).
        segment: the segment the envs run over in one episode.
        config: the envs' settings (initial cash, fill mode, half-spread).
        device: where the envs run.
        num_envs: ``N``, the envs of the batch (all recorded).
    """

    def __init__(
        self, panel: Panel, segment: str, config: EnvConfig, device: torch.device, num_envs: int = 1
    ) -> None:
        self._panel, self._config = panel, config
        self.start, stop = panel.segment(segment)
        self.num_bars = n = stop - self.start
        m, f64 = panel.num_assets, torch.float64
        cash = torch.full((n, num_envs), config.initial_cash_usd, dtype=f64, device=device)
        self._buffers = {
            "equity_usd": cash,
            "cash_usd": cash.clone(),
            "shares": torch.zeros((n, num_envs, m), dtype=f64, device=device),
            "cost_usd": torch.zeros((n, num_envs), dtype=f64, device=device),
            "traded_usd": torch.zeros((n, num_envs), dtype=f64, device=device),
            "bar_index": (torch.arange(n, dtype=torch.int64, device=device) + self.start)
            .unsqueeze(1)
            .expand(n, num_envs)
            .clone(),
        }
        self._pending: list[tuple[torch.Tensor, ...]] = []
        self._next_row = 1

    @property
    def rows_recorded(self) -> int:
        """Rows filled so far, row 0 (the initial account) included."""
        return self._next_row + len(self._pending)

    def record(self, info: Mapping[str, torch.Tensor]) -> None:
        """Keep the step's ``equity_usd``, ``cash_usd`` (``(N,)``), ``shares`` (``(N, M)``), ``cost_usd``,
        ``traded_usd`` and ``bar_index`` (``(N,)``) as the next row."""
        self._pending.append(tuple(info[name] for name in RECORDED_FIELDS))
        if len(self._pending) == FLUSH_STEPS:
            self._flush()

    def record_rows(self, rows: Mapping[str, torch.Tensor]) -> None:
        """Store several consecutive rows at once: each field ``(k, N, ...)`` as :meth:`record` takes it."""
        self._flush()
        count = rows["equity_usd"].shape[0]
        for name in RECORDED_FIELDS:
            self._buffers[name][self._next_row : self._next_row + count] = rows[name]
        self._next_row += count

    def _flush(self) -> None:
        if not self._pending:
            return
        rows = slice(self._next_row, self._next_row + len(self._pending))
        for name, values in zip(RECORDED_FIELDS, zip(*self._pending, strict=True), strict=True):
            self._buffers[name][rows] = torch.stack(values)
        self._next_row = rows.stop
        self._pending.clear()

    def ledgers(self) -> list[Ledger]:
        """The recorded accounts, one :class:`Ledger` (host numpy arrays) per env, in env order.

        Raises:
            RuntimeError: a row was not recorded, or a recorded step was not on the bar its row
                stands for.
        """
        self._flush()
        if self._next_row != self.num_bars:
            raise RuntimeError(f"backtest recorded {self._next_row} of the segment's {self.num_bars} bars")
        start, n, panel = self.start, self.num_bars, self._panel
        host = {name: buffer.cpu().numpy() for name, buffer in self._buffers.items()}
        expected = np.arange(start, start + n)[:, None]
        wrong_rows, wrong_envs = np.nonzero(host["bar_index"] != expected)
        if wrong_rows.size:
            row, env = int(wrong_rows[0]), int(wrong_envs[0])
            raise RuntimeError(
                f"backtest env {env} stepped to bar {host['bar_index'][row, env]}, expected {start + row}"
            )
        fill_source = panel.open if self._config.fill == "next_open" else panel.close
        fill = fill_source[start : start + n].double().cpu().numpy()
        close = panel.close[start : start + n].double().cpu().numpy()
        slip = self._config.half_spread_fraction
        ledgers = []
        for env in range(host["equity_usd"].shape[1]):
            shares = np.ascontiguousarray(host["shares"][:, env])
            bought = np.diff(shares, axis=0, prepend=0.0) > 0
            ledgers.append(
                Ledger(
                    first_bar=start,
                    symbols=panel.symbols,
                    close_usd=close,
                    equity_usd=np.ascontiguousarray(host["equity_usd"][:, env]),
                    cash_usd=np.ascontiguousarray(host["cash_usd"][:, env]),
                    shares=shares,
                    fill_price_usd=np.where(bought, fill * (1.0 + slip), fill * (1.0 - slip)),
                    cost_usd=np.ascontiguousarray(host["cost_usd"][:, env]),
                    traded_usd=np.ascontiguousarray(host["traded_usd"][:, env]),
                )
            )
        return ledgers
