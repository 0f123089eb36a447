"""``finpod bench skill``: do trained traders find a planted edge? Scored on held-out bars, over seeds.

Each case is a synthetic market with a planted signal of a stated kind and information coefficient
(:mod:`finpod.data.signals`; the drift alpha is off, so the planted signal is the only edge) split
into train, validation and a held-out backtest segment (case names: :mod:`finpod.bench.skill_names`).
Per seed (market seed = agent seed = tournament seed), every contender trains on the train segment
with the same env-step budget and is selected on validation only:

* ``tournament``: the podracer tournament of the spec (its pool, schedule and search space), scored
  as its best leaderboard entry (``best``), its top-k ensemble (``ensemble``) and its trajectory
  ensemble (``trajectory``: the average of the archived snapshots, by default the run's 32
  best-validated judged rounds; ``--set tournament.archive_size=0`` keeps none);
* ``single``: one pod with the whole budget, its best validation checkpoint kept;
* ``best_of_4``: :data:`POOL_SIZE` independent pods with a quarter of the budget each, the best on
  validation kept;

each from a hyper-parameter set: ``good`` (:data:`GOOD_AGENT`, the bench's PPO, tuned by hand on
seed 1 of the old reversal-0.2 case), ``poor`` (learning rate x10 and gamma 0.9) or ``defaults``
(finpod's own: the spec says nothing about ``[agent]`` and the tournament but the budget, as a user's
silent spec). ``overrides`` (``finpod bench skill --set section.key=value``) apply to every spec, so
the bench reruns with other training settings without code changes.

References, all through the same env on the same held-out bars: equal weight; the **oracle**
(:func:`finpod.oracle.fit_oracle`: the true predictor traded by the tilt/top-k/band family fitted on
train, a ceiling for that family); the **linear baseline** (:mod:`finpod.linear_baseline`: ridge on
the per-asset features, train rows only). A trader's *share* of the oracle's edge is
``(trader - EW) / (oracle - EW)`` in annualised Sharpe. Each contender also records a learning
curve: whenever its best validation score so far improves, the held-out share of that policy
(what selection would pick if training stopped there) against the env steps so far (validation
scores x env steps per score) and the wall seconds so far (the curve's own held-out passes are
not counted). Everything runs on the CPU with one thread unless ``threads`` says otherwise.

With ``snapshots`` (``finpod bench skill --snapshots``) every policy a contender validated is kept
and, after the contender has finished (outside its clock), traded on the held-out bars too: its
``snapshots`` rows show how the held-out skill of what the pods hold moves over the run, and what
any selection rule would have picked (BENCHMARKS.md "What the pods hold over a run").
"""

from __future__ import annotations

import functools
import math
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import pandas as pd
import torch

from finpod.backtest.result import TraderResult
from finpod.bench.skill_names import (
    CONTENDERS,
    DAILY_KINDS,
    DAILY_SIZES,
    DAILY_STRENGTHS,
    FEES_BPS,
    HYPER_SETS,
    MINUTE_CASE,
    SMOKE_STRENGTH,
    daily_case_name,
    smoke_case_name,
)
from finpod.data.panel import Panel
from finpod.data.signals import SignalSpec
from finpod.data.synth import symbol_names, synth_market
from finpod.env.config import EnvConfig
from finpod.env.market import session_progress
from finpod.env.observation import all_cash_rows
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError
from finpod.linear_baseline import fit_linear_trader
from finpod.oracle import (
    cost_drag,
    equal_weight_policy,
    fit_oracle,
    returns_sharpe,
    segment_result,
    segment_returns,
    share_captured,
)
from finpod.pipeline.backend import pod_backend
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import backtest_panel, selection_panel
from finpod.pipeline.main import TRAJECTORY_PREFIX, select
from finpod.pipeline.training import ValidationScore, deterministic_policy
from finpod.report.verdict import (
    SESSIONS_PER_YEAR,
    gate_pick,
    judge,
    sharpe_difference_variance,
    shrunk_sharpe,
)
from finpod.spec import Spec
from finpod.spec.overrides import apply_overrides
from podracer.api import (
    Policy,
    PPOAgent,
    PPOConfig,
    Tournament,
    TournamentConfig,
    TournamentEvent,
    budget_fraction,
)

