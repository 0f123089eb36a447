"""The settings of a tournament: :class:`TournamentConfig`, checked when it is built."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from podracer.errors import TournamentError

PoolSchedule = Literal["fixed", "halving"]
"""``fixed``: the pool keeps its size; ``halving``: successive halving (see :mod:`podracer.schedule`)."""
JudgeOrder = Literal["submission", "completion"]
"""``submission``: rounds are judged in the order they were submitted (reproducible, a finished round
may wait for an earlier one); ``completion``: as they finish (pods never wait, not reproducible)."""
ArchiveRule = Literal["even", "score"]
"""Which judged rounds the archive keeps (:mod:`podracer.archive`): ``"even"``, rounds evenly spaced
over the whole run whatever they scored; ``"score"``, the best-scoring rounds, any pod's."""


@dataclass(frozen=True)
class TournamentConfig:
    """Settings of a tournament; the first nine fields are required, the rest have documented defaults.

    Attributes:
        pool_size: slots of the default :class:`~podracer.backends.LocalBackend` (used when no
            backend is given), and the pool size the ``halving`` schedule counts its phases from. The
            pool is ``backend.slots()`` pods, halved by the schedule (see :mod:`podracer.schedule`).
        leaderboard_size: ``K``, snapshots kept on the leaderboard.
        budget_env_steps: total env transitions the tournament may train on, or ``None``.
        budget_seconds: total wall time, summed over resumes, or ``None``. At least one budget is set.
        fresh_pod_prob: probability that a new pod starts from scratch instead of from a donor at the
            start of the budget; it falls linearly to 0 as the budget is spent.
        perturb_scale: ``s``, the hyper-parameter step (see :mod:`podracer.generator`).
        softmax_temperature: temperature of the rank-softmax choice of a donor (> 0).
        eval_every_rounds: agent training rounds per pod round (each pod round ends in one evaluation).
        seed: seeds the tournament's generator (pod seeds, donor choices, perturbations).
        lagging_rounds: pod rounds a pod trains after it (re)starts before it may be judged lagging; 2.
        max_consecutive_crashes: rounds in a row, across the pool, that may crash before the
            tournament gives up with :class:`~podracer.errors.TournamentError`; 5.
        lag_margin: a pod lags when its smoothed score is below the median smoothed score of the
            other live pods by more than this, in score units (>= 0); 0.
        score_smoothing: weight of the newest score in a pod's exponential moving average, in
            ``(0, 1]`` (1 = the latest score alone); 0.5.
        pool_schedule: ``"fixed"`` or ``"halving"`` (see :data:`PoolSchedule`); ``"fixed"``.
        halving_floor: the fewest pods the ``halving`` schedule shrinks the pool to (>= 1; a pool
            smaller than it is not grown, and a floor of ``pool_size`` or more makes the schedule a
            fixed pool); 1. With pods training one thread each, a floor of the
            machine's core count keeps every core busy to the end (state it in the config, so
            results do not depend on the machine).
        judge_order: ``"submission"`` or ``"completion"`` (see :data:`JudgeOrder`); ``"submission"``.
        torch_threads_per_pod: torch intra-op threads each pod round runs with on the default
            :class:`~podracer.backends.LocalBackend`; results on CPU depend on it, so it is set
            here and recorded in ``config.json``; 1.
        perturb_bounds: ``{field: (min, max)}`` replacing the agent config's ``PERTURBABLE`` bounds
            of those fields; empty.
        resample_prob: per-field probability that a child draws the field afresh from its search
            space (``perturb_bounds``) instead of stepping it; when > 0, a pod from scratch after the
            run's first draws every field from it (see :mod:`podracer.generator`); 0.
        leaderboard_after: share of the budget (:func:`~podracer.schedule.budget_fraction`) spent
            before a pod's scored snapshots may enter the leaderboard, in ``[0, 1)``; 0. Before it,
            pods are scored as usual (their smoothed scores judge, retire and re-seed them, and every
            score is a trial) but none is ranked, so the pick is the best snapshot of the budget's
            last ``1 - leaderboard_after``: where pods that stop fitting the train segment's noise
            (weight decay) keep improving, an early snapshot that was lucky on the evaluation data
            cannot win (the board stays empty until then; pods from scratch or from live donors
            fill the pool meanwhile).
        archive_size: snapshots the run's trajectory archive keeps (:mod:`podracer.archive`: judged
            rounds evenly spaced over the whole run, whatever they scored), 0 for no archive; at
            least 3 otherwise (thinning then always leaves 2 or more). An ensemble of its members
            averages the run's trajectory instead of betting on the one evaluation that ranks the
            leaderboard.
        archive_rule: which judged rounds the archive keeps (:data:`ArchiveRule`): ``"even"``
            (evenly spaced over the run, whatever they scored) or ``"score"`` (the ``archive_size``
            best-scoring rounds of any pod, so several snapshots of one pod may be kept, unlike the
            leaderboard's one per pod); ``"even"``.
    """

    pool_size: int
    leaderboard_size: int
    budget_env_steps: int | None
    budget_seconds: float | None
    fresh_pod_prob: float
    perturb_scale: float
    softmax_temperature: float
    eval_every_rounds: int
    seed: int
    lagging_rounds: int = 2
    max_consecutive_crashes: int = 5
    lag_margin: float = 0.0
    score_smoothing: float = 0.5
    pool_schedule: PoolSchedule = "fixed"
    halving_floor: int = 1
    judge_order: JudgeOrder = "submission"
    torch_threads_per_pod: int = 1
    perturb_bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    resample_prob: float = 0.0
    leaderboard_after: float = 0.0
    archive_size: int = 0
    archive_rule: ArchiveRule = "even"

    def __post_init__(self) -> None:
        """Reject settings the tournament cannot run with; each message names the field and the fix."""
        object.__setattr__(self, "perturb_bounds", _bounds(self.perturb_bounds))
        checks = [
            (self.pool_size >= 1, f"pool_size is {self.pool_size}; use at least 1"),
            (self.leaderboard_size >= 1, f"leaderboard_size is {self.leaderboard_size}; use at least 1"),
            (
                self.budget_env_steps is not None or self.budget_seconds is not None,
                "no budget: set budget_env_steps and/or budget_seconds",
            ),
            (
                self.budget_env_steps is None or self.budget_env_steps > 0,
                f"budget_env_steps is {self.budget_env_steps}; use a positive count or None",
            ),
            (
                self.budget_seconds is None
                or (math.isfinite(self.budget_seconds) and self.budget_seconds > 0),
                f"budget_seconds is {self.budget_seconds}; use a positive number of seconds or None",
            ),
            (
                0.0 <= self.fresh_pod_prob <= 1.0,
                f"fresh_pod_prob is {self.fresh_pod_prob}; use a value in [0, 1]",
            ),
            (
                math.isfinite(self.perturb_scale) and self.perturb_scale >= 0.0,
                f"perturb_scale is {self.perturb_scale}; use a value >= 0",
            ),
            (
                math.isfinite(self.softmax_temperature) and self.softmax_temperature > 0.0,
                f"softmax_temperature is {self.softmax_temperature}; use a value > 0",
            ),
            (self.eval_every_rounds >= 1, f"eval_every_rounds is {self.eval_every_rounds}; use at least 1"),
            (self.seed >= 0, f"seed is {self.seed}; use a non-negative integer"),
            (self.lagging_rounds >= 1, f"lagging_rounds is {self.lagging_rounds}; use at least 1"),
            (
                self.max_consecutive_crashes >= 1,
                f"max_consecutive_crashes is {self.max_consecutive_crashes}; use at least 1",
            ),
            (
                math.isfinite(self.lag_margin) and self.lag_margin >= 0.0,
                f"lag_margin is {self.lag_margin}; use a value >= 0 (score units)",
            ),
            (
                0.0 < self.score_smoothing <= 1.0,
                f"score_smoothing is {self.score_smoothing}; use a value in (0, 1]",
            ),
            (
                self.pool_schedule in get_args(PoolSchedule),
                f"pool_schedule is {self.pool_schedule!r}; use one of {list(get_args(PoolSchedule))}",
            ),
            (self.halving_floor >= 1, f"halving_floor is {self.halving_floor}; use at least 1"),
            (
                self.judge_order in get_args(JudgeOrder),
                f"judge_order is {self.judge_order!r}; use one of {list(get_args(JudgeOrder))}",
            ),
            (
                0.0 <= self.resample_prob <= 1.0,
                f"resample_prob is {self.resample_prob}; use a value in [0, 1]",
            ),
            (
                math.isfinite(self.leaderboard_after) and 0.0 <= self.leaderboard_after < 1.0,
                f"leaderboard_after is {self.leaderboard_after}; use a share of the budget in [0, 1)",
            ),
            (
                self.archive_size == 0 or self.archive_size >= 3,
                f"archive_size is {self.archive_size}; use 0 (no archive) or at least 3",
            ),
            (
                self.archive_rule in get_args(ArchiveRule),
                f"archive_rule is {self.archive_rule!r}; use one of {list(get_args(ArchiveRule))}",
            ),
            (
                self.torch_threads_per_pod >= 1,
                f"torch_threads_per_pod is {self.torch_threads_per_pod}; use at least 1",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise TournamentError(f"TournamentConfig: {message}")


def _bounds(given: object) -> dict[str, tuple[float, float]]:
    """``perturb_bounds`` as ``{name: (min, max)}`` floats (also from JSON lists)."""
    if not isinstance(given, Mapping):
        raise TournamentError(f"TournamentConfig: perturb_bounds is {given!r}; use {{field: (min, max)}}")
    bounds: dict[str, tuple[float, float]] = {}
    for name, pair in given.items():
        values = tuple(pair) if isinstance(pair, list | tuple) else ()
        if len(values) != 2 or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values
        ):
            raise TournamentError(
                f"TournamentConfig: perturb_bounds[{name!r}] is {pair!r}; use finite numbers (min, max)"
            )
        bounds[str(name)] = (float(values[0]), float(values[1]))
    return bounds
