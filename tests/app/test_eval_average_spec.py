"""``[agent] eval_average``: off unless a spec asks, a spec's own value, bad values as one line with a fix."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from agent_table import DEMO, demo_with_agent

from finpod.errors import SpecError
from finpod.spec import AGENT_DEFAULTS, Spec


def test_a_silent_spec_evaluates_the_current_weights_and_a_spec_may_average(tmp_path: Path) -> None:
    raw = tomllib.loads(DEMO.read_text(encoding="utf-8"))
    assert "eval_average" not in raw.get("agent", {})
    assert "eval_average" not in AGENT_DEFAULTS
    assert Spec.from_toml(DEMO).agent_config().eval_average == 0.0
    assert Spec.from_toml(demo_with_agent(tmp_path, eval_average=0.9)).agent_config().eval_average == 0.9


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "agent.eval_average: must be in [0, 1), got 1.0; fix: set agent.eval_average to a decay"),
        (-0.5, "agent.eval_average: must be in [0, 1), got -0.5; fix:"),
        ("slow", "agent.eval_average: must be a finite number"),
    ],
)
def test_a_bad_eval_average_is_one_line_with_a_fix(value: Any, expected: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        Spec.from_toml(demo_with_agent(tmp_path, eval_average=value))
    message = str(caught.value)
    assert "\n" not in message
    assert expected in message
    assert "fix:" in message