POOL_SIZE: Final[int] = 4
PICK: Final[str] = "pick"
"""The held-out figures of a run's pick (:func:`finpod.report.verdict.pick_verdict`): ``best``'s
when its validation Sharpe beat equal weight's, else equal weight's."""
PICK_TRAJECTORY: Final[str] = "pick_trajectory"
"""A measurement, not a trader a run deploys: the trajectory ensemble when its own validation
Sharpe beat equal weight's (the pick's gate), else equal weight (BENCHMARKS.md "The pick, deflated
or not, on the reported seeds": a candidate for the run's pick)."""
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
    "pathwise_coef": 0.0,
    "critic_features": "own",
}
"""The bench's PPO, tuned by hand on seed 1 of daily20 (so seed 1's numbers are in-sample for these
settings; seeds 0, 2, 3, 4 are not): short rollouts (many small updates), a high learning rate, and
gamma 0 for an edge that pays at the next bar (a step's fee is charged in that step's reward); PPO's
score-function gradients alone (no pathwise term: finpod's defaults, ``--hyper defaults``, have it) and
the critic's own encoder, as when it was tuned."""
POOR_CHANGES: Final[dict[str, Any]] = {"learning_rate": 3e-2, "gamma": 0.9}
"""The deliberately poor start: learning rate 10x too high, gamma 0.9 (10-step horizon, 1-step edge)."""
DAILY_SEGMENTS: Final[dict[str, list[str]]] = {
    "train": ["2011-01-03", "2016-12-30"],
    "validation": ["2017-01-03", "2017-12-29"],
    "backtest": ["2018-01-02", "2020-12-31"],
}
"""Six years to train on, one year to select on, three years held out. At realistic strengths the
oracle's held-out edge over equal weight is a fraction of a Sharpe point, while a Sharpe ratio
measured over 1.5 years has a standard error of about 0.8: shares over 1.5 held-out years were
noise (measured 2026-11-25, BENCHMARKS.md "Skill you can trust"); three years cut the error by
sqrt(2), six train years give the oracle's and the ridge's fits twice the rows. A half-year
validation segment let selection pick lucky immature snapshots; one year halves that variance."""
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
        signal: the planted signal (kind and information coefficient).
        budget_env_steps: env steps per contender (the tournament's total, the single pod's, the sum
            of the best-of-4 pods').
        fee_rate: proportional fee per trade (fraction of notional); half-spread is 1 bp.
        horizon_bars: training episode length (bars).
        num_envs: parallel training envs per pod.
        rebalance_band: the env's no-trade band (fraction of equity) for every trader and reference.
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
    rebalance_band: float = 0.0


BUDGET: Final[int] = 65_536
"""Env steps per contender and seed (override with ``--set tournament.budget_env_steps=N``)."""
DAILY_DAYS: Final[int] = 2517
"""XNAS sessions from 2011-01-03 to 2020-12-31."""
BPS: Final[float] = 1e-4
"""One basis point as a fraction."""
MINUTE_FEE_RATE: Final[float] = 0.002
"""The reference fee, 0.2 % of traded notional."""
MINUTE_BAND: Final[float] = 0.01
"""The minute case's rebalance band: 1 % of equity (a fifth of an equal weight at M = 20)."""
MINUTE_STRENGTH: Final[float] = 0.02
SMOKE_SIGNAL: Final[SignalSpec] = SignalSpec("reversal", SMOKE_STRENGTH)
"""The demo's strong one-bar reversal: a smoke test, about ten times a real effect."""
MINUTE_BUDGET: Final[int] = 61_440


def _daily_cases() -> list[SkillCase]:
    cases = []
    for size in DAILY_SIZES:
        for fee in FEES_BPS:
            for kind in (*DAILY_KINDS, "none"):
                for strength in DAILY_STRENGTHS if kind != "none" else (0.0,):
                    signal = SignalSpec(kind, strength)  # type: ignore[arg-type]
                    name = daily_case_name(size, kind, strength, fee)
                    cases.append(
                        SkillCase(name, size, "1d", DAILY_DAYS, DAILY_SEGMENTS, signal, BUDGET, fee * BPS)
                    )
    return cases


CASES: Final[dict[str, SkillCase]] = {
    case.name: case
    for case in (
        *_daily_cases(),
        *(
            SkillCase(
                smoke_case_name(size),
                size,
                "1d",
                DAILY_DAYS,
                DAILY_SEGMENTS,
                SignalSpec("reversal", SMOKE_STRENGTH),
                BUDGET,
            )
            for size in DAILY_SIZES
        ),
        SkillCase(
            MINUTE_CASE,
            20,
            "1min",
            84,
            MINUTE_SEGMENTS,
            SignalSpec("reversal", MINUTE_STRENGTH),
            MINUTE_BUDGET,
            fee_rate=MINUTE_FEE_RATE,
            horizon_bars=390,
            rebalance_band=MINUTE_BAND,
        ),
    )
}
"""The bench's cases. Daily: 6 years train, one year validation, 3 years held out; kinds x
information coefficients x fees x sizes, null cases and the smoke cases. Minute: two months train,
two weeks validation, about six weeks held out, the reference 0.2 % fee and a 1 % band."""


@dataclass(frozen=True)
class ContenderResult:
    """One contender on one seed: held-out Sharpe of its traders and what it cost.

    Attributes:
        sharpe: trader name (``best``, its :data:`PICK` (``best`` or equal weight), and
            ``ensemble``, ``trajectory`` and :data:`PICK_TRAJECTORY` for the tournament) -> held-out
            Sharpe.
        share: trader name -> share of the oracle's held-out edge captured (NaN without an edge).
        dsr: trader name -> deflated Sharpe ratio of its held-out return over equal weight
            (:func:`finpod.report.verdict.judge`), every validation score the contender computed
            counting as a trial; NaN when undefined.
        num_trials: validation scores the contender computed (the DSR's trials).
        env_steps: env steps trained.
        seconds: wall seconds (training, validation and selection; the curve's passes excluded).
        curve: ``[env_steps, seconds, held-out share, held-out Sharpe - equal weight's]`` of the
            best-on-validation policy each time the contender's best validation score improved (see
            the module docstring; the share is NaN on a market without an edge).
        snapshots: with ``snapshots``, one row per validated policy, in the order scored: ``[trial,
            seconds, validation score, pod (``pod<id>`` in a tournament, else the thread that trained
            it), held-out share, validation score IC, held-out score IC, ...]``
            (:meth:`_Problem.snapshot_rows` names every column).
        pick: ``best``'s validation edge over equal weight and the pick it gives
            (:meth:`~finpod.report.verdict.PickVerdict.to_json`; empty without a ``best``).
        cost_pct_year: trader name -> held-out fees plus slippage, % of equity a year
            (:func:`~finpod.oracle.cost_drag`).
        gross_sharpe: trader name -> held-out Sharpe before costs (each session's cost added back):
            beside :attr:`SeedResult.equal_weight_gross_sharpe`, whether a trader trailing equal
            weight lost to its fees or to its positions.
    """

    sharpe: dict[str, float]
    share: dict[str, float]
    dsr: dict[str, float]
    num_trials: int
    env_steps: int
    seconds: float
    curve: list[list[float]] = field(default_factory=list)
    snapshots: list[list[Any]] = field(default_factory=list)
    pick: dict[str, Any] = field(default_factory=dict)
    cost_pct_year: dict[str, float] = field(default_factory=dict)
    gross_sharpe: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SeedResult:
    """One case on one seed.

    Attributes:
        case: case name.
        seed: market, agent and tournament seed.
        oracle_sharpe: held-out Sharpe of the oracle.
        equal_weight_sharpe: held-out Sharpe of equal weight (through the env).
        contenders: ``"<hyper set>/<contender>"`` -> result.
        linear_sharpe: held-out Sharpe of the linear baseline.
        linear_share: its share of the oracle's edge.
        oracle: the oracle's family and parameters fitted on train (:meth:`OracleFit.to_json`).
        linear: the linear baseline's fit (:meth:`LinearTrader.to_json`).
        oracle_edge_se: standard error of the oracle's held-out Sharpe minus equal weight's (paired
            daily returns: :func:`~finpod.report.verdict.sharpe_difference_variance`); a share is
            a ratio to that edge, so it says little on a seed where the edge is within noise.
        equal_weight_cost_pct_year: equal weight's held-out costs, % of equity a year.
        equal_weight_gross_sharpe: equal weight's held-out Sharpe before costs.
    """

    case: str
    seed: int
    oracle_sharpe: float
    equal_weight_sharpe: float
    contenders: dict[str, ContenderResult]
    linear_sharpe: float = math.nan
    linear_share: float = math.nan
    oracle: dict[str, Any] = field(default_factory=dict)
    linear: dict[str, Any] = field(default_factory=dict)
    oracle_edge_se: float = math.nan
    equal_weight_cost_pct_year: float = math.nan
    equal_weight_gross_sharpe: float = math.nan

    @property
    def oracle_edge_z(self) -> float:
        """The oracle's held-out edge over equal weight in standard errors (NaN when undefined)."""
        edge = self.oracle_sharpe - self.equal_weight_sharpe
        return edge / self.oracle_edge_se if self.oracle_edge_se > 0.0 else math.nan

    @property
    def informative(self) -> bool:
        """Whether the oracle's held-out edge is at least :data:`INFORMATIVE_EDGE_Z` standard errors."""
        return self.oracle_edge_z >= INFORMATIVE_EDGE_Z


def bench_spec(case: SkillCase, seed: int, hyper: str, overrides: Sequence[str] = ()) -> Spec:
    """The strategy spec of ``case`` for ``seed`` with the ``good``, ``poor`` or ``defaults`` settings.

    ``defaults`` leaves ``[agent]`` empty and sets only the tournament's env-step budget (finpod's
    defaults for everything else, as a silent spec gets); ``overrides`` are ``--set`` assignments
    (``section.key=value``) applied last, whatever the set.
    """
    agent = dict(GOOD_AGENT) if hyper == "good" else {**GOOD_AGENT, **POOR_CHANGES}
    tournament: dict[str, Any] = {
        "pool_size": POOL_SIZE,
        "leaderboard_size": 2 * POOL_SIZE,
        "budget_env_steps": case.budget_env_steps,
        "budget_seconds": 1e9,
        "eval_every_rounds": EVAL_EVERY_ROUNDS,
        "ensemble_k": 3,
        "resample_prob": RESAMPLE_PROB,
        "perturb_bounds": SEARCH_SPACE,
    }
    if hyper == "defaults":
        agent, tournament = {}, {"budget_env_steps": case.budget_env_steps}
    spec = Spec.from_dict(
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
                "rebalance_band": case.rebalance_band,
            },
            "agent": agent,
            "tournament": tournament,
        }
    )
    return apply_overrides(spec, overrides)


