"""The whole spec (:class:`Spec`): load, validate, override, hash and save a strategy."""

from __future__ import annotations

import hashlib
import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import tomli_w
from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from finpod.env.config import EnvConfig
from finpod.errors import SpecError
from finpod.spec.agent import agent_defaults, ppo_config_from, uses_pathwise
from finpod.spec.base import Model, default_of
from finpod.spec.merge import deep_merge, drop_none
from finpod.spec.messages import one_line
from finpod.spec.sections import (
    DAILY_VALIDATION_CHUNKS,
    DAILY_VALIDATION_WARMUP_BARS,
    DEFAULT_BUDGET_PASSES,
    INTRADAY_ENV_DEFAULTS,
    INTRADAY_TOURNAMENT_DEFAULTS,
    INTRADAY_VALIDATION_DEFAULTS,
    SCORE_FUNCTION_TOURNAMENT_DEFAULTS,
    TOURNAMENT_DEFAULTS,
    DataSpec,
    EnvSpec,
    PaperSpec,
    SegmentsSpec,
    TournamentSpec,
)
from podracer.api import MIN_MINIBATCH_SIZE, PPOConfig, TournamentConfig


def default_search_defaults(agent: Mapping[str, Any], action_mode: str, frequency: str) -> dict[str, Any]:
    """What a ``[tournament]`` silent on them gets over :data:`~finpod.spec.sections.TOURNAMENT_DEFAULTS`
    for this agent: on minute bars gamma searched near 1
    (:data:`~finpod.spec.sections.INTRADAY_TOURNAMENT_DEFAULTS`); without the pathwise term the
    score-function learning rates (:data:`~finpod.spec.sections.SCORE_FUNCTION_TOURNAMENT_DEFAULTS`);
    else nothing."""
    if frequency == "1min":
        return INTRADAY_TOURNAMENT_DEFAULTS
    if uses_pathwise({**agent_defaults(agent, action_mode, frequency), **agent}):
        return {}
    return SCORE_FUNCTION_TOURNAMENT_DEFAULTS


def _default_bounds(
    agent: Mapping[str, Any], action_mode: str, frequency: str
) -> dict[str, tuple[float, float]]:
    """The ``perturb_bounds`` a ``[tournament]`` silent on them gets for this agent."""
    searched: dict[str, tuple[float, float]] = {
        **TOURNAMENT_DEFAULTS,
        **default_search_defaults(agent, action_mode, frequency),
    }["perturb_bounds"]
    return searched


_VALIDATION_FIELDS: tuple[str, ...] = ("validation_chunks", "validation_warmup_bars")


SAVED_BEFORE_THE_SETTING: dict[str, dict[str, Any]] = {
    "env": {"fully_invested": False},
    "tournament": {"archive_size": 0, "archive_rule": "even"},
    "paper": {"trader": "best"},
}
"""What a saved run's spec (written out in full by :meth:`Spec.to_toml`) trained with when it
predates a setting whose default has changed since: :meth:`Spec.from_saved` reads a missing
``env.fully_invested`` as ``false`` (the only behaviour before the setting existed), not as the
minute default, so a replay or a paper trader of an older run trades as the run was trained; a
missing ``tournament.archive_size`` as 0 (no archive) and a missing ``archive_rule`` as ``"even"``
(the only rule before it), not as today's 32 best-validated rounds, so ``--resume`` finds the run
(its hash) and the report's settings say what it kept; a missing ``paper.trader`` as ``"best"``
(the default before the pick became it), so a paper trader restarted on an older run deploys what
it deployed before."""


def env_defaults(agent: Mapping[str, Any], action_mode: str, frequency: str) -> dict[str, Any]:
    """What an ``[env]`` silent on them gets over :class:`~finpod.env.EnvConfig`'s defaults: on minute
    bars, trading target weights without the pathwise term,
    :data:`~finpod.spec.sections.INTRADAY_ENV_DEFAULTS` (a fully invested book); else nothing."""
    if frequency != "1min" or action_mode != "weights":
        return {}
    if uses_pathwise({**agent_defaults(agent, action_mode, frequency), **agent}):
        return {}
    return dict(INTRADAY_ENV_DEFAULTS)


