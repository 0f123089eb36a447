"""Every setting's default is defined once: a spec section's default for a field of the dataclass it
configures (``[env]``: ``EnvConfig``, ``[tournament]``: podracer's ``TournamentConfig``, ``[agent]``:
podracer's ``PPOConfig``) is that dataclass's default. The only exceptions are finpod's own
defaults over the domain-free engine's, each listed once: ``TOURNAMENT_DEFAULTS`` and
``AGENT_DEFAULTS``, and over those the minute-bar ones, ``INTRADAY_TOURNAMENT_DEFAULTS``,
``INTRADAY_AGENT_DEFAULTS`` and ``INTRADAY_ENV_DEFAULTS``.
"""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

import pytest
from pydantic import BaseModel

from finpod.env.config import EnvConfig
from finpod.spec import AGENT_DEFAULTS, EnvSpec, Spec, TournamentSpec
from finpod.spec.agent import INTRADAY_AGENT_DEFAULTS, SCORE_FUNCTION_LEARNING_RATE
from finpod.spec.sections import INTRADAY_ENV_DEFAULTS, INTRADAY_TOURNAMENT_DEFAULTS, TOURNAMENT_DEFAULTS
from podracer.api import PPOConfig, TournamentConfig

SECTIONS: list[tuple[type[BaseModel], type[Any], dict[str, Any], frozenset[str]]] = [
    (EnvSpec, EnvConfig, {}, EnvSpec.BATCH_FIELDS),
    (
        TournamentSpec,
        TournamentConfig,
        TOURNAMENT_DEFAULTS,
        TournamentSpec.AGENT_FIELDS | TournamentSpec.PLACEMENT_FIELDS,
    ),
]
SEGMENTS = {"train": ["2016-01-04", "2016-12-30"], "validation": ["2017-01-03", "2017-06-30"]}
SEGMENTS |= {"backtest": ["2017-07-03", "2017-12-29"]}


def _dataclass_defaults(config: type[Any]) -> dict[str, Any]:
    """``{field: default}`` of the fields of ``config`` that have one."""
    defaults = {}
    for field in dataclasses.fields(config):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return defaults


def _spec_default(section: type[BaseModel], name: str) -> Any:
    return section.model_fields[name].get_default(call_default_factory=True)


@pytest.mark.parametrize(("section", "config", "own", "finpod_only"), SECTIONS)
def test_a_section_s_defaults_are_its_dataclass_s(
    section: type[BaseModel], config: type[Any], own: dict[str, Any], finpod_only: frozenset[str]
) -> None:
    fields = {field.name for field in dataclasses.fields(config)}
    assert set(section.model_fields) - finpod_only <= fields  # every other setting reaches the dataclass
    dataclass_defaults = _dataclass_defaults(config)
    shared = (set(section.model_fields) - finpod_only) & set(dataclass_defaults)
    assert shared
    expected = {name: own.get(name, dataclass_defaults[name]) for name in shared}
    differing = {
        name: f"{_spec_default(section, name)!r}, expected {expected[name]!r}"
        for name in sorted(shared)
        if _spec_default(section, name) != expected[name]
    }
    assert differing == {}, f"{section.__name__} defaults defined a second time: {differing}"
    required = fields - set(dataclass_defaults)
    for name, value in own.items():  # finpod's own defaults: on the section, and really its own
        assert name in shared or name in required
        assert _spec_default(section, name) == value, f"{name}: the section does not read its default"
        if name in shared:
            assert value != dataclass_defaults[name], f"{name}: {value!r} is the engine's default already"


def test_the_env_default_horizon_is_the_one_users_have_seen() -> None:
    assert EnvConfig().horizon_bars == _spec_default(EnvSpec, "horizon_bars") == 250


def test_the_agent_table_s_defaults_are_ppo_config_s_and_finpod_s_own() -> None:
    spec = Spec.from_dict({"name": "defaults", "frequency": "1d", "segments": SEGMENTS})
    config = spec.agent_config()
    defaults = _dataclass_defaults(PPOConfig)
    assert dataclasses.asdict(config) == dataclasses.asdict(PPOConfig(**{**defaults, **AGENT_DEFAULTS}))
    for name, value in AGENT_DEFAULTS.items():
        assert value != defaults[name], f"{name}: {value!r} is the engine's default already"