class ExcludedTime:
    """Wall seconds during which at least one excluded pass ran: the union of their intervals.

    Pods validate in their own threads, so two held-out passes of the curve can overlap; summing
    their lengths would leave more time out of the contender's clock (and its tournament's wall
    budget) than passed. Each pass calls :meth:`begin` and :meth:`end`; a period ends when the last
    overlapping pass does, and its length is added once (and told to ``on_period``, if set).
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._period_start = 0.0
        self.seconds = 0.0
        """Excluded wall seconds so far (periods that have ended)."""
        self.on_period: Callable[[float], None] | None = None

    def so_far(self) -> float:
        """Excluded wall seconds up to now, the running period's part included."""
        with self._lock:
            running = self._clock() - self._period_start if self._running > 0 else 0.0
            return self.seconds + running

    def begin(self) -> None:
        """A pass starts."""
        with self._lock:
            if self._running == 0:
                self._period_start = self._clock()
            self._running += 1

    def end(self) -> None:
        """A pass ends; the period's length is counted when no other pass is still running."""
        with self._lock:
            self._running -= 1
            if self._running > 0:
                return
            spent = self._clock() - self._period_start
            self.seconds += spent
            on_period = self.on_period
        if on_period is not None:
            on_period(spent)


def cross_sectional_ic(prediction: torch.Tensor, outcome: torch.Tensor) -> float:
    """The mean over bars of the cross-sectional (Pearson) correlation of ``(T, M)`` predictions
    and outcomes; a bar whose predictions are flat counts 0."""
    p = prediction - prediction.mean(dim=1, keepdim=True)
    q = outcome - outcome.mean(dim=1, keepdim=True)
    return float(((p * q).sum(1) / (p.norm(dim=1) * q.norm(dim=1) + 1e-12)).mean())


