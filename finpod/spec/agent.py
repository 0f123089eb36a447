"""The ``[agent]`` table: podracer's ``PPOConfig`` over finpod's defaults, with one-line errors."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from podracer.api import PPOConfig

AGENT_DEFAULTS: dict[str, Any] = {
    "policy": "cross_sectional",
    "advantages": "entity",
    "hidden_sizes": (64, 64),
    "rollout_steps": 8,
    "learning_rate": 1e-4,
    "gamma": 0.0,
    "num_minibatches": 4,
    "pathwise_coef": 1.0,
    "critic_features": "actor",
}
"""finpod's defaults for ``[agent]`` fields where podracer's domain-free defaults do not suit a
portfolio (podracer's: a flat MLP of 512 x 512, one advantage per step, 64-step rollouts, lr 3e-4,
gamma 0.99, 16 minibatches, no pathwise term), so a spec silent on ``[agent]`` learns in minutes
on a laptop CPU:

* the cross-sectional policy (one shared per-asset encoder; the flat MLP learned nothing on the
  planted-signal market in 55k steps, BENCHMARKS.md "Skill"), 64 x 64: at M = 100 it trains at
  about 940 env steps/s a pod on one CPU thread, where 512 x 512 trained at 212;
* per-asset advantages (:mod:`podracer.entity_advantage`; BENCHMARKS.md "Entity advantages":
  a realistic edge learned in about a third of the env steps) and the pathwise term
  (:mod:`podracer.pathwise`, weight 1, tracking-error aversion ``pathwise_risk`` 0.01, which the
  tournament searches in [0.002, 0.02]: the step reward's own gradient through the mode's weights;
  BENCHMARKS.md "The reward's own gradient");
  ``joint`` and no pathwise term where they cannot apply (the ``mlp`` policy, ``share_delta``
  actions, see :func:`ppo_config_from`);
