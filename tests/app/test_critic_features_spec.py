"""``[agent] critic_features``: the actor's context by default where it applies (the cross-sectional
policy on daily bars), the critic's own encoder elsewhere, a spec's own choice kept, bad values as one
line with a fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_table import assert_refused_in_one_line, demo_with_agent

from finpod.spec import Spec

SEGMENTS = {
    "train": ["2016-01-04", "2017-12-29"],
    "validation": ["2018-01-02", "2018-06-29"],
    "backtest": ["2018-07-02", "2018-12-31"],
}


def _spec(frequency: str = "1d", **sections: Any) -> Spec:
    return Spec.from_dict({"name": "critic", "frequency": frequency, "segments": SEGMENTS, **sections})


def test_the_default_critic_reads_the_actor_s_context_on_daily_cross_sections_only() -> None:
    assert _spec().agent_config().critic_features == "actor"
    assert _spec("1min").agent_config().critic_features == "own"
    assert _spec(agent={"policy": "mlp"}).agent_config().critic_features == "own"
    share_delta = _spec(env={"action_mode": "share_delta"}, agent={"policy": "cross_sectional"})
    assert share_delta.agent_config().critic_features == "actor"  # any cross-sectional critic can
    assert _spec().with_(agent={"critic_features": "own"}).agent_config().critic_features == "own"
    stated = _spec("1min", agent={"critic_features": "actor"})
    assert stated.agent_config().critic_features == "actor"


def test_a_spec_s_own_choice_is_kept(tmp_path: Path) -> None:
    spec = Spec.from_toml(demo_with_agent(tmp_path, critic_features="own"))
    assert spec.agent_config().critic_features == "own"
    assert spec.resolved_dict()["agent"]["critic_features"] == "own"


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (
            {"critic_features": "shared"},
            "agent.critic_features: must be 'own' or 'actor', got 'shared'; fix: set "
            "agent.critic_features = 'own'",
        ),
        (
            {"policy": "mlp", "advantages": "joint", "pathwise_coef": 0.0, "critic_features": "actor"},
            "agent.critic_features: 'actor' needs policy 'cross_sectional', got policy 'mlp'; fix: set "
            "agent.critic_features = 'own'",
        ),
    ],
)
def test_a_bad_critic_setting_is_one_line_with_a_fix(
    agent: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    assert_refused_in_one_line(tmp_path, agent, expected)