def target_weights_ic(targets: torch.Tensor, panel: Panel, segment: str) -> float:
    """:func:`cross_sectional_ic` of target weights ``(T - 1, A)`` (the assets last), one row per bar
    of ``segment`` but its last, as log weights, against the next bar's log return; weights below
    float32's smallest normal (exact zeros of a top-k book) tie at its log."""
    start, stop = panel.segment(segment)
    weights = targets.detach().cpu().double()[:, -panel.num_assets :]
    log_close = panel.close[start:stop].cpu().double().log()
    floor = torch.finfo(torch.float32).tiny
    return cross_sectional_ic(weights.clamp_min(floor).log(), log_close[1:] - log_close[:-1])


@dataclass
class _Problem:
    """What every contender of one (case, seed, hyper set) shares, and its learning curve."""

    spec: Spec
    selection: Panel
    full: Panel
    device: torch.device
    oracle_sharpe: float
    equal_weight_sharpe: float
    trials: list[float] = field(default_factory=list)
    """Every validation score computed for the contender (the deflated Sharpe ratio's trials)."""
    curve: list[list[float]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    excluded: ExcludedTime = field(default_factory=ExcludedTime)
    """Wall seconds of the curve's held-out passes (not the contender's work); its ``on_period`` is
    told each period's seconds (a tournament leaves them out of its wall budget)."""
    _trials_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    keep_snapshots: bool = False
    """Keep every validated policy (:meth:`snapshot_rows` trades them on the held-out bars)."""
    validated: list[tuple[int, float, float, str, Policy]] = field(default_factory=list, repr=False)
    """``(trial, seconds, validation score, pod, policy)`` of each validated policy (``keep_snapshots``)."""
    best_ranked: float = -math.inf
    """The best validation score among the trials a leaderboard could rank (the curve's last pick)."""
    oracle_policy: Policy | None = field(default=None, repr=False)
    """The oracle fitted on train (:func:`probe_problem` keeps it, for the probes to trade)."""
    context: RunContext = field(init=False)
    """The contender's env settings, sizes and agent factory (on the selection panel)."""

    def __post_init__(self) -> None:
        self.context = RunContext.of(self.spec, self.selection, self.device)

    @property
    def eval_config(self) -> EnvConfig:
        return self.context.eval_config

    @functools.cached_property
    def tournament_config(self) -> TournamentConfig:
        """The spec's tournament settings (its budgets, on the selection panel's train bars, and
        leaderboard window)."""
        start, stop = self.selection.segment("train")
        return self.spec.tournament_config(train_bars=stop - start)

    @property
    def env_step_budget(self) -> int:
        """Env steps per contender: the spec's budget on the selection panel's train bars."""
        start, stop = self.selection.segment("train")
        return self.spec.env_step_budget(stop - start)

    @property
    def steps_per_score(self) -> int:
        """Env steps one pod trains between two validation scores."""
        agent = self.spec.agent_config()
        return agent.rollout_steps * self.spec.env.num_envs * self.spec.tournament.eval_every_rounds

    @property
    def seconds(self) -> float:
        """Wall seconds since the contender started, the curve's passes excluded."""
        return time.perf_counter() - self.started - self.excluded.so_far()

    def validate(self, policy: Policy) -> float:
        """The validation score a run of the spec gives ``policy`` (its chunks and warm-up, as
        ``finpod run`` scores), recorded as a trial (:meth:`record`)."""
        score = self.validation_score()(policy)
        self.record(score, threading.current_thread().name, lambda: policy)
        return score

    def validation_score(self) -> ValidationScore:
        """The tournament's ``evaluate``, as ``finpod run`` builds it (picklable: it runs where the
        pods train)."""
        tournament = self.spec.tournament
        return ValidationScore(
            self.selection,
            self.eval_config,
            self.device,
            chunks=tournament.validation_chunks,
            warmup_bars=tournament.validation_warmup_bars,
        )

    def record(self, score: float, pod: str, policy: Callable[[], Policy]) -> None:
        """Count a validation ``score`` of ``pod``'s policy as a trial; keep the policy (``policy()``,
        frozen) with ``keep_snapshots``, and add the curve's held-out pass when it is the best score
        a leaderboard could rank so far."""
        tournament = self.spec.tournament
        policy = functools.cache(policy)  # frozen once, if at all
        with self._trials_lock:
            self.trials.append(score)
            if self.keep_snapshots:
                self.validated.append((len(self.trials), self.seconds, score, pod, policy()))
            steps = float(len(self.trials) * self.steps_per_score)
            # What selection would pick: a tournament ranks no snapshot before leaderboard_after.
            fraction = budget_fraction(self.tournament_config, int(steps), self.seconds)
            improved = fraction >= tournament.leaderboard_after and score > self.best_ranked
            if improved:
                self.best_ranked = score
                self.excluded.begin()
        if improved:
            try:
                seconds = self.seconds
                sharpe = returns_sharpe(self.held_out(policy()))
                share = share_captured(sharpe, self.oracle_sharpe, self.equal_weight_sharpe)
                with self._trials_lock:
                    self.curve.append([steps, seconds, share, sharpe - self.equal_weight_sharpe])
            finally:
                self.excluded.end()

    def snapshot_rows(self) -> list[list[Any]]:
        """``[trial, seconds, validation score, pod, held-out share, validation IC, held-out IC,
        validation Sharpe, shrunk validation Sharpe, validation tracking error, equal weight's
        validation Sharpe, variance of the validation Sharpe difference, held-out Sharpe minus
        equal weight's]`` of every kept policy (then dropped; the ICs: :meth:`score_ic`; columns 7
        to 11 from one continuous validation pass against equal weight's: the shrunk Sharpe
        :func:`~finpod.report.verdict.shrunk_sharpe` at :data:`SNAPSHOT_PRIOR_EDGE_SHARPE`, the
        tracking error annualised, the variance
        :func:`~finpod.report.verdict.sharpe_difference_variance`, so ``scripts/pick_rules.py``
        can replay other pick rules); run after the contender, so its passes cost it no time."""
        rows = []
        equal = self.validation_returns(equal_weight_policy(self.full.num_assets)) if self.validated else None
        for trial, seconds, score, pod, policy in self.validated:
            sharpe = returns_sharpe(self.held_out(policy))
            share = share_captured(sharpe, self.oracle_sharpe, self.equal_weight_sharpe)
            ics = [self.score_ic(policy, segment) for segment in ("validation", "backtest")]
            validation = self.validation_returns(policy)
            assert equal is not None
            edge = [
                returns_sharpe(pd.Series(validation)),
                shrunk_sharpe(validation, equal, SNAPSHOT_PRIOR_EDGE_SHARPE),
                float(np.std(validation - equal, ddof=1) * math.sqrt(SESSIONS_PER_YEAR)),
                returns_sharpe(pd.Series(equal)),
                sharpe_difference_variance(validation, equal),
                sharpe - self.equal_weight_sharpe,
            ]
            rows.append([trial, round(seconds, 3), score, pod, share, *ics, *edge])
        self.validated.clear()
        return rows

    def validation_returns(self, policy: Policy) -> np.ndarray:
        """Daily returns ``(n,)`` of ``policy`` over the validation segment: one continuous pass."""
        returns = segment_returns(self.full, "validation", self.eval_config, policy, self.device)
        return returns.to_numpy(dtype=float)

    def score_ic(self, policy: Policy, segment: str) -> float:
        """The mean over ``segment``'s bars of the cross-sectional correlation of ``policy``'s log
        target weights with the next bar's log return, on the rows of an all-cash account (one
        batched call; weights mode). For a softmax book (the cross-sectional policy) the log weights
        are its entity scores up to a constant per bar; weights below float32's smallest normal
        (exact zeros of a top-k book) tie at its log."""
        full = self.full
        start, stop = full.segment(segment)
        progress = torch.from_numpy(session_progress(full.session_ids)[start : stop - 1])
        rows = all_cash_rows(full.features[start : stop - 1].float().cpu(), progress)
        with torch.inference_mode():
            targets = policy(rows.to(self.device))
        return target_weights_ic(targets, full, segment)

    def held_out(self, policy: Policy) -> pd.Series:
        return self.held_out_result(policy).returns

    def held_out_result(self, policy: Policy) -> TraderResult:
        return segment_result(self.full, "backtest", self.eval_config, policy, self.device)


def _train_one(
    problem: _Problem, config: PPOConfig, seed: int, budget: int
) -> tuple[float, dict[str, Any], int]:
    """One pod alone for ``budget`` env steps (or the tournament's wall budget); ``(best validation
    score, its state, env steps)``."""
    agent = problem.context.agent_factory(config, seed)
    assert isinstance(agent, PPOAgent)
    env = problem.context.train_env(problem.selection, seed)
    best_score, best_state = -math.inf, agent.state_dict()
    rounds = 0
    wall_budget = problem.spec.tournament.budget_seconds
    while agent.env_steps < budget and problem.seconds < wall_budget:
        agent.train_round(env)
        rounds += 1
        finished = agent.env_steps >= budget or problem.seconds >= wall_budget
        if rounds % problem.spec.tournament.eval_every_rounds == 0 or finished:
            score = problem.validate(deterministic_policy(agent))
            if score > best_score:
                best_score, best_state = score, agent.state_dict()
    return best_score, best_state, agent.env_steps


def _restore(problem: _Problem, state: dict[str, Any]) -> Policy:
    agent = problem.context.agent_factory(PPOConfig.from_dict(state["config"]), int(state["seed"]))
    assert isinstance(agent, PPOAgent)
    agent.load_state_dict(state)
    return deterministic_policy(agent)


def _run_single(problem: _Problem) -> tuple[dict[str, Policy], int]:
    config = problem.spec.agent_config()
    budget = problem.env_step_budget
    _, state, steps = _train_one(problem, config, problem.spec.seed, budget)
    return {"best": _restore(problem, state)}, steps


def _run_best_of(problem: _Problem) -> tuple[dict[str, Policy], int]:
    config = problem.spec.agent_config()
    budget = problem.env_step_budget // POOL_SIZE
    runs = [_train_one(problem, config, problem.spec.seed * POOL_SIZE + i, budget) for i in range(POOL_SIZE)]
    _, state, _ = max(runs, key=lambda run: run[0])
    return {"best": _restore(problem, state)}, sum(run[2] for run in runs)


def _run_tournament(problem: _Problem) -> tuple[dict[str, Policy], int]:
    """The tournament of ``finpod run``: its backend (``auto``: worker processes on a Linux CPU), its
    ``evaluate``; each ``round_finished`` event counts the round's score as a trial (and, when it
    is the best so far, the curve's held-out pass of the pod's agent, in this process)."""
    spec, factory = problem.spec, problem.context.agent_factory
    context, selection = problem.context, problem.selection  # what the pods' env factory pickles

    def make_env(seed: int) -> TradingEnv:
        return context.train_env(selection, seed)

    with (
        tempfile.TemporaryDirectory(prefix="finpod-skill-") as scratch,
        pod_backend(spec, problem.device) as backend,
    ):
        tournament = Tournament(
            problem.tournament_config,
            Path(scratch),
            factory,
            spec.agent_config(),
            make_env,
            problem.validation_score(),
            backend,
        )

        def on_event(event: TournamentEvent) -> None:
            if event.kind == "round_finished" and event.pod_id is not None:
                agent = tournament.agent_of(event.pod_id)
                problem.record(
                    float(event.data["score"]), f"pod{event.pod_id}", lambda: deterministic_policy(agent)
                )

        problem.excluded.on_period = tournament.exclude_seconds  # the curve's passes are not training
        with tournament:
            result = tournament.run(on_event=on_event)
        policies = select(spec, result.leaderboard, factory, tournament.archive)
        steps = result.env_steps
    return {_bench_name(name): policy for name, policy in policies.items()}, steps


def _bench_name(trader: str) -> str:
    """The bench's name of a run's trader: ``best``, ``ensemble`` (``ensemble_top<k>``) or
    ``trajectory`` (``trajectory<n>``)."""
    if trader.startswith(TRAJECTORY_PREFIX):
        return TRAJECTORY_PREFIX
    return "best" if trader == "best" else "ensemble"


_RUNNERS: Final[dict[str, Callable[[_Problem], tuple[dict[str, Policy], int]]]] = {
    "tournament": _run_tournament,
    "single": _run_single,
    "best_of_4": _run_best_of,
}


def case_bars(case: SkillCase, seed: int) -> pd.DataFrame:
    """The synthetic market of ``case`` drawn with ``seed`` (bars of every segment)."""
    return synth_market(
        case.n_symbols,
        case.n_days,
        case.frequency,
        seed,
        case.segments["train"][0],
        signal=case.signal,
        alpha_annual=0.0,
    )


def case_panels(case: SkillCase, seed: int, spec: Spec) -> tuple[Panel, Panel]:
    """``(selection, full)`` panels of ``case``'s market for ``seed``: train and validation only (what
    a contender sees), and every segment (the held-out years' scores)."""
    bars = case_bars(case, seed)
    symbols = symbol_names(case.n_symbols)
    return selection_panel(spec, bars, symbols, "cpu"), backtest_panel(spec, bars, symbols, "cpu")


def probe_problem(case_name: str, seed: int, overrides: Sequence[str] = ()) -> tuple[SkillCase, _Problem]:
    """One case and seed set up as the bench sets up its contenders (the ``defaults`` hyper set, the
    env-step budget out of the way, ``overrides`` applied), on the CPU, with the oracle's and equal
    weight's held-out Sharpe ratios filled in: what the probe scripts (``scripts/pod_probe.py``,
    ``scripts/supervised_probe.py``) train and score against."""
    case = CASES[case_name]
    spec = bench_spec(case, seed, "defaults", ["tournament.budget_env_steps=100000000", *overrides])
    selection, full = case_panels(case, seed, spec)
    device = torch.device("cpu")
    problem = _Problem(spec, selection, full, device, math.nan, math.nan)
    config = problem.eval_config
    problem.oracle_policy = fit_oracle(full, case.signal, config, device).policy
    problem.oracle_sharpe = returns_sharpe(problem.held_out(problem.oracle_policy))
    problem.equal_weight_sharpe = returns_sharpe(problem.held_out(equal_weight_policy(case.n_symbols)))
    return case, problem


def run_seed(
    case: SkillCase,
    seed: int,
    contenders: Iterable[str] = CONTENDERS,
    hyper_sets: Iterable[str] = HYPER_SETS,
    on_result: Callable[[str, ContenderResult], None] | None = None,
    overrides: Sequence[str] = (),
    snapshots: bool = False,
) -> SeedResult:
    """Every requested contender of ``case`` on ``seed`` (CPU), with the oracle, EW and the linear baseline.

    Args:
        case: the market and budget.
        seed: market, agent and tournament seed.
        contenders: names from :data:`CONTENDERS`.
        hyper_sets: names from :data:`HYPER_SETS`.
        on_result: called with ``("<hyper>/<contender>", result)`` as each finishes (progress).
        overrides: ``--set section.key=value`` assignments applied to every contender's spec.
        snapshots: trade every validated policy on the held-out bars after its contender
            (:attr:`ContenderResult.snapshots`).
    """
    device = torch.device("cpu")
    base = bench_spec(case, seed, "good", overrides)
    selection, full = case_panels(case, seed, base)
    reference = _Problem(base, selection, full, device, math.nan, math.nan)
    oracle_fit = fit_oracle(full, case.signal, reference.eval_config, device)  # its train segment only
    oracle_returns = reference.held_out(oracle_fit.policy)
    oracle = returns_sharpe(oracle_returns)
    equal_policy = equal_weight_policy(case.n_symbols)
    equal_result = reference.held_out_result(equal_policy)
    equal_returns = equal_result.returns
    equal = returns_sharpe(equal_returns)
    equal_costs = cost_drag(equal_result)
    edge_variance = sharpe_difference_variance(oracle_returns.to_numpy(float), equal_returns.to_numpy(float))
    linear = fit_linear_trader(selection, reference.eval_config, device)
    linear_sharpe = returns_sharpe(reference.held_out(linear.policy))
    results: dict[str, ContenderResult] = {}
    for hyper in hyper_sets:
        for name in contenders:
            spec = bench_spec(case, seed, hyper, overrides)
            problem = _Problem(spec, selection, full, device, oracle, equal, keep_snapshots=snapshots)
            policies, steps = _RUNNERS[name](problem)
            seconds = problem.seconds
            results_of = {trader: problem.held_out_result(policy) for trader, policy in policies.items()}
            pick = None
            equal_validation = problem.validation_returns(equal_policy) if "best" in policies else None
            if equal_validation is not None:  # the run's pick: best, or equal weight without its edge
                pick = gate_pick(problem.validation_returns(policies["best"]), equal_validation)
                results_of[PICK] = results_of["best"] if pick.trader == "best" else equal_result
            if equal_validation is not None and TRAJECTORY_PREFIX in policies:
                gated = gate_pick(
                    problem.validation_returns(policies[TRAJECTORY_PREFIX]),
                    equal_validation,
                    TRAJECTORY_PREFIX,
                )
                kept = gated.trader == TRAJECTORY_PREFIX
                results_of[PICK_TRAJECTORY] = results_of[TRAJECTORY_PREFIX] if kept else equal_result
            held_out = {trader: result.returns for trader, result in results_of.items()}
            costs = {trader: cost_drag(result) for trader, result in results_of.items()}
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
                seconds=seconds,
                curve=problem.curve,
                snapshots=problem.snapshot_rows(),
                pick={} if pick is None else pick.to_json(),
                cost_pct_year={trader: pct for trader, (pct, _) in costs.items()},
                gross_sharpe={trader: gross for trader, (_, gross) in costs.items()},
            )
            results[f"{hyper}/{name}"] = result
            if on_result is not None:
                on_result(f"{hyper}/{name}", result)
    return SeedResult(
        case.name,
        seed,
        oracle,
        equal,
        results,
        linear_sharpe=linear_sharpe,
        linear_share=share_captured(linear_sharpe, oracle, equal),
        oracle_edge_se=math.sqrt(edge_variance) if math.isfinite(edge_variance) else math.nan,
        oracle=oracle_fit.to_json(),
        linear=linear.to_json(),
        equal_weight_cost_pct_year=equal_costs[0],
        equal_weight_gross_sharpe=equal_costs[1],
    )


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


