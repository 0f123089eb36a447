"""``[agent] pathwise_coef`` / ``pathwise_risk``: on by default where it applies, the learning rate and
search space that go with it, a spec's own values, bad values as one line with a fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_table import DEMO, assert_refused_in_one_line, demo_with_agent

from finpod.spec import Spec
from finpod.spec.agent import SCORE_FUNCTION_LEARNING_RATE
from finpod.spec.sections import SCORE_FUNCTION_TOURNAMENT_DEFAULTS, TOURNAMENT_DEFAULTS

SEGMENTS = {
    "train": ["2016-01-04", "2017-12-29"],
    "validation": ["2018-01-02", "2018-06-29"],
    "backtest": ["2018-07-02", "2018-12-31"],
}
PATHWISE_SEARCH = TOURNAMENT_DEFAULTS["perturb_bounds"]
SCORE_FUNCTION_SEARCH = SCORE_FUNCTION_TOURNAMENT_DEFAULTS["perturb_bounds"]


def _spec(**sections: Any) -> Spec:
    return Spec.from_dict({"name": "pathwise", "frequency": "1d", "segments": SEGMENTS, **sections})


def test_a_silent_spec_trains_with_the_pathwise_term_at_its_learning_rate_and_search() -> None:
    for spec in (_spec(), Spec.from_toml(DEMO)):
        agent = spec.agent_config()
        assert (agent.pathwise_coef, agent.pathwise_risk, agent.learning_rate) == (1.0, 0.01, 1e-4)
        assert spec.tournament_config().perturb_bounds == PATHWISE_SEARCH


@pytest.mark.parametrize(
    "sections",
    [
        {"agent": {"pathwise_coef": 0.0}},
        {"agent": {"advantages": "joint"}},
        {"agent": {"policy": "mlp"}},
        {"env": {"action_mode": "share_delta"}},
    ],
)
def test_without_the_pathwise_term_the_score_function_rate_and_search_apply(sections: dict[str, Any]) -> None:
    spec = _spec(**sections)
    agent = spec.agent_config()
    assert agent.pathwise_coef == 0.0
    assert agent.learning_rate == SCORE_FUNCTION_LEARNING_RATE
    assert spec.tournament_config().perturb_bounds == SCORE_FUNCTION_SEARCH


def test_minute_bars_keep_the_score_function_agent_and_a_spec_may_turn_it_on() -> None:
    minute = Spec.from_dict({"name": "m", "frequency": "1min", "segments": SEGMENTS})
    assert minute.agent_config().pathwise_coef == 0.0
    assert minute.agent_config().learning_rate == SCORE_FUNCTION_LEARNING_RATE
    on = Spec.from_dict(
        {"name": "m", "frequency": "1min", "segments": SEGMENTS, "agent": {"pathwise_coef": 2.0}}
    )
    assert on.agent_config().pathwise_coef == 2.0
    assert on.agent_config().learning_rate == 1e-4  # the rate that goes with the term


def test_a_set_that_turns_the_term_off_moves_a_default_search_but_not_a_stated_one() -> None:
    off = _spec().with_(agent={"pathwise_coef": 0.0})
    assert off.tournament_config().perturb_bounds == SCORE_FUNCTION_SEARCH
    assert off.with_(agent={"pathwise_coef": 1.0}).tournament_config().perturb_bounds == PATHWISE_SEARCH
    stated = _spec(tournament={"perturb_bounds": {"learning_rate": [1e-5, 1e-4]}})
    kept = stated.with_(agent={"pathwise_coef": 0.0}).tournament_config().perturb_bounds
    assert kept == {"learning_rate": (1e-5, 1e-4)}
    merged = _spec().with_(tournament={"perturb_bounds": {"gamma": [0.5, 0.9]}})
    assert merged.tournament_config().perturb_bounds == {**PATHWISE_SEARCH, "gamma": (0.5, 0.9)}
    both = _spec().with_(agent={"pathwise_coef": 0.0}, tournament={"perturb_bounds": {"gamma": [0.5, 0.9]}})
    assert both.agent_config().learning_rate == SCORE_FUNCTION_LEARNING_RATE
    assert both.tournament_config().perturb_bounds == {**SCORE_FUNCTION_SEARCH, "gamma": (0.5, 0.9)}


def test_a_spec_s_own_values_are_kept(tmp_path: Path) -> None:
    spec = Spec.from_toml(demo_with_agent(tmp_path, pathwise_coef=0.5, pathwise_risk=0.1, learning_rate=3e-4))
    agent = spec.agent_config()
    assert (agent.pathwise_coef, agent.pathwise_risk, agent.learning_rate) == (0.5, 0.1, 3e-4)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (
            {"pathwise_coef": -1.0},
            "agent.pathwise_coef: must be in >= 0.0, got -1.0; fix: set agent.pathwise_coef = 0",
        ),
        (
            {"pathwise_risk": -0.5},
            "agent.pathwise_risk: must be in >= 0.0, got -0.5; fix: set agent.pathwise_risk",
        ),
        ({"pathwise_coef": "on"}, "agent.pathwise_coef: must be a finite number"),
        (
            {"pathwise_coef": 1.0, "advantages": "joint"},
            "agent.pathwise_coef: > 0 needs advantages 'entity', got advantages 'joint'; fix: set "
            "agent.pathwise_coef = 0 (off), or use it with advantages 'entity'",
        ),
    ],
)
def test_a_bad_pathwise_setting_is_one_line_with_a_fix(
    agent: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    assert_refused_in_one_line(tmp_path, agent, expected)


def test_whole_numbers_for_float_fields_reach_the_tournament_as_floats() -> None:
    """``pathwise_risk = 1`` or ``--set agent.gamma=0`` is a TOML integer; a tournament perturbs only
    float fields and would refuse the agent's config at its start."""
    from podracer.pod import check_agent_config

    whole = {"pathwise_risk": 1, "gamma": 0, "learning_rate": 1, "weight_decay": 1}
    config = _spec(agent=whole).agent_config()
    assert isinstance(config.pathwise_risk, float)
    assert isinstance(config.weight_decay, float)
    assert isinstance(config.gamma, float)
    assert isinstance(config.learning_rate, float)
    check_agent_config(config, _spec().tournament_config().perturb_bounds)
    assert _spec(agent={"rollout_steps": 4}).agent_config().rollout_steps == 4  # ints stay ints
