"""The pool schedule: how many pods train as the budget is spent, and how often one starts fresh.

``budget_fraction`` is the larger of the env-step and the wall-time budget's spent share, in ``[0, 1]``.

The pool is counted in the backend's slots (``pool_size`` for the default local backend):

* ``fixed``: as many pods as slots throughout.
* ``halving`` (successive halving): with ``R = floor(log2(pool_size))`` halvings, the budget is cut
  into ``R + 1`` equal phases and phase ``i`` trains ``max(halving_floor, slots // 2**i)`` pods (at
  most ``slots``). A pool of 4 trains 4, then 2, then 1 pod, so the surviving lineage trains on
  1/12 + 1/6 + 1/3 = 7/12 of the budget instead of the 1/4 a fixed pool of 4 caps it at; with
  ``halving_floor = 2`` it trains 4, 2, 2 (the best lineage 5/12, the runner-up training beside it
  on a core that would otherwise idle). When the pool must shrink, the pods with
  the worst smoothed scores are retired (:func:`retirees`), never simply the first to finish.

A new pod starts from scratch with probability ``fresh_pod_prob * (1 - budget_fraction)``: fresh pods
become rarer as the budget runs out, when there is no time left for one to catch up.

A round is started only while :func:`budget_left`: the env steps used plus those expected from the
rounds in flight (the last round's size each) stay below ``budget_env_steps``, and the wall time used
(summed over resumes) is below ``budget_seconds``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol, TypeVar

from podracer.config import TournamentConfig


class Ranked(Protocol):
    """What ranks a pod for retirement (a :class:`~podracer.pod.Pod` has it)."""

    @property
    def pod_id(self) -> int:
        """The pod's id (higher: younger)."""
        ...

    @property
    def smoothed_score(self) -> float | None:
        """Its moving-average score, ``None`` before its first evaluation."""
        ...


R = TypeVar("R", bound=Ranked)


def budget_fraction(config: TournamentConfig, env_steps: int, seconds: float) -> float:
    """Spent share of the budget, in ``[0, 1]`` (the larger of the steps' and the wall time's)."""
    shares = [0.0]
    if config.budget_env_steps is not None:
        shares.append(env_steps / config.budget_env_steps)
    if config.budget_seconds is not None:
        shares.append(seconds / config.budget_seconds)
    return min(1.0, max(shares))


def schedule_fraction(config: TournamentConfig, env_steps: int, seconds: float) -> float:
    """The spent share a learning-rate schedule follows (``lr_schedule = "budget"``), in ``[0, 1]``:
    of the env-step budget when one is set, else of the wall budget (0 with neither).

    Not :func:`budget_fraction`'s larger of the two: a rate that moved with the wall clock whenever it
    ran ahead (every first round) would make a run that states an env-step budget it reaches first
    differ from one machine, or one run, to the next in its last bits.
    """
    if config.budget_env_steps is not None:
        return min(1.0, env_steps / config.budget_env_steps)
    if config.budget_seconds is not None:
        return min(1.0, seconds / config.budget_seconds)
    return 0.0


def budget_left(
    config: TournamentConfig, env_steps: int, last_round_env_steps: int, rounds_in_flight: int, seconds: float
) -> bool:
    """Whether another round may start.

    Args:
        config: the budgets.
        env_steps: env steps used so far.
        last_round_env_steps: the last finished round's env steps (what each round in flight is
            expected to add).
        rounds_in_flight: rounds running now.
        seconds: wall time used so far (summed over resumes).
    """
    if config.budget_env_steps is not None:
        expected = env_steps + rounds_in_flight * last_round_env_steps
        if expected >= config.budget_env_steps:
            return False
    return config.budget_seconds is None or seconds < config.budget_seconds


def schedule_phase(config: TournamentConfig, fraction: float) -> int:
    """How many times the schedule has halved the pool at this spent ``fraction`` of the budget."""
    if config.pool_schedule == "fixed":
        return 0
    halvings = int(math.log2(config.pool_size))
    return min(halvings, int(fraction * (halvings + 1)))


def pool_target(config: TournamentConfig, fraction: float, slots: int) -> int:
    """Pods to train at this spent ``fraction`` of the budget with ``slots`` slots (0 when slots is 0)."""
    if slots <= 0:
        return 0
    return max(min(config.halving_floor, slots), slots >> schedule_phase(config, fraction))


def fresh_probability(config: TournamentConfig, fraction: float) -> float:
    """Probability that a new pod starts from scratch at this spent ``fraction`` of the budget."""
    return config.fresh_pod_prob * max(0.0, 1.0 - fraction)


def retirees(pods: Iterable[R], count: int) -> list[R]:
    """The ``count`` pods to retire: the worst smoothed scores (a pod without one first; ties: youngest)."""

    def badness(pod: R) -> tuple[bool, float, int]:
        score = pod.smoothed_score
        return (score is not None, -math.inf if score is None else score, -pod.pod_id)

    return sorted(pods, key=badness)[: max(0, count)]