def _quartiles(values: list[float]) -> list[float]:
    """``[q1, q3]`` of the finite values (linear interpolation between order statistics), NaN if none."""
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < 2:
        return [finite[0], finite[0]] if finite else [math.nan, math.nan]
    q1, _, q3 = statistics.quantiles(finite, n=4, method="inclusive")
    return [q1, q3]


def summarise(results: list[SeedResult]) -> dict[str, Any]:
    """Medians over seeds per case: oracle, equal weight; per contender: Sharpe, share, steps, seconds."""
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r.case for r in results):
        rows = [r for r in results if r.case == case]
        summary: dict[str, Any] = {
            "seeds": [r.seed for r in rows],
            "oracle_sharpe": _median([r.oracle_sharpe for r in rows]),
            "equal_weight_sharpe": _median([r.equal_weight_sharpe for r in rows]),
            "linear_sharpe": _median([r.linear_sharpe for r in rows]),
            "linear_share": _median([r.linear_share for r in rows]),
            "linear_share_per_seed": [r.linear_share for r in rows],
            "oracle_params": [r.oracle.get("params") for r in rows],
            "oracle_edge_z_per_seed": [r.oracle_edge_z for r in rows],
            "informative_seeds": [r.seed for r in rows if r.informative],
            "contenders": {},
        }
        informative = {r.seed for r in rows if r.informative}
        for key in dict.fromkeys(k for r in rows for k in r.contenders):
            seeded = [(r, r.contenders[key]) for r in rows if key in r.contenders]
            got = [c for _, c in seeded]
            traders = dict.fromkeys(t for c in got for t in c.sharpe)
            summary["contenders"][key] = {
                "sharpe": {t: _median([c.sharpe[t] for c in got if t in c.sharpe]) for t in traders},
                "share": {t: _median([c.share[t] for c in got if t in c.share]) for t in traders},
                "share_per_seed": {t: [c.share.get(t, math.nan) for c in got] for t in traders},
                "share_informative": {
                    t: _median([c.share[t] for r, c in seeded if r.seed in informative and t in c.share])
                    for t in traders
                },
                "dsr": {t: _median([c.dsr[t] for c in got if t in c.dsr]) for t in traders},
                "dsr_max": {t: max((c.dsr[t] for c in got if t in c.dsr), default=math.nan) for t in traders},
                "share_min_max": {
                    t: [
                        min(c.share[t] for c in got if t in c.share),
                        max(c.share[t] for c in got if t in c.share),
                    ]
                    for t in traders
                },
                "share_quartiles": {
                    t: _quartiles([c.share[t] for c in got if t in c.share]) for t in traders
                },
                "env_steps": _median([float(c.env_steps) for c in got]),
                "seconds": _median([c.seconds for c in got]),
            }
        out[case] = summary
    return out


