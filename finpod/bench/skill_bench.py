"""``finpod bench skill``: do trained traders find a planted edge? Scored on held-out bars, over seeds.

Each case is a synthetic market with a planted signal of known strength (:mod:`finpod.data.synth`;
the drift alpha is off, so the planted signal is the only edge) split into train, validation and a
held-out backtest segment. Per seed (market seed = agent seed = tournament seed), every contender
trains on the train segment with the same env-step budget and is selected on validation only:

* ``tournament``: the podracer tournament of the spec (pool of :data:`POOL_SIZE`, its schedule),
  scored as its best leaderboard entry (``best``) and its top-k ensemble (``ensemble``);
* ``single``: one pod with the whole budget, its best validation checkpoint kept;
* ``best_of_4``: :data:`POOL_SIZE` independent pods with a quarter of the budget each, the best on
  validation kept;

each from the bench's hyper-parameters (``good``: :data:`GOOD_AGENT`) and from a deliberately poor
set (``poor``: learning rate x10 and gamma 0.9). The tournament searches :data:`SEARCH_SPACE` (its
``perturb_bounds``, which hold both starts) with resampling (:data:`RESAMPLE_PROB`); the other
contenders keep their start's hyper-parameters. The oracle (:mod:`finpod.oracle`) and equal weight
run through the same env on the same held-out bars; a trader's *share* of the oracle's edge is
``(trader - EW) / (oracle - EW)`` in annualised Sharpe. Everything runs on the CPU with one thread
unless ``threads`` says otherwise; nothing here reads a GPU.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

import pandas as pd
import torch

from finpod.bench.skill_names import CONTENDERS, HYPER_SETS
from finpod.data.panel import Panel
from finpod.data.signals import SignalSpec
from finpod.data.synth import symbol_names, synth_market
from finpod.env.config import EnvConfig
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError
from finpod.oracle import equal_weight_policy, oracle_policy, returns_sharpe, segment_returns, share_captured
from finpod.pipeline.inputs import backtest_panel, selection_panel
from finpod.pipeline.main import select, tournament_config
from finpod.pipeline.training import (
    TRAIN_SEGMENT,
    agent_factory,
    base_agent_config,
    deterministic_policy,
    env_config,
    validation_score,
)
from finpod.report.verdict import judge
from finpod.spec import Spec
from podracer import Policy, Tournament
from podracer.ppo import PPOAgent, PPOConfig

POOL_SIZE: Final[int] = 4
EVAL_EVERY_ROUNDS: Final[int] = 2
"""Training rounds between validation scores (2 x 8 steps x 32 envs = 512 env steps): 128 scores per
contender, so the tournament can judge, exploit and explore 100+ times within the budget."""
RESAMPLE_PROB: Final[float] = 0.25
"""The tournament's per-field resampling probability (Ray Tune's PBT default)."""
SEARCH_SPACE: Final[dict[str, list[float]]] = {"learning_rate": [1e-4, 3e-2], "gamma": [0.0, 0.99]}
"""The tournament's ``perturb_bounds``: the space a user would state for a daily portfolio problem
(learning rates of Adam that train at all; horizons from one bar to about 100). Both the good and
the poor start lie inside it; it says nothing about where in it the good values are."""
GOOD_AGENT: Final[dict[str, Any]] = {
    "policy": "cross_sectional",
    "rollout_steps": 8,
    "learning_rate": 3e-3,
    "gamma": 0.0,
    "gae_lambda": 0.95,
    "hidden_sizes": [64, 64],
    "update_epochs": 4,
    "num_minibatches": 4,
    "entropy_coef": 0.0,
}
"""The bench's PPO, tuned by hand on seed 1 of daily20 (so seed 1's numbers are in-sample for these
settings; seeds 0, 2, 3, 4 are not): short rollouts (many small updates), a high learning rate, and
gamma 0 for an edge that pays at the next bar (a step's fee is charged in that step's reward)."""
POOR_CHANGES: Final[dict[str, Any]] = {"learning_rate": 3e-2, "gamma": 0.9}
"""The deliberately poor start: learning rate 10x too high, gamma 0.9 (10-step horizon, 1-step edge)."""
DAILY_SEGMENTS: Final[dict[str, list[str]]] = {
    "train": ["2016-01-04", "2018-06-29"],
    "validation": ["2018-07-02", "2019-06-28"],
    "backtest": ["2019-07-01", "2020-12-31"],
}
"""2.5 years to train on, one year to select on, 1.5 years held out. A half-year validation segment
(126 sessions: a Sharpe ratio's standard error is about 1.4) let selection pick a lucky immature
snapshot over a mature one; one year halves the variance."""
MINUTE_SEGMENTS: Final[dict[str, list[str]]] = {
    "train": ["2016-01-04", "2016-02-29"],
    "validation": ["2016-03-01", "2016-03-14"],
    "backtest": ["2016-03-15", "2016-04-29"],
}


@dataclass(frozen=True)
class SkillCase:
    """One market and budget of the bench.

    Attributes:
        name: the case's name on the command line.
        n_symbols: ``M``.
        frequency: ``"1d"`` or ``"1min"``.
        n_days: sessions generated (they must cover the segments).
        segments: train, validation and backtest date ranges.
        signal: the planted signal (kind and strength).
        budget_env_steps: env steps per contender (the tournament's total, the single pod's, the sum
            of the best-of-4 pods').
        fee_rate: proportional fee per trade (fraction of notional); half-spread is 1 bp.
        horizon_bars: training episode length (bars).
        num_envs: parallel training envs per pod.
    """

    name: str
    n_symbols: int
    frequency: Literal["1d", "1min"]
    n_days: int
    segments: Mapping[str, list[str]]
    signal: SignalSpec
    budget_env_steps: int
    fee_rate: float = 0.0005
    horizon_bars: int = 64
    num_envs: int = 32


REVERSAL: Final[SignalSpec] = SignalSpec("reversal", 0.2)
BUDGET: Final[int] = 65_536
"""Env steps per contender and seed: one pod from the good start saturates at 20-40k steps."""
CASES: Final[dict[str, SkillCase]] = {
    case.name: case
    for case in (
        SkillCase("daily20", 20, "1d", 1260, DAILY_SEGMENTS, REVERSAL, BUDGET),
        SkillCase("daily100", 100, "1d", 1260, DAILY_SEGMENTS, REVERSAL, BUDGET),
        SkillCase("daily20-none", 20, "1d", 1260, DAILY_SEGMENTS, SignalSpec(), BUDGET),
        SkillCase(
            "minute20", 20, "1min", 84, MINUTE_SEGMENTS, REVERSAL, 61_440, fee_rate=0.0, horizon_bars=390
        ),
    )
}
"""The bench's cases. Daily: 3 years train, half a year validation, 1.5 years held out. Minute: two
months train, two weeks validation, about six weeks held out, no fee (a one-minute edge cannot pay
5 bp a trade)."""


@dataclass(frozen=True)
class ContenderResult:
    """One contender on one seed: held-out Sharpe of its traders and what it cost.

    Attributes:
        sharpe: trader name (``best``, and ``ensemble`` for the tournament) -> held-out Sharpe.
        share: trader name -> share of the oracle's held-out edge captured (NaN without an edge).
        dsr: trader name -> deflated Sharpe ratio of its held-out return over equal weight
            (:func:`finpod.report.verdict.judge`), every validation score the contender computed
            counting as a trial; NaN when undefined.
        num_trials: validation scores the contender computed (the DSR's trials).
        env_steps: env steps trained.
        seconds: wall seconds (training, validation and selection).
    """

    sharpe: dict[str, float]
    share: dict[str, float]
    dsr: dict[str, float]
    num_trials: int
    env_steps: int
    seconds: float


@dataclass(frozen=True)
class SeedResult:
    """One case on one seed.

    Attributes:
        case: case name.
        seed: market, agent and tournament seed.
        oracle_sharpe: held-out Sharpe of the oracle.
        equal_weight_sharpe: held-out Sharpe of equal weight (through the env).
        contenders: ``"<hyper set>/<contender>"`` -> result.
    """

    case: str
    seed: int
    oracle_sharpe: float
    equal_weight_sharpe: float
    contenders: dict[str, ContenderResult]


def bench_spec(case: SkillCase, seed: int, hyper: str) -> Spec:
    """The strategy spec of ``case`` for ``seed`` with the ``good`` or ``poor`` hyper-parameters."""
    agent = dict(GOOD_AGENT) if hyper == "good" else {**GOOD_AGENT, **POOR_CHANGES}
    return Spec.from_dict(
        {
            "name": f"skill-{case.name}",
            "seed": seed,
            "device": "cpu",
            "frequency": case.frequency,
            "benchmark_symbol": "",
            "data": {
                "source": "synthetic",
                "synthetic": {
                    "n_symbols": case.n_symbols,
                    "n_days": case.n_days,
                    "seed": seed,
                    "signal": case.signal.kind,
                    "signal_strength": case.signal.strength,
                    "alpha_annual": 0.0,
                },
            },
            "segments": dict(case.segments),
            "env": {
                "fee_rate": case.fee_rate,
                "half_spread_bps": 1.0,
                "reward": "excess_log_return",
                "horizon_bars": case.horizon_bars,
                "num_envs": case.num_envs,
            },
            "agent": agent,
            "tournament": {
                "pool_size": POOL_SIZE,
                "leaderboard_size": 2 * POOL_SIZE,
                "budget_env_steps": case.budget_env_steps,
                "budget_seconds": 1e9,
                "eval_every_rounds": EVAL_EVERY_ROUNDS,
                "ensemble_k": 3,
                "resample_prob": RESAMPLE_PROB,
                "perturb_bounds": SEARCH_SPACE,
            },
        }
    )


@dataclass(frozen=True)
class _Problem:
    """What every contender of one (case, seed, hyper set) shares."""

    spec: Spec
    selection: Panel
    full: Panel
    device: torch.device
    trials: list[float]
    """Every validation score computed for the contender (the deflated Sharpe ratio's trials)."""

    @property
    def eval_config(self) -> EnvConfig:
        return env_config(self.spec, random_start=False)

    def validate(self, policy: Policy) -> float:
        score = validation_score(self.selection, self.eval_config, policy, self.device)
        self.trials.append(score)
        return score

    def held_out(self, policy: Policy) -> pd.Series:
        return segment_returns(self.full, "backtest", self.eval_config, policy, self.device)


def _train_one(
    problem: _Problem, config: PPOConfig, seed: int, budget: int
) -> tuple[float, dict[str, Any], int]:
    """One pod alone for ``budget`` env steps; ``(best validation score, its state, env steps)``."""
    probe = TradingEnv(problem.selection, TRAIN_SEGMENT, env_config(problem.spec, random_start=True), 1, 0)
    agent = agent_factory(probe, problem.device)(config, seed)
    assert isinstance(agent, PPOAgent)
    env = TradingEnv(
        problem.selection,
        TRAIN_SEGMENT,
        env_config(problem.spec, random_start=True),
        problem.spec.env.num_envs,
        seed,
        problem.device,
    )
    best_score, best_state = -math.inf, agent.state_dict()
    rounds = 0
    while agent.env_steps < budget:
        agent.train_round(env)
        rounds += 1
        if rounds % problem.spec.tournament.eval_every_rounds == 0 or agent.env_steps >= budget:
            score = problem.validate(deterministic_policy(agent))
            if score > best_score:
                best_score, best_state = score, agent.state_dict()
    return best_score, best_state, agent.env_steps


def _restore(problem: _Problem, state: dict[str, Any]) -> Policy:
    probe = TradingEnv(problem.selection, TRAIN_SEGMENT, env_config(problem.spec, random_start=True), 1, 0)
    agent = agent_factory(probe, problem.device)(PPOConfig.from_dict(state["config"]), int(state["seed"]))
    assert isinstance(agent, PPOAgent)
    agent.load_state_dict(state)
    return deterministic_policy(agent)


def _run_single(problem: _Problem) -> tuple[dict[str, Policy], int]:
    config = base_agent_config(problem.spec)
    _, state, steps = _train_one(problem, config, problem.spec.seed, problem.spec.tournament.budget_env_steps)
    return {"best": _restore(problem, state)}, steps


def _run_best_of(problem: _Problem) -> tuple[dict[str, Policy], int]:
    config = base_agent_config(problem.spec)
    budget = problem.spec.tournament.budget_env_steps // POOL_SIZE
    runs = [_train_one(problem, config, problem.spec.seed * POOL_SIZE + i, budget) for i in range(POOL_SIZE)]
    _, state, _ = max(runs, key=lambda run: run[0])
    return {"best": _restore(problem, state)}, sum(run[2] for run in runs)


def _run_tournament(problem: _Problem) -> tuple[dict[str, Policy], int]:
    spec, device = problem.spec, problem.device
    train = env_config(spec, random_start=True)
    factory = agent_factory(TradingEnv(problem.selection, TRAIN_SEGMENT, train, 1, 0, device), device)

    def make_env(seed: int) -> TradingEnv:
        return TradingEnv(problem.selection, TRAIN_SEGMENT, train, spec.env.num_envs, seed, device)

    with tempfile.TemporaryDirectory(prefix="finpod-skill-") as scratch:
        tournament = Tournament(
            tournament_config(spec),
            Path(scratch),
            factory,
            base_agent_config(spec),
            make_env,
            problem.validate,
        )
        result = tournament.run()
        policies = select(spec, result.leaderboard, factory)
        steps = result.env_steps
    renamed = {("best" if name == "best" else "ensemble"): policy for name, policy in policies.items()}
    return renamed, steps


_RUNNERS: Final[dict[str, Callable[[_Problem], tuple[dict[str, Policy], int]]]] = {
    "tournament": _run_tournament,
    "single": _run_single,
    "best_of_4": _run_best_of,
}


def run_seed(
    case: SkillCase,
    seed: int,
    contenders: Iterable[str] = CONTENDERS,
    hyper_sets: Iterable[str] = HYPER_SETS,
    on_result: Callable[[str, ContenderResult], None] | None = None,
) -> SeedResult:
    """Every requested contender of ``case`` on ``seed`` (CPU), with the oracle and equal weight.

    Args:
        case: the market and budget.
        seed: market, agent and tournament seed.
        contenders: names from :data:`CONTENDERS`.
        hyper_sets: names from :data:`HYPER_SETS`.
        on_result: called with ``("<hyper>/<contender>", result)`` as each finishes (progress).
    """
    device = torch.device("cpu")
    base = bench_spec(case, seed, "good")
    bars = synth_market(
        case.n_symbols,
        case.n_days,
        case.frequency,
        seed,
        case.segments["train"][0],
        signal=case.signal,
        alpha_annual=0.0,
    )
    symbols = symbol_names(case.n_symbols)
    selection = selection_panel(base, bars, symbols, "cpu")
    full = backtest_panel(base, bars, symbols, "cpu")
    reference = _Problem(base, selection, full, device, [])
    oracle = returns_sharpe(reference.held_out(oracle_policy(full, case.signal)))
    equal_returns = reference.held_out(equal_weight_policy(case.n_symbols))
    equal = returns_sharpe(equal_returns)
    results: dict[str, ContenderResult] = {}
    for hyper in hyper_sets:
        for name in contenders:
            problem = replace(reference, spec=bench_spec(case, seed, hyper), trials=[])
            start = time.perf_counter()
            policies, steps = _RUNNERS[name](problem)
            held_out = {trader: problem.held_out(policy) for trader, policy in policies.items()}
            sharpe = {trader: returns_sharpe(returns) for trader, returns in held_out.items()}
            dsr = {
                trader: _nan_if_none(judge(trader, returns, equal_returns, problem.trials).dsr)
                for trader, returns in held_out.items()
            }
            result = ContenderResult(
                sharpe=sharpe,
                share={trader: share_captured(value, oracle, equal) for trader, value in sharpe.items()},
                dsr=dsr,
                num_trials=len(problem.trials),
                env_steps=steps,
                seconds=time.perf_counter() - start,
            )
            results[f"{hyper}/{name}"] = result
            if on_result is not None:
                on_result(f"{hyper}/{name}", result)
    return SeedResult(case.name, seed, oracle, equal, results)


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value


def check_choices(cases: list[str], contenders: list[str], hyper_sets: list[str], seeds: int) -> None:
    """One-line errors for unknown case, contender or hyper-set names and a seed count < 1."""
    for flag, given, known in (
        ("--case", cases, tuple(CASES)),
        ("--contender", contenders, CONTENDERS),
        ("--hyper", hyper_sets, HYPER_SETS),
    ):
        unknown = [name for name in given if name not in known]
        if unknown:
            raise SpecError(f"{flag} {unknown[0]!r}: pick from {', '.join(known)}")
    if seeds < 1:
        raise SpecError(f"--seeds must be >= 1, got {seeds}")


def _median(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else math.nan


def summarise(results: list[SeedResult]) -> dict[str, Any]:
    """Medians over seeds per case: oracle, equal weight; per contender: Sharpe, share, steps, seconds."""
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r.case for r in results):
        rows = [r for r in results if r.case == case]
        summary: dict[str, Any] = {
            "seeds": [r.seed for r in rows],
            "oracle_sharpe": _median([r.oracle_sharpe for r in rows]),
            "equal_weight_sharpe": _median([r.equal_weight_sharpe for r in rows]),
            "contenders": {},
        }
        for key in dict.fromkeys(k for r in rows for k in r.contenders):
            got = [r.contenders[key] for r in rows if key in r.contenders]
            traders = dict.fromkeys(t for c in got for t in c.sharpe)
            summary["contenders"][key] = {
                "sharpe": {t: _median([c.sharpe[t] for c in got if t in c.sharpe]) for t in traders},
                "share": {t: _median([c.share[t] for c in got if t in c.share]) for t in traders},
                "dsr": {t: _median([c.dsr[t] for c in got if t in c.dsr]) for t in traders},
                "dsr_max": {t: max((c.dsr[t] for c in got if t in c.dsr), default=math.nan) for t in traders},
                "share_min_max": {
                    t: [
                        min(c.share[t] for c in got if t in c.share),
                        max(c.share[t] for c in got if t in c.share),
                    ]
                    for t in traders
                },
                "env_steps": _median([float(c.env_steps) for c in got]),
                "seconds": _median([c.seconds for c in got]),
            }
        out[case] = summary
    return out


def as_json(results: list[SeedResult]) -> dict[str, Any]:
    """Per-seed results and per-case medians as plain JSON values."""
    return {"seeds": [asdict(r) for r in results], "medians": summarise(results)}
