"""A pod: one agent with its identity, lineage, hyper-parameters and env, trained in rounds.

A round is the unit of work the orchestrator hands to a backend: ``train_rounds_per_eval`` calls of
``agent.train_round(env)`` followed by one call of the application's ``evaluate(policy)``. The round
runs on a worker; everything else (judging, snapshots, replacing) happens in the orchestrator.

Agent configs are frozen dataclasses whose class attribute ``PERTURBABLE`` maps float field names to
their ``(min, max)`` bounds, and whose optional ``PERTURB_SPACES`` names the space each field is
perturbed in (``"log"``, the default: multiplicative, e.g. a learning rate; ``"log1m"``: ``log(1 - x)``,
e.g. a discount factor; ``"linear"``: additive, e.g. an entropy weight that may be 0). They are
stored as JSON records ``{"type": "module:QualName", "fields":
{...}}`` and rebuilt only from classes whose module is already imported (nothing is imported on a
file's say-so).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import numbers
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from podracer.errors import SnapshotError, TournamentError
from podracer.protocols import (
    Agent,
    Policy,
    RoundStats,
    TensorVectorEnv,
    deterministic_policy,
    follow_budget,
)


class PodAgent(Agent, Protocol):
    """An :class:`~podracer.api.Agent` that can also start from another agent's weights.

    ``load_weights_from`` copies a snapshot's networks (and, with ``keep_optimizer``, its optimiser
    moments) while keeping this agent's own hyper-parameters: how a child pod inherits a leader's
    weights under perturbed hyper-parameters. ``load_state_dict`` restores everything and requires
    the same hyper-parameters (how a pod resumes from its own snapshot).
    """

    def load_weights_from(self, state: Mapping[str, Any], keep_optimizer: bool) -> None:
        """Copy networks (and optionally optimiser state) from a :meth:`state_dict` output."""
        ...


AgentFactory = Callable[[Any, int], PodAgent]
"""``(agent_config, seed) -> agent``: builds a fresh agent with the given hyper-parameters."""
EnvFactory = Callable[[int], TensorVectorEnv]
"""``seed -> TensorVectorEnv``: builds a pod's own training env."""
Evaluate = Callable[[Policy], float]
"""``policy -> score``: the application's judgement of a policy, higher is better. Called from worker
threads of the backend, so it must be safe to call concurrently (a pure function of the policy)."""


def config_type_name(config: Any) -> str:
    """``"module:QualName"`` of a dataclass config instance."""
    cls = type(config)
    return f"{cls.__module__}:{cls.__qualname__}"


PerturbSpace = Literal["log", "log1m", "linear"]
"""How a hyper-parameter is perturbed: ``log`` (multiplicative), ``log1m`` (``log(1 - x)``), ``linear``."""
PERTURB_SPACES: tuple[str, ...] = get_args(PerturbSpace)


@dataclass(frozen=True)
class PerturbRange:
    """Where one hyper-parameter may go when a tournament perturbs it.

    Attributes:
        low: smallest allowed value.
        high: largest allowed value.
        space: the space a perturbation step is taken in (see :data:`PerturbSpace`).
    """

    low: float
    high: float
    space: PerturbSpace


