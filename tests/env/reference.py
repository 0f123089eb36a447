"""A float64 reference of one env step, written plainly (loops over assets, one env at a time).

The env keeps its books (cash, shares, equity, costs) in float64 and its market tables (prices,
volume caps) in float32; this reference reads the same float32 market values and does all the
arithmetic in float64, so the two agree to float64 rounding.

It restates the contract of DESIGN.md / EnvConfig independently of the batched code: targets ->
orders, no order for an asset whose weight is within the rebalance band of its target, never sell
more than held (nor on a filled bar), volume cap, untradable assets not bought, whole shares
rounded toward zero, sells first, buys scaled by one factor to the cash, fee on executed notional,
half-spread against the trader, valuation at the next bar's close.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from finpod.data.panel import Panel
from finpod.env.config import EnvConfig

ROUNDING_AMBIGUITY_SHARES = 1e-9
"""A whole-share rounding whose argument lies this close to an integer may round either way (the
env sums in another order than this reference, both in float64)."""
ROUNDING_AMBIGUITY_ULPS = 64.0
"""... and so may one within this many float64 ulps of the portfolio's value, in shares of the asset."""
FLOAT64_EPS = 2.0**-52
BAND_AMBIGUITY_WEIGHT = 1e-12
"""A weight gap this close to the rebalance band may fall on either side of it in float64."""


@dataclass
class RefStep:
    """One env's step in float64."""

    cash_usd: float
    shares: list[float]
    equity_usd: float
    cost_usd: float
    traded_usd: float
    reward: float
    rounding_ambiguous: bool
    band_ambiguous: bool


def _near_integer(value: float, tolerance: float) -> bool:
    distance = abs(value - round(value))
    return 0.0 < distance < tolerance


def reference_step(
    panel: Panel,
    config: EnvConfig,
    bar: int,
    cash_usd: float,
    shares: list[float],
    equity_usd: float,
    action: list[float],
) -> RefStep:
    """Step one portfolio that observed bar ``bar`` with ``action``; everything in float64."""
    nxt = bar + 1
    fill_table = panel.open if config.fill == "next_open" else panel.close
    fill = [float(x) for x in fill_table[nxt].double()]
    close = [float(x) for x in panel.close[nxt].double()]
    volume = [float(x) for x in panel.volume[nxt].double()]
    tradable = [bool(x) for x in panel.tradable[nxt]]
    num_assets = len(fill)
    half_spread = config.half_spread_bps / 10_000.0
    ambiguous = False
    band_ambiguous = False

    orders = []
    value_at_fill = cash_usd + sum(shares[i] * fill[i] for i in range(num_assets))
    tolerance = [
        max(ROUNDING_AMBIGUITY_SHARES, ROUNDING_AMBIGUITY_ULPS * FLOAT64_EPS * value_at_fill / fill[i])
        for i in range(num_assets)
    ]
    if config.action_mode == "weights":
        scores = [min(max(a, 0.0), 1.0) for a in action]
        if config.fully_invested:
            scores[0] = 0.0
        total = sum(scores)
        for i in range(num_assets):
            target = scores[i + 1] / total * value_at_fill / fill[i] if total > 0 else 0.0
            target_weight = scores[i + 1] / total if total > 0 else 0.0
            weight_gap = abs(target_weight - shares[i] * fill[i] / value_at_fill)
            if config.rebalance_band > 0:
                band_ambiguous = (
                    band_ambiguous or abs(weight_gap - config.rebalance_band) < BAND_AMBIGUITY_WEIGHT
                )
            orders.append(target - shares[i] if weight_gap >= config.rebalance_band else 0.0)
    else:
        for i in range(num_assets):
            orders.append(min(max(action[i], -1.0), 1.0) * config.max_shares)

    for i in range(num_assets):
        order = max(orders[i], -shares[i])
        if math.isfinite(config.max_participation):  # a market datum, tabled in float32 like prices
            cap = float(np.float32(volume[i]) * np.float32(config.max_participation))
        else:  # no size cap, but no sell on a filled bar (not tradable, zero volume)
            cap = math.inf if tradable[i] or volume[i] > 0 else 0.0
        buy_cap = cap if tradable[i] else 0.0
        order = min(max(order, -cap), buy_cap)
        if config.whole_shares:
            ambiguous = ambiguous or _near_integer(order, tolerance[i])
            order = float(math.trunc(order))
        orders[i] = order

    cash = cash_usd
    new_shares = list(shares)
    cost = 0.0
    traded = 0.0
    for i in range(num_assets):
        if orders[i] < 0:
            executed = -orders[i] * fill[i] * (1 - half_spread)
            fee = executed * config.fee_rate
            cash += executed - fee
            new_shares[i] += orders[i]
            cost += -orders[i] * fill[i] * half_spread + fee
            traded += executed

    need = sum(
        orders[i] * fill[i] * (1 + half_spread) * (1 + config.fee_rate)
        for i in range(num_assets)
        if orders[i] > 0
    )
    scale = cash / need if need > cash else 1.0
    for i in range(num_assets):
        if orders[i] > 0:
            buy = orders[i] * scale
            if config.whole_shares:
                ambiguous = ambiguous or _near_integer(buy, tolerance[i])
                buy = float(math.floor(buy))
            executed = buy * fill[i] * (1 + half_spread)
            fee = executed * config.fee_rate
            cash -= executed + fee
            new_shares[i] += buy
            cost += buy * fill[i] * half_spread + fee
            traded += executed
    cash = max(cash, 0.0)

    equity = cash + sum(new_shares[i] * close[i] for i in range(num_assets))
    if config.reward == "pnl":
        reward = (equity - equity_usd) / config.initial_cash_usd
    else:
        log_return = math.log(equity / equity_usd)
        reward = (
            log_return - config.risk_penalty * log_return**2
            if config.reward == "risk_penalised"
            else log_return
        )
    return RefStep(
        cash_usd=cash,
        shares=new_shares,
        equity_usd=equity,
        cost_usd=cost,
        traded_usd=traded,
        reward=reward * config.reward_scale,
        rounding_ambiguous=ambiguous,
        band_ambiguous=band_ambiguous,
    )


def reference_observation(
    panel: Panel, bar: int, cash_usd: float, shares: list[float], equity_usd: float
) -> list[float]:
    """The observation row of a portfolio at bar ``bar``'s close, in float64.

    ``[features of bar (asset-major), weight of each asset at the close, cash share, position of
    the bar in its session]``: a function of the bar and the portfolio only (no episode clock).
    """
    close = [float(x) for x in panel.close[bar].double()]
    features = [float(x) for x in panel.features[bar].double().reshape(-1)]
    ids = [int(x) for x in panel.session_ids]
    session = [i for i, s in enumerate(ids) if s == ids[bar]]
    position = (bar - session[0]) / max(len(session) - 1, 1)
    weights = [shares[i] * close[i] / equity_usd for i in range(len(close))]
    return [*features, *weights, cash_usd / equity_usd, position]


def reference_batch(
    panel: Panel,
    config: EnvConfig,
    bars: np.ndarray,
    cash_usd: np.ndarray,
    shares: np.ndarray,
    equity_usd: np.ndarray,
    actions: np.ndarray,
) -> list[RefStep]:
    """:func:`reference_step` for each env (row) of float64 arrays, one env after the other."""
    return [
        reference_step(
            panel,
            config,
            int(bars[n]),
            float(cash_usd[n]),
            [float(x) for x in shares[n]],
            float(equity_usd[n]),
            [float(x) for x in actions[n]],
        )
        for n in range(len(bars))
    ]