def _validation_defaults(frequency: str) -> dict[str, int]:
    """The validation chunks a ``[tournament]`` silent on them gets on bars of ``frequency``."""
    if frequency == "1min":
        return {name: INTRADAY_VALIDATION_DEFAULTS[name] for name in _VALIDATION_FIELDS}
    return {
        "validation_chunks": DAILY_VALIDATION_CHUNKS,
        "validation_warmup_bars": DAILY_VALIDATION_WARMUP_BARS,
    }


class Spec(Model):
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

    @model_validator(mode="before")
    @classmethod
    def _search_space(cls, raw: Any) -> Any:
        """A ``[tournament]`` silent on ``perturb_bounds`` searches around the agent it trains
        (:func:`default_search_defaults`); on minute bars one silent on the validation chunks scores
        in one continuous pass (:data:`~finpod.spec.sections.INTRADAY_VALIDATION_DEFAULTS`); one
        silent on both ``budget_env_steps`` and ``budget_passes`` stops after
        :data:`~finpod.spec.sections.DEFAULT_BUDGET_PASSES` passes over its train bars; an ``[env]``
        silent on them gets :func:`env_defaults`."""
        if not isinstance(raw, dict):
            return raw
        tournament, agent, env = (raw.get(key, {}) for key in ("tournament", "agent", "env"))
        if not isinstance(tournament, dict) or not isinstance(agent, dict) or not isinstance(env, dict):
            return raw
        frequency = str(raw.get("frequency", "1d"))
        action_mode = str(env.get("action_mode", "weights"))
        env_missing = {k: v for k, v in env_defaults(agent, action_mode, frequency).items() if k not in env}
        if env_missing:
            raw = {**raw, "env": {**env, **env_missing}}
        defaults = default_search_defaults(agent, action_mode, frequency)
        if frequency == "1min":
            defaults = {**defaults, **INTRADAY_VALIDATION_DEFAULTS}
        if "budget_env_steps" not in tournament:
            defaults = {**defaults, "budget_passes": DEFAULT_BUDGET_PASSES}
        missing = {k: v for k, v in defaults.items() if k not in tournament}
        return {**raw, "tournament": {**tournament, **missing}}

    @model_validator(mode="after")
    def _round_fills_minibatches(self) -> Spec:
        """A PPO round of ``rollout_steps x num_envs`` transitions must fill every minibatch (and the
        agent's advantages suit the env's action mode)."""
        config = ppo_config_from(self.agent, self.env.action_mode, self.frequency)
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
        if self.env.fully_invested and config.pathwise_coef > 0.0:
            raise ValueError(
                "env.fully_invested: the pathwise term differentiates the reward through weights "
                "that include cash, which a fully invested book ignores; fix: set agent.pathwise_coef "
                "= 0, or env.fully_invested = false"
            )
        if config.lr_schedule == "budget" and self.tournament.learners > 1:
            raise ValueError(
                f"agent.lr_schedule: 'budget' decays the learning rate as the tournament's budget is "
                f"spent, which tournament.learners = {self.tournament.learners} (learner fusion) does not "
                "pass to its helper learners; fix: set agent.lr_schedule = 'linear' or 'constant', or "
                "tournament.learners = 1"
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
        if file.is_dir():
            specs = sorted(file.glob("*.toml"))
            example = specs[0] if specs else "strategies/demo.toml"
            raise SpecError(f"{path}: a folder, not a spec file; fix: pass a .toml spec, e.g. {example}")
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
    def from_saved(cls, path: str | Path) -> Spec:
        """Load the resolved spec a run saved (``spec.toml``), reading settings it predates as it
        was trained (:data:`SAVED_BEFORE_THE_SETTING`).

        Raises:
            SpecError: as :meth:`from_toml`.
        """
        spec = cls.from_toml(path)
        raw = tomllib.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        missing = {
            section: {name: value for name, value in settings.items() if name not in raw.get(section, {})}
            for section, settings in SAVED_BEFORE_THE_SETTING.items()
        }
        if not any(missing.values()):
            return spec
        return cls.from_dict(deep_merge(raw, missing), source=spec.source)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: Path | None = None) -> Spec:
        """Validate a spec given as nested dicts (as TOML would load); ``source`` names the file.

        Raises:
            SpecError: an invalid field (one line, field and fix).
        """
        try:
            spec = cls.model_validate(dict(raw))
        except ValidationError as err:
            raise SpecError(one_line(err, source, Spec)) from None
        spec._source = source
        return spec

    def with_(self, **sections: Any) -> Spec:
        """A copy with some fields replaced; dict values are merged into that section.

        Example: ``spec.with_(tournament={"budget_env_steps": 10_000}, seed=3)``.
        """
        dumped = self.model_dump(mode="json")
        # Validation chunks equal to this bar size's defaults are chosen again for a new bar size.
        frequency = sections.get("frequency", self.frequency)
        if frequency != self.frequency and _validation_defaults(self.frequency) == {
            name: dumped["tournament"][name] for name in _VALIDATION_FIELDS
        }:
            for name in _VALIDATION_FIELDS:
                del dumped["tournament"][name]
        # Env settings equal to this spec's env defaults are chosen again for the new bar size, agent
        # and action mode (a daily spec moved to minute bars trades a fully invested book; a minute
        # spec that turns the pathwise term on may hold cash).
        own_env_defaults = env_defaults(self.agent, self.env.action_mode, self.frequency)
        for name in INTRADAY_ENV_DEFAULTS:
            if dumped["env"][name] == own_env_defaults.get(name, default_of(EnvConfig, name)):
                del dumped["env"][name]
        # A pass budget equal to the default gives way to an env-step budget stated now (a spec that
        # states budget_env_steps is taken at its word, in code and by --set as in a file).
        stated_tournament = sections.get("tournament", {})
        if (
            isinstance(stated_tournament, dict)
            and "budget_env_steps" in stated_tournament
            and "budget_passes" not in stated_tournament
            and self.tournament.budget_passes == DEFAULT_BUDGET_PASSES
        ):
            dumped["tournament"]["budget_passes"] = None
        # A search space equal to the default for this spec's agent is chosen again for the new one
        # (a --set that turns the pathwise term off searches the score-function learning rates), and
        # a partial perturb_bounds in ``sections`` is merged into that new default.
        if self.tournament.perturb_bounds == _default_bounds(
            self.agent, self.env.action_mode, self.frequency
        ):
            del dumped["tournament"]["perturb_bounds"]
            merged = deep_merge(dumped, sections)
            tournament, agent, env = (merged.get(key) for key in ("tournament", "agent", "env"))
            # A section replaced by a non-table (``--set tournament=3``) is the validation's error.
            stated = tournament.get("perturb_bounds") if isinstance(tournament, dict) else None
            if isinstance(stated, dict) and isinstance(agent, dict) and isinstance(env, dict):
                fresh = _default_bounds(
                    agent,
                    str(env.get("action_mode", "weights")),
                    str(merged.get("frequency")),
                )
                merged["tournament"]["perturb_bounds"] = {**fresh, **stated}
        else:
            merged = deep_merge(dumped, sections)
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
        relative = "" if given.is_absolute() else f" ({self.data.path!r} from {base})"
        if must_exist and folder.is_file():
            raise SpecError(
                f"{self._where()}data.path: {folder}{relative} is a file, not a dataset folder; fix: "
                "point data.path at the folder `finpod data import|fetch|synth` wrote (it holds "
                "manifest.json and bars.parquet)"
            )
        if must_exist and not folder.is_dir():
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
        out["agent"] = self.agent_config().to_dict()
        if self.data.source == "dataset":
            out["data"]["path"] = str(self.dataset_path(must_exist=False))
        return out

    def spec_hash(self) -> str:
        """Eight hex digits of the resolved spec's sha256 (identifies a spec in run ids).

        The ``[paper]`` section is left out: deployment limits do not change what a run trains; so are
        the tournament's placement fields (:attr:`TournamentSpec.PLACEMENT_FIELDS`): a run started on
        one backend resumes on another; and ``archive_size`` when it is 0 (no archive),
        and ``archive_rule`` without an archive or when it is ``"even"``, so a spec hashes as it did
        before those settings existed and its unfinished runs resume (as are ``env.start_portfolio``
        when it is ``"cash"``, ``env.fully_invested`` when false and ``agent.pathwise_cost`` when 1).
        """
        trained = {k: v for k, v in self.resolved_dict().items() if k != "paper"}
        trained["tournament"] = {
            k: v
            for k, v in trained["tournament"].items()
            if k not in TournamentSpec.PLACEMENT_FIELDS and not (k == "archive_size" and v == 0)
        }
        tournament = trained["tournament"]
        if tournament.get("archive_size", 0) == 0 or tournament["archive_rule"] == "even":
            del tournament["archive_rule"]  # no archive, or the rule before the setting existed
        if trained["env"].get("start_portfolio") == "cash":  # as before the setting existed
            del trained["env"]["start_portfolio"]
        if trained["env"].get("fully_invested") is False:  # as before the setting existed
            del trained["env"]["fully_invested"]
        if trained["agent"].get("pathwise_cost") == 1.0:  # as before the setting existed
            del trained["agent"]["pathwise_cost"]
        text = json.dumps(trained, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:8]

    def to_toml(self) -> str:
        """The resolved spec as TOML text (what a run saves as ``spec.toml``).

        TOML has no null: a ``None`` setting (e.g. ``agent.target_kl``, ``data.path`` of a
        synthetic spec) is left out, and loads back as its ``None`` default.
        """
        return tomli_w.dumps(drop_none(self.resolved_dict()))

    def env_config(self, *, random_start: bool) -> EnvConfig:
        """The ``[env]`` table as the env's settings (``num_envs`` is the batch, not a setting).

        Args:
            random_start: True for training episodes (random starts, ``horizon_bars`` long); False
                for one pass from a segment's first bar (validation, backtest, paper trading).
        """
        settings = self.env.model_dump(exclude={*EnvSpec.BATCH_FIELDS})
        if not random_start:  # one pass over a segment starts in cash, as a deployment does
            settings["start_portfolio"] = "cash"
        return EnvConfig(**settings, random_start=random_start)

    def tournament_config(self, train_bars: int | None = None) -> TournamentConfig:
        """The ``[tournament]`` table (and the spec's seed) as podracer's config; the fields finpod
        applies itself and those that say where pods run are left out, and the env-step budget is
        :meth:`env_step_budget` of the train segment's ``train_bars`` (without them, the spec's
        ``budget_env_steps`` alone: a run and the skill bench pass them)."""
        settings = self.tournament.model_dump(
            exclude={*TournamentSpec.AGENT_FIELDS, *TournamentSpec.PLACEMENT_FIELDS}
        )
        if train_bars is not None:
            settings["budget_env_steps"] = self.env_step_budget(train_bars)
        return TournamentConfig(**settings, seed=self.seed)

    def env_step_budget(self, train_bars: int) -> int:
        """The run's env-step budget on a train segment of ``train_bars`` bars: ``budget_env_steps``,
        or ``budget_passes x train_bars`` (rounded up) where that is smaller.

        Raises:
            SpecError: ``budget_passes`` is set and the train segment has no bar.
        """
        stated = self.tournament.budget_env_steps
        passes = self.tournament.budget_passes
        if passes is None:
            return stated
        if train_bars < 1:
            raise SpecError(
                f"segments.train: {train_bars} bars cannot be passed over "
                f"(tournament.budget_passes = {passes}); fix: widen the train segment"
            )
        return min(stated, max(1, math.ceil(passes * train_bars)))

    def agent_config(self) -> PPOConfig:
        """The ``[agent]`` table over finpod's defaults for the spec's bar size
        (:func:`~finpod.spec.agent.agent_defaults`) as the PPOConfig the first pods start from."""
        return ppo_config_from(self.agent, self.env.action_mode, self.frequency)

    def benchmark(self) -> str | None:
        """The market ETF's ticker, or ``None`` when ``benchmark_symbol`` is empty."""
        return self.benchmark_symbol or None

    def _where(self) -> str:
        return f"{self.source}: " if self.source else ""


def setting_key(dotted: str) -> str:
    """``dotted`` (``"env.fee_rate"``, ``"seed"``), checked to name a setting of :class:`Spec`.

    What reads a resolved spec by key (a run's ``spec.json``, where an old run may lack a newer
    setting) names the setting through here, so a renamed or misspelt key fails at import instead of
    silently reading nothing.

    Raises:
        KeyError: ``dotted`` names no setting of a spec.
    """
    model: type[BaseModel] = Spec
    parts = dotted.split(".")
    for depth, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            raise KeyError(f"{'.'.join(parts[: depth + 1])} is not a spec setting")
        section = field.annotation
        if depth < len(parts) - 1:
            if not (isinstance(section, type) and issubclass(section, BaseModel)):
                raise KeyError(f"{'.'.join(parts[: depth + 1])} is a setting, not a section")
            model = section
    return dotted
