"""The sections of a spec: synthetic market, data, segments, env, tournament, paper trading."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any, ClassVar, Final, Literal

from pydantic import (
    Field,
    model_validator,
)

from finpod.data.choices import SignalKind
from finpod.data.signals import MAX_SIGNAL_STRENGTH
from finpod.env.config import ActionMode, EnvConfig, FillMode, RewardMode
from finpod.spec.base import DateRange, Model, default_of
from podracer.api import ArchiveRule, PoolSchedule, PPOConfig, TournamentConfig

TOURNAMENT_DEFAULTS: dict[str, Any] = {
    "pool_size": 4,
    "leaderboard_size": 8,
    "budget_env_steps": 2_000_000,
    "budget_seconds": 120.0,
    "eval_every_rounds": 2,
    "resample_prob": 0.25,
    "perturb_bounds": {"learning_rate": (3e-5, 1e-3), "gamma": (0.0, 0.99), "pathwise_risk": (0.002, 0.02)},
    "pool_schedule": "halving",
    "halving_floor": 2,
    "lag_margin": 0.1,
    "archive_size": 32,
    "archive_rule": "score",
}
"""finpod's defaults for the ``[tournament]`` fields where a finpod run departs from podracer's
domain-free ones (every other field that :class:`TournamentConfig` has a default for takes it from
there), so a spec that says nothing gets a tournament that learns within two minutes:

* a pool of 4 pods that halves as the budget is spent (successive halving), the worst retiring,
  down to 2 pods (``halving_floor``): pods train one thread each, so on a 2-core machine the last
  third of the budget would otherwise leave a core idle (the same on every machine: results do not
  depend on its cores); 8 leaderboard places (two per starting pod); a pod lags (and is re-seeded
  from a better one) when its smoothed validation Sharpe is more than 0.1 below the other live
  pods' median;
* a validation score every 2 rounds (2 x 8 steps x N envs), so the pool is judged, exploited and
  explored often within the budget;
* the search space a user would state for a daily portfolio problem: Adam learning rates that
  train at all without fitting the train years' noise within the budget (3e-5 to 1e-3 around the
  pathwise agent's 1e-4; an agent without the pathwise term searches
  :data:`SCORE_FUNCTION_TOURNAMENT_DEFAULTS`), horizons from one bar to about 100 (``gamma`` 0 to
  0.99), and how concentrated the pathwise term's optimal portfolio is (``pathwise_risk`` 0.002 to
  0.02 around the agent's 0.01: on the bench's tuning seeds the volume-conditioned kind's held-out
  share tripled at 0.003 while one multi-bar reversal seed did best at 0.01, so no one value
  serves every signal; BENCHMARKS.md "Where the volume kind's skill goes"); a child redraws a
  field from it with probability 0.25 (Ray Tune PBT's resample default), so a poor start is escaped;
* 64 passes over the train segment's bars (:data:`DEFAULT_BUDGET_PASSES`, for a spec silent on
  ``budget_env_steps``), a wall budget of 120 s (rounds are a fraction of a second, so the run ends
  within a few seconds of it) and a 2M env-step cap, whichever comes first: on daily bars the
  passes usually do, and the run is then the same on any machine; a spec that must be reproducible
  on any machine states ``budget_env_steps`` and a ``budget_seconds`` it never reaches, as
  ``strategies/demo.toml`` does;
