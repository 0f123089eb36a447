"""Pure batched order accounting: actions -> share orders (no-trade band) -> limits -> fills, costs, holdings.

Shapes: ``N`` envs, ``M`` assets. Prices in USD per share (float32 tables, widened on use), cash,
shares and notionals in USD as float64, so the books balance to float64 rounding over any number
of steps. No function here syncs with the host or loops over envs or assets.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from finpod.env.config import EnvConfig


class Fills(NamedTuple):
    """What one step's trades did to every portfolio.

    Attributes:
        cash_usd: ``(N,)`` cash after the trades (>= 0).
        shares: ``(N, M)`` holdings after the trades (>= 0).
        cost_usd: ``(N,)`` fees plus half-spread slippage paid (>= 0).
        traded_usd: ``(N,)`` gross traded notional at the executed prices.
    """

    cash_usd: torch.Tensor
    shares: torch.Tensor
    cost_usd: torch.Tensor
    traded_usd: torch.Tensor


def weights_to_orders(
    actions: torch.Tensor,
    cash_usd: torch.Tensor,
    shares: torch.Tensor,
    fill_price: torch.Tensor,
    rebalance_band: float,
    fully_invested: bool = False,
) -> torch.Tensor:
    """Share orders that move each portfolio to the target weights the actions ask for.

    No-trade band: an asset whose target weight differs from its current weight (both at the fill
    prices) by less than ``rebalance_band`` gets no order; cash absorbs the difference. The band is
    a mask multiply (no branch on data); ``rebalance_band == 0`` skips it, so every asset is traded.

    Args:
        actions: ``(N, M + 1)`` scores in ``[0, 1]`` over ``[cash, asset_1 .. asset_M]`` (clamped),
            normalised to weights ``w = a / sum(a)``; an all-zero row means all cash. Any floating
            dtype (the env's are float32): widened to the dtype of ``shares`` (exactly).
        cash_usd: float64 ``(N,)`` cash before the trades.
        shares: float64 ``(N, M)`` holdings before the trades.
        fill_price: float64 ``(N, M)`` fill price of the bar the orders execute in (USD/share).
        rebalance_band: no-trade band, a fraction of equity in ``[0, 1)`` (0 = no band).
        fully_invested: ignore the cash score (:attr:`~finpod.env.config.EnvConfig.fully_invested`).

    Returns:
        float64 ``(N, M)`` signed share orders (buy > 0) before limits and costs: target value is
        ``w_i x`` the portfolio's value at the fill prices; zero inside the band. A target is never
        negative, so an order never sells more than is held. The result may be a strided view of
        a fresh ``(N, M + 1)`` buffer (the scores' own, reused in place).
    """
    scores = actions.to(dtype=shares.dtype, copy=True).clamp_(0.0, 1.0)
    if fully_invested:
        scores[:, 0] = 0.0
    total = scores.sum(dim=1)
    held_usd = shares * fill_price
    equity_usd = cash_usd + held_usd.sum(dim=1)
    usd_per_score = torch.where(total > 0.0, equity_usd / total, torch.zeros_like(total))
    target_usd = scores[:, 1:].mul_(usd_per_score.unsqueeze(1))
    if rebalance_band == 0.0:
        return target_usd.div_(fill_price).sub_(shares)
    outside_band = held_usd.sub_(target_usd).abs_() >= (rebalance_band * equity_usd).unsqueeze(1)
    return target_usd.div_(fill_price).sub_(shares).mul_(outside_band)


def share_delta_to_orders(actions: torch.Tensor, max_shares: float) -> torch.Tensor:
    """Share orders of the ElegantRL-style action: ``(N, M)`` in ``[-1, 1]`` (clamped) x ``max_shares``."""
    return actions.clamp(-1.0, 1.0) * max_shares


def execute_orders(
    orders: torch.Tensor,
    cash_usd: torch.Tensor,
    shares: torch.Tensor,
    fill_price: torch.Tensor,
    buy_limit_shares: torch.Tensor,
    sell_limit_shares: torch.Tensor,
    config: EnvConfig,
    orders_within_holdings: bool = False,
) -> Fills:
    """Fill signed share orders under the step's limits, sells first, buys scaled down to the cash.

    Order of operations: never sell more than held (skipped when the caller vouches for it); clamp
    each order to ``[-sell_limit, buy_limit]`` (volume cap; an untradable asset's buy limit is 0, so
    it is never bought); round toward zero to whole shares when ``config.whole_shares``; execute the
    sells at ``p (1 - half_spread)`` less the fee; scale every buy of the env by one factor ``k <= 1``
    so that buys at ``p (1 + half_spread)`` plus the fee fit in the cash (whole shares: rounded down
    after scaling). Cash, shares, costs are then exact functions of the executed quantities; cash is
    clamped at 0 to absorb rounding.
    All tensors share one floating dtype (float64 in the env: :data:`~finpod.env.state.MONEY_DTYPE`).

    Each ``(N, M)`` pass writes a buffer this function allocated itself (three in all: the sells,
    which become the new holdings, the buys, and one scratch for the notionals): at ``M = 100`` the
    passes, not the per-env scalars, are the step's cost. New holdings need no clamp at 0: a sell
    is at least ``-shares`` and a buy at least 0, and float rounding is monotone.

    Args:
        orders: ``(N, M)`` signed share orders (buy > 0).
        cash_usd: ``(N,)`` cash before the trades.
        shares: ``(N, M)`` holdings before the trades.
        fill_price: ``(N, M)`` fill price (USD/share) before the half-spread.
        buy_limit_shares: ``(N, M)`` most shares each asset may be bought this step (>= 0).
        sell_limit_shares: ``(N, M)`` most shares each asset may be sold this step (>= 0).
        config: fee rate, half-spread and whole-share setting.
        orders_within_holdings: the caller guarantees ``orders >= -shares`` (as
            :func:`weights_to_orders` does), so the clamp at the holdings is skipped (one ``(N, M)``
            pass less). A broker's orders never come with this guarantee.

    Returns:
        The :class:`Fills` of the step.
    """
    half_spread = config.half_spread_fraction
    fee_rate = config.fee_rate
    zero = orders.new_zeros(())
    if orders_within_holdings:
        scratch = sell_limit_shares.neg()
    else:
        scratch = torch.minimum(shares, sell_limit_shares).neg_()
    sells = torch.clamp(orders, min=scratch, max=zero)
    buys = torch.clamp(orders, min=zero, max=buy_limit_shares)
    if config.whole_shares:
        sells, buys = sells.trunc_(), buys.trunc_()
    sell_usd_at_fill = torch.mul(sells, fill_price, out=scratch).sum(dim=1).neg_()
    sell_exec_usd = sell_usd_at_fill * (1.0 - half_spread)
    cash_after_sells_usd = cash_usd + sell_exec_usd * (1.0 - fee_rate)
    buy_usd_at_fill = torch.mul(buys, fill_price, out=scratch).sum(dim=1)
    buy_need_usd = buy_usd_at_fill * ((1.0 + half_spread) * (1.0 + fee_rate))
    short_of_cash = buy_need_usd > cash_after_sells_usd
    smallest_usd = torch.finfo(buy_need_usd.dtype).tiny
    buy_scale = torch.where(short_of_cash, cash_after_sells_usd / buy_need_usd.clamp(min=smallest_usd), 1.0)
    new_shares = sells.add_(shares)
    if config.whole_shares:
        buys = buys.mul_(buy_scale.unsqueeze(1)).floor_()
        buy_usd_at_fill = torch.mul(buys, fill_price, out=scratch).sum(dim=1)
        new_shares = new_shares.add_(buys)
    else:
        buy_usd_at_fill = buy_usd_at_fill * buy_scale
        new_shares = new_shares.addcmul_(buys, buy_scale.unsqueeze(1))
    buy_exec_usd = buy_usd_at_fill * (1.0 + half_spread)
    new_cash_usd = (cash_after_sells_usd - buy_exec_usd * (1.0 + fee_rate)).clamp(min=0.0)
    traded_usd = sell_exec_usd + buy_exec_usd
    spread_usd = (sell_usd_at_fill + buy_usd_at_fill) * half_spread
    cost_usd = spread_usd + traded_usd * fee_rate
    return Fills(cash_usd=new_cash_usd, shares=new_shares, cost_usd=cost_usd, traded_usd=traded_usd)