* short rollouts (8 steps) and 4 minibatches: many small updates; gamma 0, as an edge that pays at
  the next bar needs (a step's fee is charged in that step's reward); lr 1e-4 with the pathwise
  term (at 3e-4 a pod's held-out share peaked within 10k env steps and then fell as the network
  fitted the train years' noise), 3e-3 without it (:data:`SCORE_FUNCTION_LEARNING_RATE`). The
  tournament searches the learning rate and gamma around them
  (:data:`finpod.spec.sections.TOURNAMENT_DEFAULTS`);
* a critic that reads the actor's pooled context (``critic_features = "actor"``, gradient stopped)
  instead of encoding every asset a second time: the same learning per env step on the bench's
  tuning seeds, 1.3-1.4x the env steps per second at M = 100 (BENCHMARKS.md "A critic on the
  actor's context"); the ``mlp`` policy and minute bars keep their own critic encoder;
* a constant learning rate (``lr_schedule = "constant"``): ``"budget"`` (decaying to 0 as the
  tournament's env-step budget is spent) raised the held-out pick on 14 of 24 paired skill-bench
  seeds and lowered it on 8 (mean +0.08 Sharpe, not significant), but it follows the env-step budget
  (the wall clock would make runs differ in their last bits), and a spec silent on the tournament
  has a wall budget with a 2M env-step cap it never reaches, where it would barely decay
  (BENCHMARKS.md "A learning rate that decays with the budget");
* evaluation of the current weights (``eval_average`` 0): an average of the last ten rounds'
  weights (0.9) helped on the tuning seeds but lowered the reported seeds' median share from 0.65
  to 0.46 at 120 s, because it lags a policy that is still learning (BENCHMARKS.md "Evaluating the
  average of the weights").

Chosen on the bench's tuning seeds only (``finpod bench skill --first-seed 100``; the reported
seeds are 0-4). ``policy = "mlp"`` and every other PPOConfig value still work."""

SCORE_FUNCTION_LEARNING_RATE = 3e-3
"""The default learning rate of an agent without the pathwise term (``pathwise_coef = 0``, or
``joint`` advantages): PPO's score-function gradients alone, tuned by hand on the bench's old
reversal market."""

INTRADAY_AGENT_DEFAULTS: dict[str, Any] = {"gamma": 0.99, "pathwise_coef": 0.0, "critic_features": "own"}
"""What a spec of minute bars (``frequency = "1min"``) gets over :data:`AGENT_DEFAULTS`: gamma 0.99,
a horizon of about 100 bars, and no pathwise term (it differentiates one bar's reward, and was
measured on daily bars only), so the score-function learning rate (:func:`agent_defaults`; a
minute spec that turns the term on gets the pathwise learning rate). A myopic agent (gamma 0) sees a
purchase's full cost in one bar's reward but only one minute of the position's return: on the skill
bench's minute20 case (0.2 % fee,
1 % band) it stayed in cash or churned (best - equal weight -0.17, +0.03, -1.91 Sharpe on seeds 0-2),
and with gamma 0.99 searched in [0.9, 0.999] it tracked equal weight (+0.03, +0.01, -0.11);
BENCHMARKS.md "Per-asset advantages". The tournament's gamma search moves with it
(:data:`finpod.spec.sections.INTRADAY_TOURNAMENT_DEFAULTS`). Its critic keeps its own encoder
(``critic_features = "own"``): at gamma 0.99 the values carry the GAE, and the actor's context was
measured on daily bars only."""

JOINT_ONLY_FIX = "set agent.advantages = 'joint' (or policy 'cross_sectional' with env.action_mode 'weights')"

FIXES: dict[str, str] = {
    "advantages": JOINT_ONLY_FIX,
    "h_term_coef": "set agent.h_term_coef to 0 (H-term off) or a positive weight such as 0.125",
    "h_term_trajectories": "set agent.h_term_trajectories to the trajectories the H-term keeps, e.g. 32",
    "eval_average": "set agent.eval_average to a decay per round in [0, 1), e.g. 0.9 (0: no average)",
    "pathwise_coef": "set agent.pathwise_coef = 0 (off), or use it with advantages 'entity' (policy "
    "'cross_sectional', env.action_mode 'weights')",
    "pathwise_risk": "set agent.pathwise_risk to a tracking-error aversion >= 0, e.g. 0.01",
    "pathwise_cost": "set agent.pathwise_cost to an aversion to rotating the book >= 0, e.g. 1 (the cost "
    "the env charges) or 3",
    "forecast_coef": "set agent.forecast_coef = 0 (off), or use it with advantages 'entity' (policy "
    "'cross_sectional', env.action_mode 'weights')",
    "weight_decay": "set agent.weight_decay to a decay >= 0 relative to the learning rate, e.g. 1.0 "
    "(0: plain Adam)",
    "obs_noise": "set agent.obs_noise to a noise standard deviation >= 0 in normalised feature units, "
    "e.g. 0.3 (0: off)",
    "critic_features": "set agent.critic_features = 'own' (the critic's own encoder) or 'actor' (the "
    "actor's pooled context; policy 'cross_sectional' only)",
}
"""The fix a one-line error suggests for fields whose valid values need more than the range."""


def agent_defaults(
    agent: Mapping[str, Any], action_mode: str = "weights", frequency: str = "1d"
) -> dict[str, Any]:
    """:data:`AGENT_DEFAULTS` for an ``[agent]`` table: per-asset advantages and the pathwise term
    only where they apply (the cross-sectional policy trading target weights), else ``advantages =
    "joint"`` and ``pathwise_coef = 0``; the critic on the actor's context only for the
    cross-sectional policy; without the pathwise term the learning rate
    :data:`SCORE_FUNCTION_LEARNING_RATE`; on minute bars (``frequency = "1min"``) with
    :data:`INTRADAY_AGENT_DEFAULTS` over them."""
    defaults = dict(AGENT_DEFAULTS)
    if frequency == "1min":
        defaults |= INTRADAY_AGENT_DEFAULTS
    policy = agent.get("policy", defaults["policy"])
    if policy != "cross_sectional":
        defaults["critic_features"] = "own"
    if policy != "cross_sectional" or action_mode != "weights":
        defaults["advantages"] = "joint"
    if agent.get("advantages", defaults["advantages"]) != "entity":
        defaults["pathwise_coef"] = 0.0
    pathwise = uses_pathwise({**defaults, **agent})
    defaults["learning_rate"] = AGENT_DEFAULTS["learning_rate"] if pathwise else SCORE_FUNCTION_LEARNING_RATE
    return defaults


def uses_pathwise(agent: Mapping[str, Any]) -> bool:
    """Whether a complete ``[agent]`` table (defaults included) trains with the pathwise term."""
    coef = agent.get("pathwise_coef", 0.0)
    return isinstance(coef, int | float) and not isinstance(coef, bool) and coef > 0.0


def ppo_config_from(
    agent: Mapping[str, Any], action_mode: str = "weights", frequency: str = "1d"
) -> PPOConfig:
    """``PPOConfig`` from the ``[agent]`` table over :func:`agent_defaults`, with unknown keys and bad
    values as one-line errors.

    Args:
        agent: the ``[agent]`` table.
        action_mode: the env's ``action_mode``; per-asset advantages need ``"weights"``.
        frequency: the spec's bar size, ``"1d"`` or ``"1min"`` (whose defaults differ).

    Raises:
        ValueError: an unknown key or a value PPOConfig rejects (pydantic turns it into a SpecError).
    """
    known = {f.name for f in dataclasses.fields(PPOConfig)}
    unknown = sorted(set(agent) - known)
    if unknown:
        raise ValueError(f"unknown PPO setting {unknown[0]!r}; fix: use one of {', '.join(sorted(known))}")
    for name, value in agent.items():
        _check_agent_type(name, value)
    agent = {name: _as_field_type(name, value) for name, value in agent.items()}
    if agent.get("advantages") == "entity" and action_mode != "weights":
        raise ValueError(
            f"agent.advantages: 'entity' needs per-asset outcomes, which env.action_mode {action_mode!r} "
            f"does not report; fix: {JOINT_ONLY_FIX}"
        )
    try:
        return PPOConfig.from_dict({**agent_defaults(agent, action_mode, frequency), **agent})
    except (TypeError, ValueError) as err:
        named = re.match(r"PPOConfig\.(\w+) (.*)", str(err))
        if named is None:
            raise ValueError(f"{err}; fix: see podracer.ppo.PPOConfig for valid values") from None
        field, problem = named.groups()
        fix = FIXES.get(field, f"change agent.{field} to satisfy that")
        raise ValueError(f"agent.{field}: {problem}; fix: {fix}") from None


def _as_field_type(name: str, value: Any) -> Any:
    """A whole number given for a float field (``pathwise_risk = 1``, ``--set agent.gamma=0``) as a
    float: a tournament perturbs only float fields and refuses a config whose field is an int."""
    default = next(f.default for f in dataclasses.fields(PPOConfig) if f.name == name)
    whole = isinstance(value, int) and not isinstance(value, bool)
    return float(value) if whole and (isinstance(default, float) or default is None) else value


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
