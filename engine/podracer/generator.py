"""The generator: where a new pod comes from.

With probability ``fresh_prob`` (the orchestrator lowers it as the budget runs out), and always when
there is no donor, a pod starts from scratch with the base hyper-parameters. Otherwise it starts
from a donor chosen by rank-softmax, ``P(rank r) ∝ exp(-r / temperature)`` with rank 0 the best
(ranks, not raw scores, so the choice does not depend on the score's scale). Donors are the live
pods' LATEST states (an old best-ever snapshot only when no pod is live, e.g. after every pod
crashed). The child inherits the donor's weights, optimiser state, lineage and step count, and its
hyper-parameters perturbed in small steps, each ``PERTURBABLE`` field in its own space
(``s = perturb_scale``, ``u ~ U(-1, 1)``):

* ``log`` (learning rate, clip range, ...): ``x * (1 + s) ** u``;
* ``log1m`` (gamma, GAE lambda): ``1 - (1 - x) * (1 + s) ** u``, so the horizon ``1 / (1 - gamma)``
  moves by the same factor whatever gamma is (0.99 goes to [0.9880, 0.9917] at ``s = 0.2``);
* ``linear`` (entropy weight): ``x + s * (max - min) * u``, so a weight of 0 can move.

Each value is then clamped to the field's ``(min, max)`` (the class's ``PERTURBABLE`` or the user's
``perturb_bounds``), widened to include the inherited value: a value the user set outside the bounds
is never pulled in to them unasked.

Resampling (PBT's other explore move, Ray Tune's ``resample_probability``): with probability
``resample_prob`` a field is instead drawn afresh from its search space, uniformly in its own space
between its ``(min, max)`` (log-uniform for ``log``, ``1 - x`` log-uniform for ``log1m``, uniform for
``linear``). Small steps refine a good value; a resample escapes a start that is far off (a learning
rate 10x too high needs a dozen lucky 20 % steps, or one resample). With ``resample_prob > 0`` a pod
from scratch other than the run's first one draws EVERY field from the search space (Ray Tune's
initial population), so the first pool is not ``pool_size`` copies of one guess; the run's first pod
always keeps the base hyper-parameters, and children start from the leaders' values.

Every random draw comes from the generator passed in, in a fixed order (seed, fresh-or-donor, donor,
then per field in sorted name order: a resample draw when ``resample_prob > 0``, then the step; for a
pod from scratch, one quantile per field), so one seed gives one sequence of pods.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from podracer.pod import PerturbRange, check_agent_config

SEED_UPPER_BOUND = 2**31 - 1
"""Pod seeds are drawn uniformly from ``[0, SEED_UPPER_BOUND)``."""
LOG1M_RESAMPLE_FLOOR = 1e-4
"""A resampled ``log1m`` value stays at most ``1 - LOG1M_RESAMPLE_FLOOR`` (a 10,000-step horizon), even
when the field's ``max`` is 1 (``1 - x`` log-uniform down to 0 would put all its mass at ``x = 1``)."""


def rank_softmax_probabilities(count: int, temperature: float) -> np.ndarray:
    """Choice probabilities of ranks ``0..count-1``: ``softmax(-rank / temperature)``, shape ``(count,)``."""
    logits = -np.arange(count, dtype=np.float64) / temperature
    weights = np.exp(logits - logits.max())
    probabilities: np.ndarray = weights / weights.sum()
    return probabilities


def perturb_value(value: float, bounds: PerturbRange, perturb_scale: float, u: float) -> float:
    """One perturbed hyper-parameter (see the module doc), clamped to ``bounds`` widened to ``value``.

    Args:
        value: the inherited value.
        bounds: the field's range and space.
        perturb_scale: ``s >= 0``, the step size.
        u: the random draw, in ``[-1, 1]``.
    """
    factor = math.exp(u * math.log1p(perturb_scale))
    if bounds.space == "log":
        moved = value * factor
    elif bounds.space == "log1m":
        moved = 1.0 - (1.0 - value) * factor
    else:
        moved = value + perturb_scale * (bounds.high - bounds.low) * u
    low, high = min(bounds.low, value), max(bounds.high, value)
    return min(max(moved, low), high)


def resample_value(bounds: PerturbRange, q: float) -> float:
    """The value at quantile ``q`` in ``[0, 1]`` of the field's search space (see the module doc).

    ``log``: log-uniform in ``[min, max]``; ``log1m``: ``1 - x`` log-uniform in ``[1 - max, 1 - min]``
    (a ``min`` of 0 gives one-step horizons; ``max`` is capped at ``1 - LOG1M_RESAMPLE_FLOOR``);
    ``linear``: uniform.
    """
    if bounds.space == "log":
        return math.exp(math.log(bounds.low) + q * (math.log(bounds.high) - math.log(bounds.low)))
    if bounds.space == "log1m":
        high = min(bounds.high, 1.0 - LOG1M_RESAMPLE_FLOOR)
        low = min(bounds.low, high)
        short, long = math.log1p(-low), math.log1p(-high)
        return -math.expm1(short + q * (long - short))
    return bounds.low + q * (bounds.high - bounds.low)


