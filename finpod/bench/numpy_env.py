"""The comparison point: one portfolio in numpy, written the way classic FinRL stock envs are.

Same semantics as :class:`finpod.env.TradingEnv` in ``weights`` mode (fill at the next bar, fee
and half-spread, volume cap, untradable assets not bought, sells first, buys scaled to the cash,
the same observation layout), but one env at a time with a Python loop over the stocks for the
sells and the buys, as the reference FinRL ``StockTradingEnv`` does. Only the benchmark uses it.
"""

from __future__ import annotations

import math

import numpy as np

from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.market import session_progress
from finpod.errors import SpecError


class ClassicNumpyEnv:
    """One long-only portfolio over ``M`` assets of one panel segment (float64 numpy).

    Args:
        panel: the market (copied to numpy).
        segment: the segment to trade.
        config: env settings; only ``action_mode="weights"``, ``reward="log_return"``, no
            ``rebalance_band``, ``start_portfolio="cash"`` and not ``fully_invested``.
        seed: seeds the random start bars.
    """

    def __init__(self, panel: Panel, segment: str, config: EnvConfig, seed: int) -> None:
        if (
            config.action_mode != "weights"
            or config.reward != "log_return"
            or config.rebalance_band != 0.0
            or config.start_portfolio != "cash"
            or config.fully_invested
        ):
            raise SpecError(
                "the numpy comparison env supports action_mode='weights', reward='log_return', "
                "rebalance_band=0, start_portfolio='cash' and fully_invested=false only"
            )
        self.config = config
        start, stop = panel.segment(segment)
        self.first_bar, self.last_bar = start, stop - 1
        self.horizon_bars = min(config.horizon_bars, stop - start - 1)
        fill = panel.open if config.fill == "next_open" else panel.close
        self.fill = fill.double().cpu().numpy()
        self.close = panel.close.double().cpu().numpy()
        self.volume = panel.volume.double().cpu().numpy()
        self.tradable = panel.tradable.cpu().numpy()
        self.features = panel.features.reshape(panel.num_bars, -1).cpu().numpy()
        self.session_progress = session_progress(panel.session_ids)
        self.num_assets = panel.num_assets
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> np.ndarray:
        """Start an episode with all cash; returns the first observation ``(D,)``."""
        num_starts = self.last_bar - self.first_bar + 1 - self.horizon_bars if self.config.random_start else 1
        self.start = self.first_bar + int(self.rng.integers(num_starts))
        self.end = min(self.start + self.horizon_bars, self.last_bar)
        self.t = self.start
        self.cash = self.config.initial_cash_usd
        self.shares = [0.0] * self.num_assets
        self.equity = self.cash
        return self._observation()

    def _observation(self) -> np.ndarray:
        weights = [self.shares[i] * self.close[self.t, i] / self.equity for i in range(self.num_assets)]
        state = [*weights, self.cash / self.equity, self.session_progress[self.t]]
        return np.concatenate([self.features[self.t], np.array(state)]).astype(np.float32)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, float]:
        """Trade to the target weights ``action`` ``(M + 1,)``; returns obs, reward, flags, equity."""
        config = self.config
        nxt = self.t + 1
        half_spread = config.half_spread_bps / 10_000.0
        scores = np.clip(action, 0.0, 1.0)
        total = float(scores.sum())
        value = self.cash + sum(self.shares[i] * self.fill[nxt, i] for i in range(self.num_assets))
        orders = []
        for i in range(self.num_assets):
            price = self.fill[nxt, i]
            target = scores[i + 1] / total * value / price if total > 0 else 0.0
            if config.volume_capped:
                cap = config.max_participation * self.volume[nxt, i]
            else:  # no sell on a filled bar (not tradable, zero volume)
                cap = math.inf if self.tradable[nxt, i] or self.volume[nxt, i] > 0 else 0.0
            order = min(
                max(target - self.shares[i], -self.shares[i], -cap), cap if self.tradable[nxt, i] else 0.0
            )
            orders.append(float(math.trunc(order)) if config.whole_shares else order)
        for i in range(self.num_assets):  # sells first
            if orders[i] < 0:
                executed = -orders[i] * self.fill[nxt, i] * (1 - half_spread)
                self.cash += executed * (1 - config.fee_rate)
                self.shares[i] += orders[i]
        need = 0.0
        for i in range(self.num_assets):
            if orders[i] > 0:
                need += orders[i] * self.fill[nxt, i] * (1 + half_spread) * (1 + config.fee_rate)
        scale = self.cash / need if need > self.cash else 1.0
        for i in range(self.num_assets):  # then buys, scaled to the cash
            if orders[i] > 0:
                buy = math.floor(orders[i] * scale) if config.whole_shares else orders[i] * scale
                self.cash -= buy * self.fill[nxt, i] * (1 + half_spread) * (1 + config.fee_rate)
                self.shares[i] += buy
        self.cash = max(self.cash, 0.0)
        equity = self.cash + sum(self.shares[i] * self.close[nxt, i] for i in range(self.num_assets))
        reward = math.log(equity / self.equity) * config.reward_scale
        self.t, self.equity = nxt, equity
        truncated = nxt >= self.end
        obs = self.reset() if truncated else self._observation()
        return obs, reward, False, truncated, equity
