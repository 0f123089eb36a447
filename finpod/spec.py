"""Strategy specs: one TOML file says what to trade, on which data, how to train and how to select.

A spec is a tree of pydantic models with ``extra="forbid"``: every key is known, every default lives
here (documented on its field), and every mistake becomes ONE line naming the file, the field and the
fix, e.g. ``strategies/x.toml: env.fee_rate: must be >= 0 (got -0.1); fix: fee per trade as a
fraction of traded notional, e.g. 0.002``.

A relative path inside a spec file (``data.path``) is resolved against that file's folder, so a spec
runs the same from any working folder; a spec built in code resolves it against the current folder.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import itertools
import json
import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import tomli_w
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from finpod.errors import SpecError
from podracer.ppo import MIN_MINIBATCH_SIZE, PPOConfig

DateRange = tuple[dt.date, dt.date]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, raw: Any) -> Any:
        """``seed = true`` or ``seed = "3"`` is a typo, not the number 1 or 3: scalars keep their type."""
        if not isinstance(raw, Mapping):
            return raw
        for name, field in cls.model_fields.items():
            if name not in raw or field.annotation not in _SCALAR_KINDS:
                continue
            value = raw[name]
            kind = _SCALAR_KINDS[field.annotation]
            if field.annotation is bool:
                ok = isinstance(value, bool)
            elif field.annotation is int:
                ok = isinstance(value, int) and not isinstance(value, bool)
            else:
                ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok:
                raise ValueError(
                    f"{name}: must be {kind}, got {json.dumps(value, default=str)}; fix: write {kind}"
                )
        return raw


_SCALAR_KINDS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false"}


class SyntheticSpec(_Model):
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
    signal: Literal["none", "reversal", "momentum"] = Field(
        "none",
        description='planted observable signal: "none", "reversal" or "momentum" (finpod.data.synth)',
        examples=["reversal"],
    )
    signal_strength: float = Field(
        0.0,
        ge=0.0,
        le=0.9,
        description="|AR(1) coefficient| of cross-sectionally demeaned bar returns (0 = no signal)",
        examples=[0.1],
    )
    alpha_annual: float = Field(
        0.10,
        gt=-1.0,
        lt=1.0,
        description="drift alpha of symbols 0 mod 4 (drag of 1 mod 4), log a year; 0 = off",
        examples=[0.1],
    )


class DataSpec(_Model):
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


class SegmentsSpec(_Model):
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


class EnvSpec(_Model):
    """Trading-env settings (``finpod.env.EnvConfig``) plus the number of parallel training envs."""

    initial_cash_usd: float = Field(
        1_000_000.0, gt=0, allow_inf_nan=False, description="starting capital in USD", examples=[1_000_000]
    )
    fee_rate: float = Field(
        0.002, ge=0, lt=1, description="fee per trade as a fraction of traded notional", examples=[0.002]
    )
    half_spread_bps: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="slippage: half the bid-ask spread in basis points",
        examples=[1.0],
    )
    max_participation: float = Field(
        1.0,
        gt=0,
        description="cap on the traded fraction of a bar's volume (inf = no cap)",
        examples=[0.1],
    )
    action_mode: Literal["weights", "share_delta"] = Field(
        "weights",
        description='"weights" (target weights over cash + assets) or "share_delta" (ElegantRL share deltas)',
        examples=["weights"],
    )
    max_shares: float = Field(
        100.0,
        gt=0,
        allow_inf_nan=False,
        description="shares per unit action in action_mode = 'share_delta'",
        examples=[100],
    )
    fill: Literal["next_open", "next_close"] = Field(
        "next_open", description='fill price of an order: "next_open" or "next_close"', examples=["next_open"]
    )
    reward: Literal["log_return", "pnl", "risk_penalised", "excess_log_return"] = Field(
        "log_return",
        description='"log_return", "pnl" (reference-compatible), "risk_penalised" or "excess_log_return" '
        "(log return minus the equal-weight basket's)",
        examples=["log_return"],
    )
    reward_scale: float = Field(
        100.0, gt=0, allow_inf_nan=False, description="multiplier on the reward", examples=[100]
    )
    risk_penalty: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="weight of the squared-return penalty (reward = risk_penalised)",
        examples=[0.1],
    )
    horizon_bars: int = Field(
        250,
        ge=2,
        description="training episode length in bars (random starts in the train segment)",
        examples=[250],
    )
    whole_shares: bool = Field(False, description="trade whole shares only", examples=[False])
    rebalance_band: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="no-trade band (weights mode): assets within this fraction of equity of their target "
        "weight are not traded that step (0 = trade every step)",
        examples=[0.03],
    )
    num_envs: int = Field(64, ge=1, description="parallel training envs per pod (the batch N)", examples=[64])


class TournamentSpec(_Model):
    """podracer tournament settings (``podracer.TournamentConfig``), the ensemble size, and where pods run."""

    PLACEMENT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"backend", "address", "cpus_per_pod", "gpus_per_pod"}
    )
    """Fields that say where pods train, not what: left out of the spec hash and the TournamentConfig."""
    AGENT_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"ensemble_k", "learners", "validation_chunks", "validation_warmup_bars", "cuda_matmul_precision"}
    )
    """Fields finpod applies itself (selection, learner fusion, the validation score, matmul
    precision): left out of the TournamentConfig."""

    pool_size: int = Field(1, ge=1, description="pods training at once", examples=[2])
    leaderboard_size: int = Field(4, ge=1, description="snapshots kept on the leaderboard", examples=[4])
    budget_env_steps: int = Field(
        200_000, ge=1, description="total env transitions over all pods", examples=[200_000]
    )
    budget_seconds: float = Field(
        3600.0, gt=0, description="wall-time budget of the tournament in seconds", examples=[600]
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
        "(1+s)^u, entropy_coef + s*(max-min)*u, u ~ U(-1, 1)",
        examples=[0.2],
    )
    perturb_bounds: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="[min, max] of perturbed agent fields, replacing podracer's PPOConfig.PERTURBABLE bounds",
        examples=[{"gamma": [0.95, 0.999], "learning_rate": [1e-4, 1e-3]}],
    )
    resample_prob: float = Field(
        0.0,
        ge=0,
        le=1,
        description="per-field chance that a child draws a hyper-parameter afresh from its perturb_bounds "
        "(log-uniform; gamma and lambda as 1-x) instead of stepping it; when > 0, new pods from scratch "
        "after the first draw every field there; escapes a start far from good values",
        examples=[0.25],
    )
    softmax_temperature: float = Field(
        1.0, gt=0, description="temperature of the rank-softmax that picks a parent", examples=[1.0]
    )
    eval_every_rounds: int = Field(
        1, ge=1, description="validation-score a pod every this many training rounds", examples=[1]
    )
    pool_schedule: Literal["fixed", "halving"] = Field(
        "halving",
        description='"halving": successive halving, the pool halves as the budget is spent and the worst '
        'pods retire; "fixed": pool_size pods throughout',
        examples=["halving"],
    )
    lagging_rounds: int = Field(
        2, ge=1, description="rounds a pod trains before it may be judged lagging", examples=[2]
    )
    lag_margin: float = Field(
        0.1,
        ge=0,
        description="a pod lags (and is re-seeded from a better live pod) when its smoothed validation "
        "Sharpe is below the other live pods' median by more than this",
        examples=[0.1],
    )
    score_smoothing: float = Field(
        0.5, gt=0, le=1, description="weight of the newest score in a pod's moving average", examples=[0.5]
    )
    torch_threads_per_pod: int = Field(
        1,
        ge=1,
        description="torch threads per training pod (results on CPU depend on it; run.json records it)",
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
        1,
        ge=1,
        le=4096,
        description="score validation as up to this many contiguous chunks of the segment traded side "
        "by side in one batched env, each warmed up on the validation_warmup_bars before it, their "
        "returns stitched: about this many times fewer sequential steps, an approximation of the "
        "continuous pass (1 = one continuous pass, exact; backtests are always continuous)",
        examples=[64],
    )
    validation_warmup_bars: int = Field(
        390,
        ge=0,
        description="unscored bars each validation chunk but the first trades before its own "
        "(validation_chunks > 1), so its portfolio is the policy's, not all cash",
        examples=[390],
    )
    backend: Literal["local", "ray"] = Field(
        "local",
        description='where pods train: "local" (threads in this process) or "ray" (Ray actors; pool_size '
        "then caps the pool, which follows the cluster's CPUs/GPUs)",
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

    learners: int = Field(
        1,
        ge=1,
        le=64,
        description="learners per pod, each with its own envs, whose parameters and Adam moments are "
        "averaged after every epoch over torch.distributed (1 = no fusion)",
        examples=[2],
    )

    @model_validator(mode="after")
    def _address_needs_ray(self) -> TournamentSpec:
        if self.address is not None and self.backend != "ray":
            raise ValueError(
                f"tournament.address: {self.address!r} is set but backend is {self.backend!r}; "
                'fix: set backend = "ray" or remove address'
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


class PaperSpec(_Model):
    """Paper-trading limits (``finpod paper``); the defaults are deliberately small and safe.

    Deployment settings only: they do not change what a run trains, so they are left out of
    :meth:`Spec.spec_hash` (editing them never starts a new run).
    """

    trader: Literal["best", "ensemble"] = Field(
        "best", description='which selected trader to deploy: "best" or "ensemble"', examples=["best"]
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


class Spec(_Model):
    """A strategy: data, universe, segments, env, agent, tournament, seed and device.

    Build it with :meth:`from_toml` or :meth:`from_dict`; change it with :meth:`with_`.
    """

    name: str = Field(
        description="short name used in run ids (letters, digits, - and _)",
        examples=["demo"],
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
    )
    description: str = Field("", description="free text shown in the report", examples=["my strategy"])
    seed: int = Field(0, ge=0, description="seed of the tournament and every pod", examples=[0])
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description='"auto" (cuda when available), "cpu" or "cuda"', examples=["auto"]
    )
    frequency: Literal["1min", "1d"] = Field(description='bar size: "1min" or "1d"', examples=["1d"])
    universe: Literal["all", "nasdaq100"] | list[str] = Field(
        "all",
        description='"all" (every symbol of the dataset), "nasdaq100" (point-in-time members) or a '
        "list of tickers",
        examples=["nasdaq100"],
    )
    benchmark_symbol: str = Field(
        "QQQ",
        description='market ETF used as baseline and for alpha/beta when the dataset has it ("" for none)',
        examples=["QQQ"],
    )
    data: DataSpec = Field(default_factory=DataSpec)  # type: ignore[arg-type]
    segments: SegmentsSpec
    env: EnvSpec = Field(default_factory=EnvSpec)  # type: ignore[arg-type]
    agent: dict[str, Any] = Field(
        default_factory=dict,
        description="PPO hyper-parameters: any field of podracer.ppo.PPOConfig",
        examples=[{"learning_rate": 3e-4}],
    )
    tournament: TournamentSpec = Field(default_factory=TournamentSpec)  # type: ignore[arg-type]
    paper: PaperSpec = Field(default_factory=PaperSpec)  # type: ignore[arg-type]
    _source: Path | None = PrivateAttr(None)

    @field_validator("universe")
    @classmethod
    def _tickers(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            if not value:
                raise ValueError("empty ticker list; fix: list tickers like ['AAPL', 'MSFT'] or use 'all'")
            bad = [t for t in value if not t or t != t.strip() or t.upper() != t]
            if bad:
                raise ValueError(f"bad tickers {bad}; fix: upper-case tickers without spaces, e.g. 'AAPL'")
            if len(set(value)) != len(value):
                raise ValueError("duplicate tickers; fix: list each ticker once")
        return value

    @field_validator("agent")
    @classmethod
    def _agent_fields(cls, value: dict[str, Any]) -> dict[str, Any]:
        ppo_config_from(value)
        return value

    @model_validator(mode="after")
    def _round_fills_minibatches(self) -> Spec:
        """A PPO round of ``rollout_steps x num_envs`` transitions must fill every minibatch."""
        config = ppo_config_from(self.agent)
        batch = config.rollout_steps * self.env.num_envs
        if batch < MIN_MINIBATCH_SIZE * config.num_minibatches:
            most = batch // MIN_MINIBATCH_SIZE
            lower = f", or lower agent.num_minibatches to <= {most}" if most >= 1 else ""
            raise ValueError(
                f"agent.num_minibatches: a round of rollout_steps {config.rollout_steps} x env.num_envs "
                f"{self.env.num_envs} = {batch} transitions cannot fill {config.num_minibatches} "
                f"minibatches of at least {MIN_MINIBATCH_SIZE}; fix: raise agent.rollout_steps or "
                f"env.num_envs{lower}"
            )
        return self

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_toml(cls, path: str | Path) -> Spec:
        """Load and validate a spec file.

        Raises:
            SpecError: missing file, bad TOML or an invalid field (one line, field and fix).
        """
        file = Path(path).expanduser().resolve()
        if not file.is_file():
            raise SpecError(f"{path}: spec file not found; fix: pass a path like strategies/demo.toml")
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise SpecError(
                f"{path}: not UTF-8 text (byte {err.start}: {err.reason}); fix: save the spec as UTF-8"
            ) from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise SpecError(f"{path}: not valid TOML ({err}); fix: correct the syntax there") from None
        return cls.from_dict(raw, source=file)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: Path | None = None) -> Spec:
        """Validate a spec given as nested dicts (as TOML would load); ``source`` names the file.

        Raises:
            SpecError: an invalid field (one line, field and fix).
        """
        try:
            spec = cls.model_validate(dict(raw))
        except ValidationError as err:
            raise SpecError(_one_line(err, source)) from None
        spec._source = source
        return spec

    def with_(self, **sections: Any) -> Spec:
        """A copy with some fields replaced; dict values are merged into that section.

        Example: ``spec.with_(tournament={"budget_env_steps": 10_000}, seed=3)``.
        """
        merged = _deep_merge(self.model_dump(mode="json"), sections)
        return Spec.from_dict(merged, source=self.source)

    # ------------------------------------------------------------------ resolution

    @property
    def source(self) -> Path | None:
        """The spec file this spec was loaded from, or ``None`` for a spec built in code."""
        return self._source

    def dataset_path(self, *, must_exist: bool = True) -> Path:
        """The dataset folder for ``data.source = "dataset"``, absolute (and checked).

        A relative ``data.path`` is taken from the spec file's folder (from the current folder for a
        spec built in code), never from where finpod is installed.

        Raises:
            SpecError: not a dataset spec, or (``must_exist``) the folder does not exist.
        """
        if self.data.source != "dataset" or self.data.path is None:
            raise SpecError(
                "data.path: this spec uses the synthetic market; fix: set data.source = 'dataset'"
            )
        given = Path(self.data.path).expanduser()
        base = self.source.parent if self.source is not None else Path.cwd()
        folder = (given if given.is_absolute() else base / given).resolve()
        if must_exist and not folder.is_dir():
            relative = "" if given.is_absolute() else f" ({self.data.path!r} from {base})"
            raise SpecError(
                f"{self._where()}data.path: dataset folder not found: {folder}{relative}; fix: create it "
                "with `finpod data import` or `finpod data fetch`, or correct the path (relative to "
                "the spec file's folder)"
            )
        return folder

    def resolve_device(self) -> str:
        """``"cpu"`` or ``"cuda"``: ``auto`` picks cuda when torch sees a GPU.

        Raises:
            SpecError: ``device = "cuda"`` but torch sees no GPU.
        """
        import torch

        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        if self.device == "cuda" and not torch.cuda.is_available():
            raise SpecError(f'{self._where()}device: "cuda" but torch sees no GPU; fix: set device = "auto"')
        return self.device

    def resolved_dict(self) -> dict[str, Any]:
        """The spec with every default written out (agent: all PPOConfig fields), JSON-friendly.

        A dataset path is made absolute (whether or not it exists yet) so a run folder can be
        re-run from anywhere.
        """
        out = self.model_dump(mode="json")
        out["agent"] = ppo_config_from(self.agent).to_dict()
        if self.data.source == "dataset":
            out["data"]["path"] = str(self.dataset_path(must_exist=False))
        return out

    def spec_hash(self) -> str:
        """Eight hex digits of the resolved spec's sha256 (identifies a spec in run ids).

        The ``[paper]`` section is left out: deployment limits do not change what a run trains; so are
        the tournament's placement fields (:attr:`TournamentSpec.PLACEMENT_FIELDS`): a run started on
        one backend resumes on another.
        """
        trained = {k: v for k, v in self.resolved_dict().items() if k != "paper"}
        trained["tournament"] = {
            k: v for k, v in trained["tournament"].items() if k not in TournamentSpec.PLACEMENT_FIELDS
        }
        text = json.dumps(trained, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def to_toml(self) -> str:
        """The resolved spec as TOML text (what a run saves as ``spec.toml``).

        TOML has no null: a ``None`` setting (e.g. ``agent.target_kl``, ``data.path`` of a
        synthetic spec) is left out, and loads back as its ``None`` default.
        """
        return tomli_w.dumps(_drop_none(self.resolved_dict()))

    def benchmark(self) -> str | None:
        """The market ETF's ticker, or ``None`` when ``benchmark_symbol`` is empty."""
        return self.benchmark_symbol or None

    def _where(self) -> str:
        return f"{self.source}: " if self.source else ""


