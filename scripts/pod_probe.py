"""One pod alone on a skill-bench case: its current policy's validation and held-out skill as it trains.

No tournament and no selection: every ``--every`` rounds the pod's current deterministic policy is
scored on the validation segment (Sharpe minus equal weight's) and on the held-out years (share of
the oracle's edge), so learning can be seen apart from the leaderboard's pick (BENCHMARKS.md "The
reward's own gradient").

    python scripts/pod_probe.py --case daily100-reversal_5-ic05-5bp --seed 100 --env-steps 40960 \
        --every 20 --set agent.learning_rate=3e-4

Prints one line per probe ``env_steps train_seconds validation_dsharpe held_out_share
held_out_score_ic [held_out_forecast_ic] validation_score_ic [validation_forecast_ic]`` followed by
how the held-out book looks (:func:`book_shape`: effective names, largest weight, daily turnover in
%, costs in bp a year, annualised return and tracking error over equal weight, and the cash held:
mean and standard deviation, in % of equity) and the in-use score IC (of the targets the held-out
pass traded from, its own holdings in each row), with ``--temper a`` the same book's validation
dSharpe, share and columns when its weights are tempered (``w**a`` renormalised: its scores times
``a``; in the JSON, after a ``"|"``), with ``--family S`` the policy's scores (its asset weights'
logs) traded through the oracle's tilt family, its member fitted on segment ``S`` (the member's
tilt, top fraction and band in equal weights, its fitted Sharpe, then the held-out share and
book), and a JSON summary last. A first line shows the oracle's
held-out book in the same columns: the ceiling's concentration, turnover and costs, to hold the
pod's against. An IC is a segment's mean cross-sectional correlation of the policy's entity scores
(or of its forecast head's outputs, with ``agent.forecast_coef > 0``) with the next bar's return, on
the rows of an all-cash account. One torch thread (as one pod of the bench's tournament).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from finpod.backtest.pyfolio_format import Ledger, ledger_to_result
from finpod.backtest.runner import run_policy
from finpod.bench import skill_bench
from finpod.bench.skill_bench import cross_sectional_ic, target_weights_ic
from finpod.data.calendar import FULL_SESSION_MINUTES
from finpod.env.market import session_progress
from finpod.env.observation import all_cash_rows
from finpod.oracle import equal_weight_policy, returns_sharpe, share_captured
from finpod.pipeline.training import deterministic_policy, validation_score
from finpod.tilt import fit_tilt, tilt_policy


def held_out_ics(problem: Any, agent: Any, segment: str = "backtest") -> Callable[[], list[float]]:
    """A function of no arguments: the ICs of ``agent``'s entity scores (and forecast) on ``segment``."""
    full = problem.full
    features = full.features  # (T, M, F)
    t_bars, m, _ = features.shape
    log_close = full.close.double().log()
    outcome = torch.zeros(t_bars, m, dtype=torch.float64)
    outcome[:-1] = log_close[1:] - log_close[:-1]
    start, stop = full.segments[segment]
    rows = slice(start, stop - 1)
    layout = agent.layout
    progress = torch.from_numpy(session_progress(full.session_ids)[rows])
    obs = all_cash_rows(features[rows].float(), progress)

    def ics() -> list[float]:
        model = agent.evaluation_model
        with torch.no_grad():
            normal = agent._normalize(obs.to(agent.device))
            if getattr(model, "forecast_head", None) is not None:
                dist, _, forecast = model.distribution_value_and_forecast(normal)
            else:
                dist, forecast = model.distribution(normal), None
        scores = dist.loc[:, layout.action_globals :].cpu()
        found = [cross_sectional_ic(scores.double(), outcome[rows])]
        if forecast is not None:
            found.append(cross_sectional_ic(forecast.cpu().double(), outcome[rows]))
        return found

    return ics