def searched(ranges: Mapping[str, PerturbRange]) -> dict[str, PerturbRange]:
    """The fields a tournament moves: those whose ``(min, max)`` is a range, not one pinned value.

    A pinned field (``min == max``, e.g. ``h_term_coef``'s default ``(0, 0)``) keeps every pod's
    value and takes no random draw, so pinning a field leaves the other fields' draws as they were.
    """
    return {name: bounds for name, bounds in ranges.items() if bounds.high > bounds.low}


def perturb_config(
    config: Any,
    perturb_scale: float,
    rng: np.random.Generator,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    resample_prob: float = 0.0,
) -> Any:
    """A copy of ``config`` with every ``PERTURBABLE`` float field moved one random step or resampled.

    Args:
        config: a dataclass config with a ``PERTURBABLE`` table ``{field: (min, max)}`` (and
            optionally ``PERTURB_SPACES``).
        perturb_scale: ``s >= 0``, the step size (see the module doc).
        rng: the source of the draws, per field in sorted field-name order: ``r ~ U(0, 1)`` (only
            when ``resample_prob > 0``), then ``u ~ U(-1, 1)``.
        bounds: the user's ``(min, max)`` for some fields, replacing the class's.
        resample_prob: probability, per field, of a fresh draw from the field's search space
            (:func:`resample_value` at ``q = (u + 1) / 2``) instead of a step.

    Returns:
        The new config; a stepped value lies within its field's ``(min, max)`` widened to include the
        field's value in ``config``, a resampled one within ``(min, max)``.
    """
    ranges = searched(check_agent_config(config, bounds))
    changes: dict[str, float] = {}
    for name in sorted(ranges):
        resample = resample_prob > 0.0 and float(rng.random()) < resample_prob
        u = float(rng.uniform(-1.0, 1.0))
        value = getattr(config, name)
        changes[name] = (
            resample_value(ranges[name], (u + 1.0) / 2.0)
            if resample
            else perturb_value(value, ranges[name], perturb_scale, u)
        )
    return dataclasses.replace(config, **changes)


@dataclass(frozen=True)
class Donor:
    """A state a new pod may start from.

    Attributes:
        pod_id: the pod that produced it.
        lineage_id: that pod's lineage.
        generation: that pod's generation.
        score: its ranking score (a live pod's smoothed score, or a leaderboard score).
        agent_config: that pod's hyper-parameters (a config instance).
        policy_version: training rounds behind the state, lineage included.
        env_steps: env transitions behind the state, lineage included.
        snapshot: the snapshot file holding the state.
    """

    pod_id: int
    lineage_id: int
    generation: int
    score: float
    agent_config: Any
    policy_version: int
    env_steps: int
    snapshot: Path


@dataclass(frozen=True)
class Origin:
    """Where a new pod starts.

    Attributes:
        parent: the donor whose state it inherits, ``None`` for a pod from scratch.
        agent_config: its hyper-parameters.
        seed: the seed for its agent and env.
    """

    parent: Donor | None
    agent_config: Any
    seed: int


@dataclass(frozen=True)
class Generator:
    """Proposes the origin of each new pod.

    Attributes:
        base_agent_config: hyper-parameters of pods started from scratch.
        perturb_scale: step size of the hyper-parameter perturbation (see the module doc).
        softmax_temperature: temperature of the rank-softmax donor choice (> 0; larger = flatter).
        perturb_bounds: the user's ``(min, max)`` for some ``PERTURBABLE`` fields.
        resample_prob: per-field probability that a child draws the field from the search space
            instead of stepping it; when > 0, pods from scratch after the first draw every field.
    """

    base_agent_config: Any
    perturb_scale: float
    softmax_temperature: float
    perturb_bounds: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    resample_prob: float = 0.0

    def propose(
        self, donors: Sequence[Donor], fresh_prob: float, rng: np.random.Generator, *, first: bool = False
    ) -> Origin:
        """Draw the origin of the next pod (seed, then fresh-or-donor, then donor, then perturbations).

        Args:
            donors: candidate donors, best first (may be empty: then the pod starts from scratch).
            fresh_prob: probability of a pod from scratch when there are donors, in ``[0, 1]``.
            rng: the source of every draw.
            first: the run's first pod, which always starts from scratch with the base config.
        """
        seed = int(rng.integers(0, SEED_UPPER_BOUND))
        fresh = rng.random() < fresh_prob
        if fresh or not donors:
            config = self.base_agent_config
            if not first and self.resample_prob > 0.0:
                config = self._fresh_config(rng)
            return Origin(parent=None, agent_config=config, seed=seed)
        rank = int(
            rng.choice(len(donors), p=rank_softmax_probabilities(len(donors), self.softmax_temperature))
        )
        parent = donors[rank]
        config = perturb_config(
            parent.agent_config, self.perturb_scale, rng, self.perturb_bounds, self.resample_prob
        )
        return Origin(parent=parent, agent_config=config, seed=seed)

    def _fresh_config(self, rng: np.random.Generator) -> Any:
        """The base config with every perturbable field drawn from its search space."""
        base = self.base_agent_config
        ranges = searched(check_agent_config(base, self.perturb_bounds))
        drawn = {name: resample_value(ranges[name], float(rng.random())) for name in sorted(ranges)}
        return dataclasses.replace(base, **drawn)