def check_agent_config(
    config: Any, bounds: Mapping[str, tuple[float, float]] | None = None
) -> dict[str, PerturbRange]:
    """Check that ``config`` is a dataclass instance with a valid ``PERTURBABLE`` table; return it.

    Args:
        config: the agent config.
        bounds: the user's ``(min, max)`` for some ``PERTURBABLE`` fields, replacing the class's.

    Raises:
        TournamentError: not a dataclass, no ``PERTURBABLE`` mapping, an entry that names no
            field or has bounds that are not ``0 <= min <= max`` (``0 < min`` in the ``log`` space,
            ``max <= 1`` in the ``log1m`` space), an unknown space, or ``bounds`` naming a field that
            is not perturbable.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TournamentError(
            f"agent config {config!r} is not a dataclass instance; pass e.g. PPOConfig(...) instead"
        )
    table = getattr(type(config), "PERTURBABLE", None)
    if not isinstance(table, Mapping):
        raise TournamentError(
            f"{config_type_name(config)} has no PERTURBABLE class attribute (name -> (min, max)); add one"
        )
    spaces = getattr(type(config), "PERTURB_SPACES", {})
    names = {f.name for f in dataclasses.fields(config)}
    overrides = dict(bounds or {})
    unknown = sorted(set(overrides) - set(table))
    if unknown:
        raise TournamentError(
            f"perturb_bounds names {unknown}, which {config_type_name(config)}.PERTURBABLE does not "
            f"list; use some of {sorted(table)}"
        )
    checked: dict[str, PerturbRange] = {}
    for name, default_bounds in table.items():
        if name not in names or not isinstance(getattr(config, name), float):
            raise TournamentError(
                f"PERTURBABLE names {name!r}, which is not a float field of {config_type_name(config)}"
            )
        space = spaces.get(name, "log")
        if space not in PERTURB_SPACES:
            raise TournamentError(
                f"PERTURB_SPACES gives {name!r} the space {space!r}; use one of {list(PERTURB_SPACES)}"
            )
        given = tuple(overrides.get(name) or default_bounds)
        low, high = float(given[0]), float(given[1])
        where = (
            f"perturb_bounds of {name!r} are" if name in overrides else f"PERTURBABLE bounds of {name!r} are"
        )
        problem = (
            "they must satisfy 0 <= min <= max"
            if not 0.0 <= low <= high
            else "a log-space field needs min > 0"
            if space == "log" and low <= 0.0
            else "a log(1 - x) field needs max <= 1"
            if space == "log1m" and high > 1.0
            else None
        )
        if problem is not None:
            raise TournamentError(f"{where} {tuple(given)!r}; {problem}")
        checked[name] = PerturbRange(low, high, space)
    return checked


def config_to_record(config: Any) -> dict[str, Any]:
    """A JSON-ready record of a dataclass config: its type name and its fields (tuples as lists).

    A frozen (hashable) config's record is made once and copied (a tournament records every pod's
    config after every round); the copy's top two levels are its own, deeper lists are shared.
    """
    try:
        type_name, fields = _config_record(config)
    except TypeError:  # an unhashable config
        type_name, fields = _config_record.__wrapped__(config)
    return {"type": type_name, "fields": dict(fields)}


@functools.lru_cache(maxsize=1024)
def _config_record(config: Any) -> tuple[str, dict[str, Any]]:
    fields = json.loads(json.dumps(dataclasses.asdict(config), allow_nan=False))
    return config_type_name(config), fields


def _tuples(value: Any) -> Any:
    """JSON lists back to the tuples a frozen dataclass holds."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    return value


def config_from_record(record: Mapping[str, Any]) -> Any:
    """Rebuild a config from :func:`config_to_record`'s output.

    Raises:
        SnapshotError: the record is malformed, its class's module is not imported, or the class is
            not a dataclass that accepts the stored fields.
    """
    type_name = record.get("type")
    fields = record.get("fields")
    if not isinstance(type_name, str) or ":" not in type_name or not isinstance(fields, dict):
        raise SnapshotError(f"agent config record {record!r} is malformed: expected 'type' and 'fields'")
    module_name, _, qualname = type_name.partition(":")
    module = sys.modules.get(module_name)
    if module is None:
        raise SnapshotError(f"agent config class {type_name} is not loaded; import {module_name} first")
    cls: Any = module
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise SnapshotError(f"{type_name} is not a dataclass config class")
    try:
        return cls(**{name: _tuples(value) for name, value in fields.items()})
    except (TypeError, ValueError) as exc:
        raise SnapshotError(
            f"stored fields do not fit {type_name} ({exc}); use the code that wrote them"
        ) from None