def test_a_spec_of_defaults_builds_the_dataclasses_defaults() -> None:
    spec = Spec.from_dict({"name": "defaults", "frequency": "1d", "segments": SEGMENTS})
    assert spec.env_config(random_start=True) == EnvConfig(random_start=True)
    assert spec.env_config(random_start=False) == EnvConfig(random_start=False)
    tournament = spec.tournament_config()
    required = {f.name for f in dataclasses.fields(TournamentConfig)} - set(
        _dataclass_defaults(TournamentConfig)
    )
    given = {name: getattr(tournament, name) for name in required}
    assert tournament == TournamentConfig(**{**given, **TOURNAMENT_DEFAULTS})


def test_a_spec_of_minute_bars_gets_the_intraday_defaults_over_finpod_s() -> None:
    daily = Spec.from_dict({"name": "daily", "frequency": "1d", "segments": SEGMENTS})
    minute = Spec.from_dict({"name": "minute", "frequency": "1min", "segments": SEGMENTS})
    expected_agent = {
        **dataclasses.asdict(daily.agent_config()),
        **INTRADAY_AGENT_DEFAULTS,
        "learning_rate": SCORE_FUNCTION_LEARNING_RATE,  # no pathwise term on minute bars
    }
    assert dataclasses.asdict(minute.agent_config()) == expected_agent
    assert minute.resolved_dict()["agent"]["gamma"] == INTRADAY_AGENT_DEFAULTS["gamma"]
    assert minute.tournament_config() == dataclasses.replace(
        daily.tournament_config(), **INTRADAY_TOURNAMENT_DEFAULTS
    )
    assert daily.tournament_config().perturb_bounds == TOURNAMENT_DEFAULTS["perturb_bounds"]
    assert minute.env_config(random_start=True) == dataclasses.replace(
        daily.env_config(random_start=True), **INTRADAY_ENV_DEFAULTS
    )
    assert minute.env_config(random_start=False).fully_invested, "validation and backtests keep it"
    assert INTRADAY_ENV_DEFAULTS == {"fully_invested": True}
    assert not EnvConfig().fully_invested, "the engine's env holds cash unless told"


def _minute(**sections: Any) -> Spec:
    return Spec.from_dict({"name": "minute", "frequency": "1min", "segments": SEGMENTS, **sections})


def test_a_minute_spec_holds_cash_where_the_fully_invested_default_does_not_apply() -> None:
    assert _minute(env={"fully_invested": False}).env.fully_invested is False, "stated: kept"
    assert _minute(env={"action_mode": "share_delta"}).env.fully_invested is False
    pathwise = _minute(agent={"pathwise_coef": 1.0, "advantages": "entity"})
    assert pathwise.agent_config().pathwise_coef == 1.0
    assert pathwise.env.fully_invested is False, "the pathwise term differentiates through cash"


def test_with_chooses_the_env_default_again_for_a_new_bar_size_or_agent() -> None:
    daily = Spec.from_dict({"name": "daily", "frequency": "1d", "segments": SEGMENTS})
    assert daily.env.fully_invested is False
    moved = daily.with_(frequency="1min")
    assert moved.env.fully_invested is True
    assert moved.spec_hash() == _minute(name="daily").spec_hash()
    assert moved.with_(frequency="1d").env.fully_invested is False
    pathwise = _minute().with_(agent={"pathwise_coef": 1.0, "advantages": "entity"})
    assert pathwise.env.fully_invested is False, "re-chosen, not refused"
    stated_off = _minute(env={"fully_invested": False}).with_(seed=3)
    assert stated_off.env.fully_invested is False
    stated_on = daily.with_(env={"fully_invested": True}, agent={"pathwise_coef": 0.0})
    assert stated_on.with_(seed=2).env.fully_invested is True, "a daily spec's stated mandate stays"
    again = Spec.from_dict(tomllib.loads(_minute().to_toml()))
    assert again.env.fully_invested is True
    assert again.spec_hash() == _minute().spec_hash()


def test_a_minute_spec_that_states_its_search_or_gamma_keeps_them() -> None:
    stated = Spec.from_dict(
        {
            "name": "minute",
            "frequency": "1min",
            "segments": SEGMENTS,
            "agent": {"gamma": 0.5},
            "tournament": {"perturb_bounds": {}},
        }
    )
    assert stated.agent_config().gamma == 0.5
    assert stated.tournament_config().perturb_bounds == {}
    again = Spec.from_dict(tomllib.loads(stated.to_toml()))
    assert again.spec_hash() == stated.spec_hash()
