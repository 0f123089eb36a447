"""``[agent] h_term_coef`` and ``h_term_trajectories``: parsed into PPOConfig, bad values one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agent_table import DEMO, demo_with_agent

from finpod.errors import SpecError
from finpod.spec import Spec


def test_h_term_settings_reach_the_agent(tmp_path: Path) -> None:
    spec = Spec.from_toml(demo_with_agent(tmp_path, h_term_coef=0.125, h_term_trajectories=16))
    config = spec.agent_config()
    assert (config.h_term_coef, config.h_term_trajectories) == (0.125, 16)
    assert Spec.from_toml(DEMO).agent_config().h_term_coef == 0.0  # off unless asked


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        (
            {"h_term_coef": -0.5},
            "agent.h_term_coef: must be in >= 0.0, got -0.5; fix: set agent.h_term_coef to 0",
        ),
        ({"h_term_coef": "high"}, "agent.h_term_coef: must be a finite number"),
        ({"h_term_trajectories": 0}, "agent.h_term_trajectories: must be >= 1, got 0; fix: set"),
        ({"h_term_trajectories": 8.5}, "agent.h_term_trajectories: must be an integer"),
    ],
)
def test_bad_h_term_settings_are_one_line_with_a_fix(
    agent: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    path = demo_with_agent(tmp_path, **agent)
    with pytest.raises(SpecError) as caught:
        Spec.from_toml(path)
    message = str(caught.value)
    assert "\n" not in message
    assert expected in message
    assert "fix:" in message