@dataclass
class Pod:
    """One member of the training pool.

    Attributes:
        pod_id: unique id within the tournament (0, 1, 2, ... in creation order).
        parent_id: id of the pod whose weights it started from, or ``None`` when from scratch.
        lineage_id: id of the pod from scratch its line of descent starts with (its own id if none).
        generation: 0 from scratch, parent's generation + 1 otherwise.
        seed: the seed its agent and env were built with.
        agent_config: its hyper-parameters (a dataclass with ``PERTURBABLE``).
        agent: the learner.
        env: its own training env.
        policy_version: training rounds behind its current weights, lineage included.
        env_steps: env transitions behind its current weights, lineage included.
        rounds_since_start: rounds it has finished since it was (re)started.
        last_score: score of its latest evaluation, ``None`` before the first.
        smoothed_score: exponential moving average of its scores (a child starts from its parent's),
            ``None`` before it has one; what the lagging check and the pool schedule rank by.
        snapshot_name: file name of its latest snapshot under the run's ``pods/`` folder, if any.
        restored_after_crash: it was restored from its snapshot after a crash and has not finished
            a round since (a second crash then replaces it with a new pod).
    """

    pod_id: int
    parent_id: int | None
    lineage_id: int
    generation: int
    seed: int
    agent_config: Any
    agent: PodAgent
    env: TensorVectorEnv
    policy_version: int
    env_steps: int
    rounds_since_start: int = 0
    last_score: float | None = None
    smoothed_score: float | None = None
    snapshot_name: str | None = None
    restored_after_crash: bool = False


@dataclass(frozen=True)
class RoundResult:
    """What one round of a pod produced.

    Attributes:
        pod_id: the pod.
        env_steps: env transitions collected in the round.
        train_seconds: wall time spent in ``train_round`` calls, seconds.
        eval_seconds: wall time spent in ``evaluate``, seconds.
        score: the evaluation's score (finite).
        metrics: the last ``train_round``'s diagnostics.
    """

    pod_id: int
    env_steps: int
    train_seconds: float
    eval_seconds: float
    score: float
    metrics: Mapping[str, float]


def pod_policy(agent: Agent) -> Policy:
    """The deterministic policy of an agent: observations ``(N, D)`` -> actions ``(N, A)``
    (:func:`podracer.api.deterministic_policy`, frozen at the agent's current weights)."""
    return deterministic_policy(agent)


def run_round(pod: Pod, train_rounds: int, evaluate: Evaluate, budget_spent: float = 0.0) -> RoundResult:
    """Train ``pod`` for ``train_rounds`` agent rounds, then score it with ``evaluate``.

    An agent that follows the tournament's budget (:class:`~podracer.protocols.FollowsBudget`) is
    told ``budget_spent``, the share of it spent when the round was submitted, first.

    Raises:
        TournamentError: the agent reported no env steps (the budget could never run out), or
            ``evaluate`` returned something that is not a finite number.
    """
    follow_budget(pod.agent, budget_spent)
    env_steps = 0
    started = time.perf_counter()
    stats: RoundStats | None = None
    for _ in range(train_rounds):
        stats = pod.agent.train_round(pod.env)
        env_steps += stats.env_steps
    trained = time.perf_counter()
    if env_steps <= 0:
        raise TournamentError(
            f"pod {pod.pod_id}'s train_round reported {env_steps} env steps; it must collect some"
        )
    score = check_score(evaluate(pod_policy(pod.agent)), pod.pod_id)
    evaluated = time.perf_counter()
    return RoundResult(
        pod_id=pod.pod_id,
        env_steps=env_steps,
        train_seconds=trained - started,
        eval_seconds=evaluated - trained,
        score=score,
        metrics=dict(stats.metrics) if stats is not None else {},
    )


def check_score(score: Any, pod_id: int) -> float:
    """``score`` as a float, if ``evaluate`` returned a finite real number for pod ``pod_id``.

    Raises:
        TournamentError: anything else (a bool, NaN, infinity, not a number).
    """
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise TournamentError(f"evaluate returned {score!r} for pod {pod_id}; it must return a finite float")
    return float(score)