def book_shape(ledger: Ledger, equal_weight: Ledger, bars_per_day: int = 1) -> list[float]:
    """How a traded book looks over a segment: ``[effective names (median of (sum w_i)**2 / sum
    w_i**2, the invested part), largest weight (median), daily turnover (% of equity, mean), costs
    (bp of equity a year), return over equal weight's (a year), tracking error against it (a year),
    cash (% of equity, mean), cash (% of equity, standard deviation)]``.

    ``bars_per_day``: ledger rows a session (1 on daily bars, 390 on minute bars), so the daily and
    yearly figures mean the same at any bar size (252 sessions a year).

    A pod whose forecast keeps its held-out IC can still lose its edge by concentrating and
    trading more as it fits the train years (BENCHMARKS.md "What the pods hold over a run").
    """
    weights = ledger.shares * ledger.close_usd / ledger.equity_usd[:, None]
    invested = weights.sum(axis=1)
    names = invested**2 / np.maximum((weights**2).sum(axis=1), 1e-12)
    equity = ledger.equity_usd
    active = equity[1:] / equity[:-1] - equal_weight.equity_usd[1:] / equal_weight.equity_usd[:-1]
    bars_a_year = 252 * bars_per_day
    cash = ledger.cash_usd / equity
    return [
        round(float(np.median(names[1:])), 1),
        round(float(np.median(weights[1:].max(axis=1))), 3),
        round(100.0 * bars_per_day * float((ledger.traded_usd[1:] / equity[:-1]).mean()), 1),
        round(1e4 * bars_a_year * float((ledger.cost_usd[1:] / equity[:-1]).mean())),
        round(bars_a_year * float(active.mean()), 3),
        round(float(active.std() * np.sqrt(bars_a_year)), 3),
        round(100.0 * float(cash[1:].mean()), 1),
        round(100.0 * float(cash[1:].std()), 1),
    ]