AGENT_DEFAULTS: dict[str, Any] = {"policy": "cross_sectional"}
"""finpod's defaults for ``[agent]`` fields where podracer's domain-free default does not suit a
portfolio: the cross-sectional policy (one shared per-asset encoder; the flat MLP learned nothing on
the planted-signal market in 55k steps, see BENCHMARKS.md "Skill"). ``policy = "mlp"`` still works."""


def ppo_config_from(agent: Mapping[str, Any]) -> PPOConfig:
    """``PPOConfig`` from the ``[agent]`` table over :data:`AGENT_DEFAULTS`, with unknown keys and bad
    values as one-line errors.

    Raises:
        ValueError: an unknown key or a value PPOConfig rejects (pydantic turns it into a SpecError).
    """
    known = {f.name for f in dataclasses.fields(PPOConfig)}
    unknown = sorted(set(agent) - known)
    if unknown:
        raise ValueError(f"unknown PPO setting {unknown[0]!r}; fix: use one of {', '.join(sorted(known))}")
    for name, value in agent.items():
        _check_agent_type(name, value)
    try:
        return PPOConfig.from_dict({**AGENT_DEFAULTS, **agent})
    except (TypeError, ValueError) as err:
        named = re.match(r"PPOConfig\.(\w+) (.*)", str(err))
        if named is None:
            raise ValueError(f"{err}; fix: see podracer.ppo.PPOConfig for valid values") from None
        field, problem = named.groups()
        raise ValueError(f"agent.{field}: {problem}; fix: change agent.{field} to satisfy that") from None


