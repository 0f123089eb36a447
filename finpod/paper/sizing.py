"""Target weights -> share orders, with the env's rules, then the paper limits on top.

The env's own functions decide the quantities: :func:`~finpod.env.accounting.weights_to_orders` (target
value at the order price, no-trade band) and :func:`~finpod.env.accounting.execute_orders` run as a
plan (never sell more than held, untradable assets not bought, whole shares when the spec says so,
buys scaled so that they and their fee and half-spread fit in the cash). The paper limits then only
shrink orders: a weight cap per asset (applied to the target first) and a notional cap per order.
Money in float64 (USD), quantities in shares, shapes ``(M,)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from finpod.env.accounting import execute_orders, weights_to_orders
from finpod.env.config import EnvConfig

MIN_ORDER_SHARES = 1e-6
"""Smaller quantities are not sent (rounding dust)."""
QTY_DECIMALS = 9
"""Alpaca accepts quantities with at most 9 decimals; orders are rounded toward zero to them."""
ALPACA_MIN_NOTIONAL_USD = 1.0
"""Alpaca refuses a fractional order under 1 USD; the live limits drop such orders."""


@dataclass(frozen=True)
class OrderLimits:
    """The paper limits that shape orders (``inf`` = off, as in a parity replay).

    Attributes:
        max_weight_per_asset: cap on one asset's target weight (fraction of equity).
        max_order_notional_usd: cap on one order's notional (USD).
        min_order_notional_usd: smaller orders are not sent (USD; the broker's minimum live).
    """

    max_weight_per_asset: float = 1.0
    max_order_notional_usd: float = math.inf
    min_order_notional_usd: float = 0.0


@dataclass(frozen=True)
class OrderPlan:
    """Orders for one decision bar.

    Attributes:
        weights: ``(M + 1,)`` target weights after the weight cap (cash first).
        delta_shares: ``(M,)`` signed shares to trade (buy > 0), 0 where nothing is sent.
        weight_capped: assets whose target weight the cap cut.
        notional_capped: assets whose order the notional cap cut.
    """

    weights: np.ndarray
    delta_shares: np.ndarray
    weight_capped: list[int]
    notional_capped: list[int]


def cap_weights(weights: np.ndarray, cap: float) -> tuple[np.ndarray, list[int]]:
    """``weights`` ``(M + 1,)`` with every asset weight cut to ``cap``; the excess goes to cash."""
    out = np.asarray(weights, dtype=np.float64).copy()
    over = np.flatnonzero(out[1:] > cap)
    out[0] += float((out[1:][over] - cap).sum())
    out[1:][over] = cap
    return out, [int(i) for i in over]


def plan_orders(
    weights: np.ndarray,
    cash_usd: float,
    shares: np.ndarray,
    price_usd: np.ndarray,
    tradable: np.ndarray,
    config: EnvConfig,
    limits: OrderLimits,
) -> OrderPlan:
    """The orders that move the portfolio towards ``weights``.

    Args:
        weights: ``(M + 1,)`` target weights over ``[cash, assets]`` (sum 1).
        cash_usd: cash now.
        shares: ``(M,)`` holdings now.
        price_usd: ``(M,)`` the price the orders are expected to fill at (the env's next open; live:
            the latest price).
        tradable: ``(M,)`` bool, may be bought now.
        config: the run's env settings (fee, half-spread, band, whole shares).
        limits: the paper limits.
    """
    capped, weight_capped = cap_weights(weights, limits.max_weight_per_asset)
    as_t = lambda a: torch.as_tensor(np.asarray(a, dtype=np.float64))[None]  # noqa: E731
    cash, held, price = as_t([cash_usd]).reshape(1), as_t(shares), as_t(price_usd)
    orders = weights_to_orders(as_t(capped), cash, held, price, config.rebalance_band)
    buy_limit = torch.where(torch.as_tensor(np.asarray(tradable, dtype=bool))[None], math.inf, 0.0).to(
        torch.float64
    )
    fills = execute_orders(orders, cash, held, price, buy_limit, torch.full_like(held, math.inf), config)
    delta = (fills.shares - held)[0].numpy()
    notional = np.abs(delta) * np.asarray(price_usd, dtype=np.float64)
    over = np.flatnonzero(notional > limits.max_order_notional_usd)
    if over.size:
        scale = limits.max_order_notional_usd / notional[over]
        delta[over] = delta[over] * scale
        if config.whole_shares:
            delta[over] = np.trunc(delta[over])
    delta = np.trunc(delta * 10**QTY_DECIMALS) / 10**QTY_DECIMALS
    small = np.abs(delta) * np.asarray(price_usd, dtype=np.float64) < limits.min_order_notional_usd
    delta[(np.abs(delta) < MIN_ORDER_SHARES) | small] = 0.0
    return OrderPlan(capped, delta, weight_capped, [int(i) for i in over])
