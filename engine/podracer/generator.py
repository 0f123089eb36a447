"""The generator: where a new pod comes from.

With probability ``fresh_pod_prob`` (and always while the leaderboard is empty) a pod starts from
scratch with the base hyper-parameters. Otherwise it starts from a leaderboard entry chosen by
rank-softmax, ``P(rank r) ∝ exp(-r / temperature)`` with rank 0 the best (ranks, not raw scores, so
the choice does not depend on the score's scale), and inherits that entry's weights and
hyper-parameters with each ``PERTURBABLE`` field multiplied by a factor drawn log-uniformly from
``[1 / (1 + perturb_scale), 1 + perturb_scale]`` and clamped to the field's bounds, widened to
include the inherited value (a value the user set outside the bounds is never pulled in to them
unasked; a field at 0 stays at 0 unless its lower bound is above 0, where the clamp lifts it).

Every random draw comes from the generator passed in, in a fixed order, so one seed gives one
sequence of pods.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from podracer.leaderboard import Leaderboard, LeaderboardEntry
from podracer.pod import check_agent_config, config_from_record

SEED_UPPER_BOUND = 2**31 - 1
"""Pod seeds are drawn uniformly from ``[0, SEED_UPPER_BOUND)``."""


def rank_softmax_probabilities(count: int, temperature: float) -> np.ndarray:
    """Choice probabilities of ranks ``0..count-1``: ``softmax(-rank / temperature)``, shape ``(count,)``."""
    logits = -np.arange(count, dtype=np.float64) / temperature
    weights = np.exp(logits - logits.max())
    probabilities: np.ndarray = weights / weights.sum()
    return probabilities


def perturb_config(config: Any, perturb_scale: float, rng: np.random.Generator) -> Any:
    """A copy of ``config`` with every ``PERTURBABLE`` float field scaled by a random factor.

    Args:
        config: a dataclass config with a ``PERTURBABLE`` table ``{field: (min, max)}``.
        perturb_scale: ``s >= 0``; factors are ``exp(U(-log(1 + s), log(1 + s)))``.
        rng: the source of the factors, drawn in sorted field-name order.

    Returns:
        The perturbed config; each perturbed value lies within its field's ``(min, max)`` widened to
        include the field's value in ``config``.
    """
    bounds = check_agent_config(config)
    half_width = math.log1p(perturb_scale)
    changes: dict[str, float] = {}
    for name in sorted(bounds):
        value = getattr(config, name)
        low, high = min(bounds[name][0], value), max(bounds[name][1], value)
        factor = math.exp(rng.uniform(-half_width, half_width))
        changes[name] = min(max(value * factor, low), high)
    return dataclasses.replace(config, **changes)


@dataclass(frozen=True)
class Origin:
    """Where a new pod starts.

    Attributes:
        parent: the leaderboard entry whose weights it inherits, ``None`` for a pod from scratch.
        agent_config: its hyper-parameters.
        seed: the seed for its agent and env.
    """

    parent: LeaderboardEntry | None
    agent_config: Any
    seed: int


@dataclass(frozen=True)
class Generator:
    """Proposes the origin of each new pod.

    Attributes:
        base_agent_config: hyper-parameters of pods started from scratch.
        fresh_pod_prob: probability of a pod from scratch when the leaderboard is not empty.
        perturb_scale: width of the multiplicative hyper-parameter perturbation (see module doc).
        softmax_temperature: temperature of the rank-softmax parent choice (> 0; larger = flatter).
    """

    base_agent_config: Any
    fresh_pod_prob: float
    perturb_scale: float
    softmax_temperature: float

    def propose(self, leaderboard: Leaderboard, rng: np.random.Generator) -> Origin:
        """Draw the origin of the next pod (seed, then fresh-or-parent, then parent, then factors)."""
        seed = int(rng.integers(0, SEED_UPPER_BOUND))
        fresh = rng.random() < self.fresh_pod_prob
        entries = leaderboard.entries
        if fresh or not entries:
            return Origin(parent=None, agent_config=self.base_agent_config, seed=seed)
        rank = int(
            rng.choice(len(entries), p=rank_softmax_probabilities(len(entries), self.softmax_temperature))
        )
        parent = entries[rank]
        config = perturb_config(config_from_record(parent.agent_config), self.perturb_scale, rng)
        return Origin(parent=parent, agent_config=config, seed=seed)