* an archive of the run's 32 best-validated judged rounds, any pod's (``archive_size`` 32,
  ``archive_rule = "score"``; :mod:`podracer.archive`), so every run also backtests the trajectory
  trader, the average of their target weights: on the skill bench's daily cases with an edge it
  beat ``best`` on 18 of 24 tuning runs (5 below, +0.05 Sharpe over equal weight on average) and
  on 16 of 30 reported ones (13 below, +0.04): +0.14 on 20 stocks, where one lucky validation
  score had often picked a snapshot that held out worse than the run's other good ones (daily20's
  five-bar reversal: median share of the oracle's edge 0.78 against best's -0.01), -0.06 on 100
  stocks, where the validation score ranks snapshots well (BENCHMARKS.md "Averaging the
  best-validated snapshots"); ``best`` stays the leaderboard's first entry and the pick's
  candidate. The archive before it (rounds evenly spaced over the run, ``archive_rule = "even"``)
  held a lower median share than the pick at 120 s (BENCHMARKS.md "The trajectory ensemble");
  ``archive_size = 0`` keeps none.
"""

DEFAULT_BUDGET_PASSES: Final[float] = 64.0
"""The ``budget_passes`` of a ``[tournament]`` that states neither it nor ``budget_env_steps``: 64
passes over the train segment's bars, then the run stops (or at ``budget_seconds`` first). Daily
data is small (six years are 1,510 bars), and the tournament's picks mostly come from its first
passes: on the skill bench's 24 paired daily100 seeds (3 kinds, tuning and reported seeds) runs of
100k env steps (66 passes) picked as well as runs of 200k (132 passes; a mean +0.04 Sharpe over
equal weight, 11 up, 10 down; the reported seeds' median shares 0.63, 0.62 and 1.23 against 0.22,
0.46 and 1.19), but worse on 5 seeds of daily20 (-0.08) and of the no-signal case (-0.12): the same
skill within noise over the 34 pairs, in half the time (BENCHMARKS.md "A daily budget in passes
over the train bars"). Minute bars have 390 bars a session, so there the wall budget (or the 2M
env-step cap) stops the run first. A spec that states ``budget_env_steps`` is taken at its word:
it gets no pass budget unless it states one."""

SCORE_FUNCTION_TOURNAMENT_DEFAULTS: dict[str, Any] = {
    "perturb_bounds": {"learning_rate": (1e-4, 3e-2), "gamma": (0.0, 0.99)},
}
"""What a spec whose agent trains without the pathwise term (``pathwise_coef = 0``, ``joint``
advantages) gets over :data:`TOURNAMENT_DEFAULTS` when its ``[tournament]`` does not state them:
learning rates around :data:`finpod.spec.agent.SCORE_FUNCTION_LEARNING_RATE`."""

INTRADAY_TOURNAMENT_DEFAULTS: dict[str, Any] = {
    "perturb_bounds": {"learning_rate": (1e-4, 3e-2), "gamma": (0.9, 0.999)},
}
"""What a spec of minute bars (``frequency = "1min"``) gets over :data:`TOURNAMENT_DEFAULTS` when its
``[tournament]`` does not state them: gamma searched over horizons of 10 to 1,000 bars around the
intraday agent's 0.99 (:data:`finpod.spec.agent.INTRADAY_AGENT_DEFAULTS`)."""

INTRADAY_ENV_DEFAULTS: dict[str, Any] = {"fully_invested": True}
"""What a spec of minute bars (``frequency = "1min"``) trading target weights without the pathwise
term gets when its ``[env]`` does not state them: a fully invested book (the action's cash score is
ignored), the family of the oracle and of the linear baseline. Ranked by Sharpe on ten validation
sessions, a book that may hold cash wins by holding it through a falling window and can lose the
held-out weeks by the market's whole move: on the skill bench's minute20 case at 120 s (0.2 % fee,
1 % band) best minus equal weight was -3.83 Sharpe on seed 3 with cash allowed, and -0.04 fully
invested; on the tuning seeds 100-102 -0.18, -1.50, -0.14 with cash against -0.12, -0.01, -0.08
(BENCHMARKS.md "A fully invested book: the minute default"). Daily specs train with the pathwise
term, which differentiates the reward through the cash weight, so they keep it (``fully_invested``
is refused beside it)."""


DAILY_VALIDATION_CHUNKS: Final[int] = 16
"""Validation chunks of a daily spec silent on them: the demo's pods spent a third of their round time
scoring a half-year of daily bars one bar at a time, and 7 % as 16 chunks side by side; the picked
trader and its backtest were the same (BENCHMARKS.md "Scoring validation in chunks")."""
DAILY_VALIDATION_WARMUP_BARS: Final[int] = 5
"""A daily chunk's unscored lead-in: a weights policy without a band holds its targets after one bar."""
INTRADAY_VALIDATION_DEFAULTS: dict[str, Any] = {"validation_chunks": 1, "validation_warmup_bars": 390}
"""What a spec of minute bars silent on them gets: one continuous pass (a spec at the paper's scale
states its chunks, as ``strategies/nasdaq100_minute.toml`` does: 64), and a session of warm-up."""


def _env_default(name: str) -> Any:
    """The default of ``[env]`` setting ``name``: :class:`EnvConfig`'s (defined there, once)."""
    return default_of(EnvConfig, name)


def _tournament_default(name: str) -> Any:
    """The default of ``[tournament]`` setting ``name``: :data:`TOURNAMENT_DEFAULTS`, else
    :class:`TournamentConfig`'s."""
    return TOURNAMENT_DEFAULTS[name] if name in TOURNAMENT_DEFAULTS else default_of(TournamentConfig, name)


class SyntheticSpec(Model):
    """Shape and seed of the embedded synthetic market (``finpod.data.synth.synth_market``)."""

    n_symbols: int = Field(8, ge=1, le=1000, description="number of synthetic stocks", examples=[8])
    n_days: int = Field(
        750, ge=3, description="number of trading sessions generated from start_date", examples=[750]
    )
    start_date: dt.date = Field(
        dt.date(2016, 1, 4),
        description="first trading session of the synthetic market (ISO date)",
        examples=["2016-01-04"],
    )
    seed: int = Field(0, ge=0, description="seed of the generator (same seed, same market)", examples=[0])
    signal: SignalKind = Field(
        "none",
        description=(
            'planted observable signal: "none", "reversal", "momentum", "reversal_5", "momentum_60", '
            '"volume" or "nonlinear" (models in finpod.data.signals)'
        ),
        examples=["reversal"],
    )
    signal_strength: float = Field(
        0.0,
        ge=0.0,
        le=MAX_SIGNAL_STRENGTH,
        description="target information coefficient of the planted signal (0 = no signal; real: 0.02-0.08)",
        examples=[0.04],
    )
    alpha_annual: float = Field(
        0.10,
        gt=-1.0,
        lt=1.0,
        description="drift alpha of symbols 0 mod 4 (drag of 1 mod 4), log a year; 0 = off",
        examples=[0.1],
    )


class DataSpec(Model):
    """Where the bars come from: a dataset folder (``finpod data ...``) or the synthetic market."""

    source: Literal["dataset", "synthetic"] = Field(
        "synthetic",
        description='"dataset" (a folder made by finpod data import|fetch|synth) or "synthetic"',
        examples=["dataset"],
    )
    path: str | None = Field(
        None,
        description="dataset folder, relative to the spec file's folder (source=dataset)",
        examples=["../data/nasdaq100_1min"],
    )
    synthetic: SyntheticSpec = Field(default_factory=SyntheticSpec)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _path_matches_source(self) -> DataSpec:
        if self.source == "dataset" and not self.path:
            raise ValueError(
                "data.path: required when data.source is 'dataset'; fix: set data.path to a dataset "
                "folder such as data/nasdaq100_1min, or set data.source = 'synthetic'"
            )
        return self


class SegmentsSpec(Model):
    """The three date ranges (inclusive, ISO dates); they must be ordered and must not overlap."""

    train: DateRange = Field(
        description="[first, last] session the agents learn on", examples=[["2016-01-01", "2019-11-25"]]
    )
    validation: DateRange = Field(
        description="[first, last] session the tournament ranks on", examples=[["2019-11-26", "2020-05-25"]]
    )
    backtest: DateRange = Field(
        description="[first, last] session of the held-out backtest, touched once after selection",
        examples=[["2020-05-26", "2021-05-26"]],
    )

    @model_validator(mode="after")
    def _ordered(self) -> SegmentsSpec:
        names = ("train", "validation", "backtest")
        for name in names:
            first, last = getattr(self, name)
            if first > last:
                raise ValueError(
                    f"segments.{name}: starts after it ends ({first} > {last}); fix: write [first, last]"
                )
        for before, after in itertools.pairwise(names):
            if getattr(self, before)[1] >= getattr(self, after)[0]:
                raise ValueError(
                    f"segments.{after}: must start after segments.{before} ends "
                    f"({getattr(self, after)[0]} <= {getattr(self, before)[1]}); fix: order train < "
                    "validation < backtest without overlap"
                )
        return self

    def as_dict(self) -> dict[str, DateRange]:
        """``{"train": (first, last), "validation": ..., "backtest": ...}``."""
        return {"train": self.train, "validation": self.validation, "backtest": self.backtest}


class EnvSpec(Model):
    """Trading-env settings (``finpod.env.EnvConfig``) plus the number of parallel training envs.

    Each setting's default is :class:`EnvConfig`'s (read from the dataclass); :meth:`Spec.env_config`
    builds the config.
    """

    BATCH_FIELDS: ClassVar[frozenset[str]] = frozenset({"num_envs"})
    """Fields of a run's training batch, not of the env's settings: left out of the EnvConfig."""

    initial_cash_usd: float = Field(
        _env_default("initial_cash_usd"),
        gt=0,
        allow_inf_nan=False,
        description="starting capital in USD",
        examples=[1_000_000],
    )
    fee_rate: float = Field(
        _env_default("fee_rate"),
        ge=0,
        lt=1,
        description="fee per trade as a fraction of traded notional",
        examples=[0.002],
    )
    half_spread_bps: float = Field(
        _env_default("half_spread_bps"),
        ge=0,
        allow_inf_nan=False,
        description="slippage: half the bid-ask spread in basis points",
        examples=[1.0],
    )
    max_participation: float = Field(
        _env_default("max_participation"),
        gt=0,
        description="cap on the traded fraction of a bar's volume (inf = no cap)",
        examples=[0.1],
    )
    action_mode: ActionMode = Field(
        _env_default("action_mode"),
        description='"weights" (target weights over cash + assets) or "share_delta" (ElegantRL share deltas)',
        examples=["weights"],
    )
    max_shares: float = Field(
        _env_default("max_shares"),
        gt=0,
        allow_inf_nan=False,
        description="shares per unit action in action_mode = 'share_delta'",
        examples=[100],
    )
    fill: FillMode = Field(
        _env_default("fill"),
        description='fill price of an order: "next_open" or "next_close"',
        examples=["next_open"],
    )
    reward: RewardMode = Field(
        _env_default("reward"),
        description='"log_return", "pnl" (reference-compatible), "risk_penalised" or "excess_log_return" '
        "(log return minus the equal-weight basket's)",
        examples=["log_return"],
    )
    reward_scale: float = Field(
        _env_default("reward_scale"),
        gt=0,
        allow_inf_nan=False,
        description="multiplier on the reward",
        examples=[100],
    )
    risk_penalty: float = Field(
        _env_default("risk_penalty"),
        ge=0,
        allow_inf_nan=False,
        description="risk aversion: weight of the squared return (reward = risk_penalised) or of the "
        "squared excess return over equal weight (reward = excess_log_return); 0 = none",
        examples=[0.1],
    )
    horizon_bars: int = Field(
        _env_default("horizon_bars"),
        ge=2,
        description="training episode length in bars (random starts in the train segment)",
        examples=[250],
    )
    whole_shares: bool = Field(
        _env_default("whole_shares"), description="trade whole shares only", examples=[False]
    )
    rebalance_band: float = Field(
        _env_default("rebalance_band"),
        ge=0,
        lt=1,
        description="no-trade band (weights mode): assets within this fraction of equity of their target "
        "weight are not traded that step (0 = trade every step)",
        examples=[0.03],
    )
    start_portfolio: Literal["cash", "equal_weight"] = Field(
        _env_default("start_portfolio"),
        description='the book a training episode starts with: "cash", or "equal_weight" (invested '
        "equally at its first bar's close, without cost); validation, backtest and paper trading "
        "always start in cash",
        examples=["equal_weight"],
    )
    fully_invested: bool = Field(
        _env_default("fully_invested"),
        description="weights mode: ignore the action's cash score, so every target spreads the whole "
        "book over the assets (the oracle's and the linear baseline's family); a spec silent on it "
        "gets true on minute bars without the pathwise term, else false",
        examples=[True],
    )
    num_envs: int = Field(64, ge=1, description="parallel training envs per pod (the batch N)", examples=[64])


class TournamentSpec(Model):
    """podracer tournament settings (``podracer.TournamentConfig``), the ensemble size, and where pods run.

    A setting's default is :class:`TournamentConfig`'s where it has one (:data:`TOURNAMENT_DEFAULTS`
    lists finpod's own); :meth:`Spec.tournament_config` builds the config.
    """

    PLACEMENT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"backend", "address", "cpus_per_pod", "gpus_per_pod", "pods_per_worker"}
    )
    """Fields that say where pods train, not what: left out of the spec hash and the TournamentConfig."""
    AGENT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "ensemble_k",
            "learners",
            "validation_chunks",
            "validation_warmup_bars",
            "cuda_matmul_precision",
            "budget_passes",
        }
    )
    """Fields finpod applies itself (selection, learner fusion, the validation score, matmul
    precision, the budget in passes over the train bars): left out of the TournamentConfig."""

    pool_size: int = Field(
        _tournament_default("pool_size"), ge=1, description="pods training at once", examples=[2]
    )
    leaderboard_size: int = Field(
        _tournament_default("leaderboard_size"),
        ge=1,
        description="snapshots kept on the leaderboard",
        examples=[4],
    )
    budget_env_steps: int = Field(
        _tournament_default("budget_env_steps"),
        ge=1,
        description="total env transitions over all pods (the run stops at this or budget_seconds)",
        examples=[200_000],
    )
    budget_passes: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="passes over the train segment's bars: the run stops after budget_passes x train "
        "bars env steps, or at budget_env_steps or budget_seconds if one comes first (env steps count "
        "bars over all envs and pods: 64 passes of 1,512 daily bars are 96,768 env steps)",
        examples=[64],
    )
    budget_seconds: float = Field(
        _tournament_default("budget_seconds"),
        gt=0,
        description="wall-time budget of the tournament in seconds, summed over resumes (the run stops "
        "at this or budget_env_steps; a result that must not depend on the machine's speed states an "
        "env-step budget and a wall budget it never reaches)",
        examples=[600],
    )
    fresh_pod_prob: float = Field(
        0.2,
        ge=0,
        le=1,
        description="chance a new pod starts from scratch at the start; falls to 0 as the budget is spent",
        examples=[0.2],
    )
    perturb_scale: float = Field(
        0.2,
        ge=0,
        description="hyper-parameter step of a child: learning rate x (1+s)^u, 1-gamma and 1-lambda x "
        "(1+s)^u, entropy_coef and h_term_coef + s*(max-min)*u, u ~ U(-1, 1)",
        examples=[0.2],
    )
    perturb_bounds: dict[str, tuple[float, float]] = Field(
        default_factory=lambda: dict(_tournament_default("perturb_bounds")),
        description="[min, max] of perturbed agent fields, replacing podracer's PPOConfig.PERTURBABLE bounds",
        examples=[{"gamma": [0.95, 0.999], "learning_rate": [1e-4, 1e-3]}],
    )
    resample_prob: float = Field(
        _tournament_default("resample_prob"),
        ge=0,
        le=1,
        description="per-field chance that a child draws a hyper-parameter afresh from its perturb_bounds "
        "(log-uniform; gamma and lambda as 1-x) instead of stepping it; when > 0, new pods from scratch "
        "after the first draw every field there; escapes a start far from good values",
        examples=[0.25],
    )
    leaderboard_after: float = Field(
        _tournament_default("leaderboard_after"),
        ge=0,
        lt=1,
        description="share of the budget spent before scored snapshots may enter the leaderboard (0: "
        "from the start); pods are scored and judged as usual before it, so the pick is the best "
        "snapshot of the budget's last part instead of an early one that was lucky on validation",
        examples=[0.5],
    )
    archive_size: int = Field(
        _tournament_default("archive_size"),
        ge=0,
        le=256,
        description="snapshots of the run's trajectory archive, kept by archive_rule (32 by default; 0: "
        "none; else at least 3); the trajectory trader averages their target weights, so it does not "
        "bet on the one validation score that ranks the board (each member costs a policy call per "
        "backtest bar)",
        examples=[32],
    )
    archive_rule: ArchiveRule = Field(
        _tournament_default("archive_rule"),
        description='which judged rounds the archive keeps: "score" (the default), the archive_size '
        "best-validated rounds of any pod (several of one pod may be kept, unlike the leaderboard's "
        "one per pod), so the trajectory trader averages the run's best-validated policies instead of "
        'betting on the single best one; "even", rounds evenly spaced over the whole run whatever they '
        "scored",
        examples=["even"],
    )
    softmax_temperature: float = Field(
        1.0, gt=0, description="temperature of the rank-softmax that picks a parent", examples=[1.0]
    )
    eval_every_rounds: int = Field(
        _tournament_default("eval_every_rounds"),
        ge=1,
        description="validation-score a pod every this many training rounds",
        examples=[1],
    )
    pool_schedule: PoolSchedule = Field(
        _tournament_default("pool_schedule"),
        description='"halving": successive halving, the pool halves as the budget is spent and the worst '
        'pods retire; "fixed": pool_size pods throughout',
        examples=["halving"],
    )
    halving_floor: int = Field(
        _tournament_default("halving_floor"),
        ge=1,
        description='the fewest pods "halving" shrinks the pool to (2: the runner-up trains beside the '
        "best pod in the last phase instead of leaving a core idle)",
        examples=[2],
    )
    lagging_rounds: int = Field(
        _tournament_default("lagging_rounds"),
        ge=1,
        description="rounds a pod trains before it may be judged lagging",
        examples=[2],
    )
    lag_margin: float = Field(
        _tournament_default("lag_margin"),
        ge=0,
        description="a pod lags (and is re-seeded from a better live pod) when its smoothed validation "
        "Sharpe is below the other live pods' median by more than this",
        examples=[0.1],
    )
    score_smoothing: float = Field(
        _tournament_default("score_smoothing"),
        gt=0,
        le=1,
        description="weight of the newest score in a pod's moving average",
        examples=[0.5],
    )
    torch_threads_per_pod: int = Field(
        _tournament_default("torch_threads_per_pod"),
        ge=1,
        description="torch threads per training pod; with backend population, of the whole pool's one "
        "computation (results on CPU depend on it; run.json records it)",
        examples=[1],
    )
    cuda_matmul_precision: Literal["highest", "high"] = Field(
        "highest",
        description="float32 matmul precision of training on a CUDA device "
        '(torch.set_float32_matmul_precision): "highest" (full float32, the default: reproducible) or '
        '"high" (TF32 tensor cores, 10-bit mantissa: 1.7x the PPO samples/s at 16,384 envs on an '
        "H100); ignored on CPU; run.json records it",
        examples=["high"],
    )
    ensemble_k: int = Field(
        3, ge=1, description="distinct lineages whose best agents the ensemble trader averages", examples=[3]
    )
    validation_chunks: int = Field(
        DAILY_VALIDATION_CHUNKS,
        ge=1,
        le=4096,
        description="score validation as up to this many contiguous chunks of the segment traded side "
        "by side in one batched env, each warmed up on the validation_warmup_bars before it, their "
        "returns stitched: about this many times fewer sequential steps, an approximation of the "
        "continuous pass (1 = one continuous pass, exact; backtests are always continuous); "
        f"default {DAILY_VALIDATION_CHUNKS} on daily bars, 1 on minute bars",
        examples=[64],
    )
    validation_warmup_bars: int = Field(
        DAILY_VALIDATION_WARMUP_BARS,
        ge=0,
        description="unscored bars each validation chunk but the first trades before its own "
        "(validation_chunks > 1), so its portfolio is the policy's, not all cash; default "
        f"{DAILY_VALIDATION_WARMUP_BARS} on daily bars, 390 (a session) on minute bars",
        examples=[390],
    )
    backend: Literal["auto", "local", "processes", "population", "ray"] = Field(
        "auto",
        description='where pods train: "auto" ("population" on a CUDA device, "local" on a CPU), '
        '"local" (threads in this process), "processes" (one worker process per pod on this machine), '
        '"population" (the whole pool '
        "in lockstep as one batched computation on the run's device, with torch_threads_per_pod threads "
        'in all) or "ray" (Ray actors; pool_size then caps the pool, which follows the '
        "cluster's CPUs/GPUs)",
        examples=["ray"],
    )
    address: str | None = Field(
        None,
        description='Ray cluster to join (backend = "ray"): "auto" (the cluster this machine is part of), '
        '"host:port" of its head, or unset to start a private Ray on 127.0.0.1',
        examples=["auto"],
    )
    cpus_per_pod: float = Field(
        1.0, gt=0, description='CPUs each Ray pod worker reserves (backend = "ray")', examples=[1.0]
    )
    gpus_per_pod: float = Field(
        0.0,
        ge=0,
        le=1,
        description='share of a GPU each Ray pod worker reserves (backend = "ray"; needed with device = '
        '"cuda", e.g. 0.25 puts four pods on a GPU)',
        examples=[0.25],
    )
    pods_per_worker: int = Field(
        1,
        ge=1,
        le=1024,
        description='pods each Ray actor trains in lockstep as one population (backend = "ray"; 1: a pod '
        "an actor); an actor reserves pods_per_worker x cpus_per_pod CPUs and pods_per_worker x "
        "gpus_per_pod of a GPU, so gpus_per_pod = 1 / pods_per_worker is one population a GPU",
        examples=[8],
    )

    learners: int = Field(
        1,
        ge=1,
        le=64,
        description="learners per pod, each with its own envs, whose parameters and Adam moments are "
        "averaged after every epoch over torch.distributed (1 = no fusion)",
        examples=[2],
    )

    @model_validator(mode="after")
    def _archive_holds_an_ensemble(self) -> TournamentSpec:
        if self.archive_size in (1, 2):
            raise ValueError(
                f"tournament.archive_size: {self.archive_size} cannot keep an ensemble once it thins; "
                "fix: use 0 (no archive) or at least 3, e.g. 16"
            )
        return self

    @model_validator(mode="after")
    def _address_needs_ray(self) -> TournamentSpec:
        if self.address is not None and self.backend != "ray":
            raise ValueError(
                f"tournament.address: {self.address!r} is set but backend is {self.backend!r}; "
                'fix: set backend = "ray" or remove address'
            )
        return self

    @model_validator(mode="after")
    def _populations_on_ray(self) -> TournamentSpec:
        if self.pods_per_worker == 1:
            return self
        if self.backend != "ray":
            raise ValueError(
                f"tournament.pods_per_worker: {self.pods_per_worker} pods a Ray actor is set but backend is "
                f'{self.backend!r}; fix: set backend = "ray", or use backend = "population" for one '
                "population on this machine, or remove pods_per_worker"
            )
        if self.learners > 1:
            raise ValueError(
                f"tournament.learners: {self.learners} learners per pod fuse over torch.distributed, "
                "which a population on a Ray actor does not run; fix: set learners = 1 or pods_per_worker = 1"
            )
        if self.gpus_per_pod * self.pods_per_worker > 1.0 + 1e-9:
            raise ValueError(
                f"tournament.gpus_per_pod: {self.gpus_per_pod} x pods_per_worker {self.pods_per_worker} is "
                f"more than one GPU for one actor; fix: set gpus_per_pod <= {1.0 / self.pods_per_worker:g} "
                "(1 / pods_per_worker: one population a GPU)"
            )
        return self

    @model_validator(mode="after")
    def _population_has_no_fusion(self) -> TournamentSpec:
        if self.backend == "population" and self.learners > 1:
            raise ValueError(
                f"tournament.learners: {self.learners} learners per pod fuse over torch.distributed, "
                'which a population (backend = "population") does not run; fix: set learners = 1 or '
                'backend = "local"'
            )
        return self

    @model_validator(mode="after")
    def _k_fits(self) -> TournamentSpec:
        if self.ensemble_k > self.leaderboard_size:
            raise ValueError(
                f"tournament.ensemble_k: {self.ensemble_k} exceeds leaderboard_size "
                f"{self.leaderboard_size}; fix: set ensemble_k <= leaderboard_size"
            )
        for name, (low, high) in self.perturb_bounds.items():
            if name not in PPOConfig.PERTURBABLE:
                raise ValueError(
                    f"tournament.perturb_bounds: {name!r} is not perturbed; fix: use some of "
                    f"{', '.join(sorted(PPOConfig.PERTURBABLE))}"
                )
            if not 0 <= low <= high:
                raise ValueError(
                    f"tournament.perturb_bounds.{name}: [{low}, {high}]; fix: use 0 <= min <= max"
                )
        return self