INFORMATIVE_EDGE_Z: Final[float] = 2.0
"""A seed's shares count in ``share_informative`` when its oracle beats equal weight on the held-out
bars by at least this many standard errors of that Sharpe difference (about 0.5 Sharpe over three
years of daily bars at the oracle's usual 0.9 correlation with equal weight): below it, the
ceiling cannot be told from equal weight and a share is a ratio of noises (-5.2 on a daily20 seed
whose oracle edge was +0.14)."""
SNAPSHOT_PERIODS: Final[int] = 4
"""Parts of a run the snapshot summary averages the held-out shares over."""
SNAPSHOT_PRIOR_EDGE_SHARPE: Final[float] = 0.5
"""Spread of true edges over equal weight (annualised Sharpe) the snapshots' shrunk validation
Sharpe assumes (:func:`~finpod.report.verdict.shrunk_sharpe`): edges of a few tenths of a Sharpe,
as a realistic daily signal gives."""


def snapshot_summary(rows: Sequence[Sequence[Any]]) -> str:
    """One line on :attr:`ContenderResult.snapshots`: the mean held-out share of the policies
    validated in each quarter of the run's seconds (and their mean held-out score IC, where the
    rows have it), and the share of the best on validation overall and in the run's second half.

    Args:
        rows: ``[trial, seconds, validation score, pod, held-out share, (validation IC, held-out
            IC, (validation Sharpe, shrunk validation Sharpe, tracking error))]`` (at least one).
    """
    seconds = [float(row[1]) for row in rows]
    end = max(seconds) or 1.0
    parts: list[list[Sequence[Any]]] = [[] for _ in range(SNAPSHOT_PERIODS)]
    for row, at in zip(rows, seconds, strict=True):
        parts[min(int(SNAPSHOT_PERIODS * at / end), SNAPSHOT_PERIODS - 1)].append(row)

    def means(column: int, form: str) -> str:
        found = [statistics.fmean(float(row[column]) for row in part) if part else None for part in parts]
        return ", ".join("-" if value is None else format(value, form) for value in found)

    best = max(rows, key=lambda row: float(row[2]))
    later = [row for row in rows if float(row[1]) >= end / 2]
    best_later = max(later, key=lambda row: float(row[2]))
    ics = f" (held-out score IC {means(6, '+.3f')})" if all(len(row) > 6 for row in rows) else ""
    shrunk = ""
    if all(len(row) > 8 for row in rows):
        best_shrunk = max(rows, key=lambda row: float(row[8]))
        shrunk = f", best on shrunk validation Sharpe {float(best_shrunk[4]):+.2f}"
    return (
        f"{len(rows)} validated policies; mean held-out share by quarter of the run "
        f"{means(4, '+.2f')}{ics}; best on validation {float(best[4]):+.2f} (at {float(best[1]):.0f} s), "
        f"best on validation in the second half {float(best_later[4]):+.2f}{shrunk}"
    )


def as_json(results: list[SeedResult]) -> dict[str, Any]:
    """Per-seed results and per-case medians as plain JSON values."""
    return {"seeds": [asdict(r) for r in results], "medians": summarise(results)}
