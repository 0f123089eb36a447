"""The ``[agent]`` table: podracer's ``PPOConfig`` over finpod's defaults, with one-line errors."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from podracer.api import PPOConfig

AGENT_DEFAULTS: dict[str, Any] = {"policy": "cross_sectional"}
"""finpod's defaults for ``[agent]`` fields where podracer's domain-free default does not suit a
portfolio: the cross-sectional policy (one shared per-asset encoder; the flat MLP learned nothing on
the planted-signal market in 55k steps, see BENCHMARKS.md "Skill"). ``policy = "mlp"`` still works."""

FIXES: dict[str, str] = {
    "h_term_coef": "set agent.h_term_coef to 0 (H-term off) or a positive weight such as 0.125",
    "h_term_trajectories": "set agent.h_term_trajectories to the trajectories the H-term keeps, e.g. 32",
}
"""The fix a one-line error suggests for fields whose valid values need more than the range."""


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
        fix = FIXES.get(field, f"change agent.{field} to satisfy that")
        raise ValueError(f"agent.{field}: {problem}; fix: {fix}") from None


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
