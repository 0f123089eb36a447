"""A backtest that steps a trader many bars at a time, on the bet that its account holds.

At minute scale a trader with a rebalance band trades on few bars (0.1 to 0.3 % of them for the
reference minute spec's agents, untrained and trained), and stepping one bar at a time pays the
fixed cost of a network pass and an env step (about a hundred tiny ops) on every bar. Run-ahead
instead takes the next ``K`` bars at once:

1. it observes each of them as the account would if it traded nothing until then
   (:func:`~finpod.env.dynamics.observe_holding`: a step without orders leaves cash and shares bit
   for bit unchanged, only the valuation moves);
2. it runs the policy on those ``K`` observations as one batch, and settles each bar's action
   against the unchanged account (:func:`~finpod.env.dynamics.settle`, the env's own arithmetic);
3. it keeps the bars up to and including the first one whose settlement changes the account's
   cash or shares (compared bit for bit): every kept bar entered with the true account, so its
   row is what a step would have recorded. The next block starts from that bar's account.

``K`` doubles while blocks hold through (up to :data:`MAX_BARS`) and shrinks to the bars kept
after a trade; it follows only the trader's own decisions, so a trader's backtest does not
depend on the traders beside it. It runs with one torch thread, so it does not depend on the
machine either (:data:`THREADS`); results are identical from run to run.

Only policies known to act on each observation row alone run ahead (:func:`runs_ahead`: agents'
frozen evaluation policies, flat MLP or cross-sectional, and ensembles of them). Their ``K``-row
products may round differently from one-row products (the CPU's matrix kernels differ by shape), so
a run-ahead backtest equals the bar-by-bar one to float32 rounding of the actions, not bit for bit
(``tests/app/test_run_ahead.py``
bounds it).

Shapes: ``K`` bars of a block, ``M`` assets, ``D`` observation size, ``A`` action size.
"""

from __future__ import annotations

from collections import Counter

import torch

from finpod.backtest.ensemble import EnsemblePolicy
from finpod.backtest.pyfolio_format import Ledger
from finpod.backtest.recorder import LedgerRecorder, backtest_config
from finpod.data.panel import Panel
from finpod.env import dynamics
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from podracer.api import FrozenActorPolicy, Policy, RowWisePolicy

MIN_BARS = 1
"""The shortest block (after a trade on a block's first bar)."""
MAX_BARS = 256
"""The longest block: the batch the policy sees at most."""
PROBE_BARS = 1024
"""Bars a trader runs ahead before :func:`run_ahead` may give up on it as a dense trader."""
DENSE_SHARE = 0.2
"""Above this share of bars with a trade, running ahead is slower than stepping bar by bar beside the
other traders (measured: about even at a third of bars; `scripts/minute_eval_bench.py --rebalance-band`)."""
THREADS = 1
"""Torch threads a run-ahead pass runs with (the caller sets them): fixed, so its numbers never depend
on the machine's core count."""
SEED = 0
"""The backtest env is deterministic; the seed only satisfies the env's signature."""


def runs_ahead(policy: Policy) -> bool:
    """Whether ``policy`` acts on each observation row alone, so it may see many bars as one batch:
    an agent's frozen evaluation policy (the flat MLP's or the cross-sectional network's), or an
    ensemble of them. A user's function is not known to, so it steps bar by bar."""
    if isinstance(policy, EnsemblePolicy):
        return all(runs_ahead(member) for member in policy.members)
    return isinstance(policy, FrozenActorPolicy | RowWisePolicy)


def next_block_bars(kept: int, block: int) -> int:
    """The next block's length after one of ``block`` bars that kept ``kept``: double after a
    block that held through, else the bars the last one kept (a trader that trades on every bar
    steps one bar at a time); within ``[MIN_BARS, MAX_BARS]``."""
    grown = 2 * block if kept == block else kept
    return max(MIN_BARS, min(MAX_BARS, grown))


def _bits(values: torch.Tensor) -> torch.Tensor:
    return values.view(torch.int64)


def run_ahead(
    panel: Panel,
    segment: str,
    config: EnvConfig,
    policy: Policy,
    device: torch.device,
    blocks: Counter[int] | None = None,
    give_up_if_dense: bool = False,
) -> Ledger | None:
    """Trade ``policy`` over segment ``segment`` once, many bars at a time; the account at every bar.

    Args:
        panel: the market.
        segment: ``"validation"`` or ``"backtest"``.
        config: env settings (costs, limits, band, action mode); start and horizon are overridden.
        policy: a policy for which :func:`runs_ahead` is true: observations ``(K, D)`` -> actions
            ``(K, A)``, row by row.
        device: where the env and policy run.
        blocks: if given, the number of blocks of each length is added to it.
        give_up_if_dense: stop and return None once the account has changed on more than
            :data:`DENSE_SHARE` of the bars run so far (checked from :data:`PROBE_BARS` bars on): the
            bar-by-bar pass is faster for such a trader.

    Returns:
        The ledger over the segment's bars (row 0, the first bar, is all cash), or None when it gave up.

    Raises:
        ValueError: ``policy`` does not act row by row.
    """
    if not runs_ahead(policy):
        raise ValueError(f"run_ahead needs a row-wise frozen policy, got {type(policy).__name__}")
    env_config = backtest_config(config, panel, segment)
    env = TradingEnv(panel, segment, env_config, 1, SEED, device)
    env.reset(seed=SEED)
    market, state = env.market, env.state
    recorder = LedgerRecorder(panel, segment, config, device)
    last_bar = recorder.start + recorder.num_bars - 1
    cash, shares, bar = state.cash_usd, state.shares, int(state.t[0])
    block, first_bar, changes = MIN_BARS, bar, 0
    with torch.inference_mode():
        while bar < last_bar:
            count = min(block, last_bar - bar)
            bars = torch.arange(bar, bar + count, dtype=torch.int64, device=device)
            obs, equity = dynamics.observe_holding(market, cash, shares, bars)
            actions = policy(obs).to(dtype=torch.float32)
            done = dynamics.settle(
                env_config,
                actions,
                cash.expand(count),
                shares.expand(count, -1),
                equity,
                market.bars.index_select(0, bars + 1),
            )
            changed = (_bits(done.cash_usd) != _bits(cash)) | (_bits(done.shares) != _bits(shares)).any(dim=1)
            first_change = int(torch.argmax(changed.to(torch.int8))) if bool(changed.any()) else count
            kept = min(first_change + 1, count)
            recorder.record_rows(
                {
                    "equity_usd": done.equity_usd[:kept, None],
                    "cash_usd": done.cash_usd[:kept, None],
                    "shares": done.shares[:kept, None],
                    "cost_usd": done.cost_usd[:kept, None],
                    "traded_usd": done.traded_usd[:kept, None],
                    "bar_index": (bars[:kept] + 1)[:, None],
                }
            )
            cash, shares = done.cash_usd[kept - 1 : kept].clone(), done.shares[kept - 1 : kept].clone()
            bar += kept
            changes += first_change < count
            if (
                give_up_if_dense
                and bar - first_bar >= PROBE_BARS
                and changes > DENSE_SHARE * (bar - first_bar)
            ):
                return None
            if blocks is not None:
                blocks[count] += 1
            block = next_block_bars(kept, count)
    return recorder.ledgers()[0]