class PaperSpec(Model):
    """Paper-trading limits (``finpod paper``); the defaults are deliberately small and safe.

    Deployment settings only: they do not change what a run trains, so they are left out of
    :meth:`Spec.spec_hash` (editing them never starts a new run).
    """

    trader: Literal["best", "ensemble", "trajectory", "pick"] = Field(
        "pick",
        description='which selected trader to deploy: "pick" (the run\'s saved pick: best, or equal '
        'weight when best did not beat it on validation), "best", "ensemble" or "trajectory"',
        examples=["pick"],
    )
    max_order_notional_usd: float = Field(
        10_000.0,
        gt=0,
        description="largest notional of one order in USD (larger orders are cut)",
        examples=[10_000],
    )
    max_weight_per_asset: float = Field(
        0.25,
        gt=0,
        le=1,
        description="largest target weight of one asset (the rest stays cash)",
        examples=[0.25],
    )
    max_orders_per_minute: int = Field(
        30, ge=1, description="orders sent in any rolling minute (more are held back)", examples=[30]
    )
    daily_loss_limit: float = Field(
        0.02,
        gt=0,
        lt=1,
        description="loss since the session's first equity, as a fraction, that stops trading for the day",
        examples=[0.02],
    )
    on_daily_loss: Literal["halt", "flatten"] = Field(
        "halt",
        description='what the daily loss limit does: "halt" (no new orders) or "flatten" (sell all, '
        "then halt)",
        examples=["halt"],
    )
    stale_after_seconds: float = Field(
        180.0,
        gt=0,
        description="no decision on a bar older than this (stale data: no trading)",
        examples=[180],
    )
    warmup_bars: int = Field(
        512, ge=64, description="bars of history the online features are computed over", examples=[512]
    )
    request_timeout_seconds: float = Field(
        10.0, gt=0, le=120, description="timeout of every HTTP request to Alpaca, seconds", examples=[10]
    )
    cancel_open_on_stop: bool = Field(
        True, description="the kill switch also cancels open orders", examples=[True]
    )