class TargetRecorder:
    """A policy that keeps the target weights it returns, bar by bar, for the IC of the rows a pass
    actually trades from (its own holdings in the observation; a wrapped policy steps bar by bar)."""

    def __init__(self, policy: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.policy = policy
        self.targets: list[torch.Tensor] = []

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        action = self.policy(obs)
        self.targets.append(action.detach().cpu())
        return action

    def ic(self, panel: Any, segment: str) -> float:
        """The score IC of the recorded targets (one a bar from the segment's first) against the next
        bar's log return; NaN when the pass did not call the policy once a bar."""
        start, stop = panel.segment(segment)
        if len(self.targets) != stop - 1 - start:
            return math.nan
        return target_weights_ic(torch.cat(self.targets), panel, segment)


def log_scores(policy: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """The per-asset scores of a softmax book: its asset weights' logs (cash, first, dropped)."""

    def scores(obs: torch.Tensor) -> torch.Tensor:
        return policy(obs)[:, 1:].clamp_min(torch.finfo(torch.float32).tiny).log()

    return scores


def tempered(
    policy: Callable[[torch.Tensor], torch.Tensor], exponent: float
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``policy`` with its target weights (a softmax of scores, cash first) raised to ``exponent``
    and renormalised: the softmax of its scores times ``exponent`` (below 1: a flatter book)."""

    def act(obs: torch.Tensor) -> torch.Tensor:
        powered = policy(obs).clamp_min(1e-30) ** exponent
        return powered / powered.sum(dim=-1, keepdim=True)

    return act


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=sorted(skill_bench.CASES))
    parser.add_argument("--seed", type=int, default=100, help="market and agent seed (tuning seeds: 100+)")
    parser.add_argument("--env-steps", type=int, default=40_960, help="env steps to train")
    parser.add_argument("--every", type=int, default=20, help="probe every this many rounds")
    parser.add_argument("--set", action="append", default=[], help="section.key=value, as finpod's --set")
    parser.add_argument(
        "--family",
        action="append",
        default=[],
        choices=["train", "validation"],
        help="also trade the policy's scores (log target weights) through the oracle's tilt family, its "
        "member fitted on this segment (finpod.tilt.fit_tilt); its member, share and book follow the "
        "row (repeatable)",
    )
    parser.add_argument(
        "--temper",
        type=float,
        action="append",
        default=[],
        help="also trade the policy tempered to this exponent (weights w**a renormalised: its scores "
        "times a) on the held-out years; its share and book follow the row (repeatable)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    case, problem = skill_bench.probe_problem(args.case, args.seed, args.set)
    spec, selection, device = problem.spec, problem.selection, problem.device
    config = problem.eval_config
    oracle, equal = problem.oracle_sharpe, problem.equal_weight_sharpe
    equal_validation = validation_score(selection, config, equal_weight_policy(case.n_symbols), device)
    agent = problem.context.agent_factory(spec.agent_config(), args.seed)
    env = problem.context.train_env(selection, args.seed)
    equal_ledger = run_policy(problem.full, "backtest", config, equal_weight_policy(case.n_symbols), device)
    assert problem.oracle_policy is not None
    oracle_ledger = run_policy(problem.full, "backtest", config, problem.oracle_policy, device)
    bars_per_day = FULL_SESSION_MINUTES if problem.full.frequency == "1min" else 1
    oracle_book = book_shape(oracle_ledger, equal_ledger, bars_per_day)
    print("oracle", *oracle_book, flush=True)
    score_ic = held_out_ics(problem, agent)
    validation_ic = held_out_ics(problem, agent, "validation")
    train_seconds, rounds = 0.0, 0
    probes: list[list[Any]] = []
    while agent.env_steps < args.env_steps:
        start = time.perf_counter()
        agent.train_round(env)
        train_seconds += time.perf_counter() - start
        rounds += 1
        if rounds % args.every == 0 or agent.env_steps >= args.env_steps:
            policy = deterministic_policy(agent)
            validation = validation_score(selection, config, policy, device) - equal_validation
            recorder = TargetRecorder(policy)
            ledger = run_policy(problem.full, "backtest", config, recorder, device)
            traded = ledger_to_result("policy", "trader", problem.full, ledger, config.initial_cash_usd)
            share = share_captured(returns_sharpe(traded.returns), oracle, equal)
            ics = [round(value, 4) for value in (*score_ic(), *validation_ic())]
            in_use = recorder.ic(problem.full, "backtest")
            probes.append(
                [
                    agent.env_steps,
                    round(train_seconds, 1),
                    round(validation, 2),
                    round(share, 2),
                    *ics,
                    *book_shape(ledger, equal_ledger, bars_per_day),
                    round(in_use, 4),
                ]
            )
            for segment in args.family:
                scores = log_scores(policy)
                fit = fit_tilt(selection, segment, config, scores, device)
                member = tilt_policy(selection, scores, fit.params)
                ledger = run_policy(problem.full, "backtest", config, member, device)
                traded = ledger_to_result("policy", "trader", problem.full, ledger, config.initial_cash_usd)
                share = share_captured(returns_sharpe(traded.returns), oracle, equal)
                params = fit.params
                member_row = [params.tilt, params.top_fraction, round(params.band * case.n_symbols, 2)]
                book = book_shape(ledger, equal_ledger, bars_per_day)
                probes[-1] += ["|", segment, *member_row, round(fit.sharpe, 2), round(share, 2), *book]
            for exponent in args.temper:
                flatter = tempered(policy, exponent)
                validation = validation_score(selection, config, flatter, device) - equal_validation
                ledger = run_policy(problem.full, "backtest", config, flatter, device)
                traded = ledger_to_result("policy", "trader", problem.full, ledger, config.initial_cash_usd)
                share = share_captured(returns_sharpe(traded.returns), oracle, equal)
                book = book_shape(ledger, equal_ledger, bars_per_day)
                probes[-1] += ["|", exponent, round(validation, 2), round(share, 2), *book]
            print(*probes[-1], flush=True)
    summary = {
        "case": args.case,
        "seed": args.seed,
        "set": args.set,
        "oracle_edge": oracle - equal,
        "oracle_book": oracle_book,
    }
    print(json.dumps({**summary, "probes": probes}))


if __name__ == "__main__":
    main()