def _check_agent_type(name: str, value: Any) -> None:
    """An ``[agent]`` value has its PPOConfig field's type (no ``true`` for 1, no ``2.5`` for 2).

    Raises:
        ValueError: the value has the wrong type (pydantic turns it into a SpecError).
    """
    default = next(f.default for f in dataclasses.fields(PPOConfig) if f.name == name)
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, kind = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float) or default is None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        ok, kind = number and math.isfinite(value), "a finite number"
    elif isinstance(default, str):
        ok, kind = isinstance(value, str), "a string"
    else:  # hidden_sizes: a list of widths
        ok = isinstance(value, list | tuple) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        )
        kind = "a list of integers, e.g. [64, 64]"
    if not ok:
        raise ValueError(f"agent.{name}: must be {kind}, got {value!r}; fix: write {kind}")


def _one_line(err: ValidationError, source: Path | None) -> str:
    """The first validation problem as ``file: field.path: problem (got X); fix: ...``."""
    first = err.errors()[0]
    path = tuple(p for p in first["loc"] if isinstance(p, str) and "[" not in p)
    loc = ".".join(path)
    where = f"{source}: " if source else ""
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        parent = _model_at(path[:-1])
        known = ", ".join(parent.model_fields) if parent else "see the docs"
        return f"{where}{loc}: unknown field; fix: remove it or use one of: {known}"
    if first["type"] == "missing":
        return f"{where}{loc}: required field missing; fix: {_fix(path)}"
    if "fix:" in msg:  # our own validators: the message names the fix (and maybe the field)
        field_prefix = "" if not loc or msg.startswith(loc) else f"{loc}: "
        section = _model_at(path)
        if loc and section is not None and msg.split(":", 1)[0] in section.model_fields:
            field_prefix = f"{loc}."  # a section's own check names its field: env.horizon_bars: ...
        return f"{where}{field_prefix}{msg}"
    got = first.get("input")
    return f"{where}{loc}: {_short(msg)} (got {got!r}); fix: {_fix(path)}"


def _short(msg: str) -> str:
    return msg.replace("Input should be ", "must be ").replace("Input ", "value ")


def _model_at(loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The pydantic model class addressed by a location path inside :class:`Spec`."""
    model: type[BaseModel] = Spec
    for part in loc:
        field = model.model_fields.get(part)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _fix(names: tuple[str, ...]) -> str:
    """``set <field> (<description>), e.g. <example>`` for the field at ``names``."""
    parent = _model_at(tuple(names[:-1])) if names else None
    field = parent.model_fields.get(names[-1]) if parent and names else None
    if field is None:
        return "see strategies/README.md for the spec format"
    example = f", e.g. {json.dumps(field.examples[0])}" if field.examples else ""
    return f"set {'.'.join(names)} ({field.description}){example}"


def _drop_none(tree: dict[str, Any]) -> dict[str, Any]:
    return {k: _drop_none(v) if isinstance(v, dict) else v for k, v in tree.items() if v is not None}


def _deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out
