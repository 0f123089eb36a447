"""The generator: rank-softmax donor choice, fresh pods at rate, small bounded steps in the right spaces."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from engine._tournament_kit import TINY_PPO
from podracer import TournamentError
from podracer.generator import Donor, Generator, perturb_config, rank_softmax_probabilities
from podracer.pod import check_agent_config
from podracer.ppo import PPOConfig

DRAWS = 4000
CHI2_CRITICAL_DF3_P001 = 16.27
"""Chi-square critical value, 3 degrees of freedom, p = 0.001."""
BINOMIAL_SIGMAS = 4.0
UNIFORM_MEAN_SIGMAS = 4.0
"""A mean of ``n`` U(-1, 1) draws has standard deviation ``1 / sqrt(3 n)``; tests allow this many."""
EPS = 1e-12


def _donors(scores: list[float]) -> list[Donor]:
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
    return [Donor(i, i, 0, scores[i], TINY_PPO, 1, 10, Path(f"pod-{i}.pt")) for i in ranked]


def _generator(perturb_scale: float = 0.25, temperature: float = 1.0) -> Generator:
    return Generator(TINY_PPO, perturb_scale, temperature)


def _children(config: PPOConfig, scale: float, count: int = DRAWS, seed: int = 0) -> list[PPOConfig]:
    rng = np.random.default_rng(seed)
    return [perturb_config(config, scale, rng) for _ in range(count)]


def test_rank_softmax_probabilities() -> None:
    probabilities = rank_softmax_probabilities(4, temperature=1.0)
    expected = np.exp(-np.arange(4.0)) / np.exp(-np.arange(4.0)).sum()
    np.testing.assert_allclose(probabilities, expected)
    assert np.all(np.diff(probabilities) < 0)
    flatter = rank_softmax_probabilities(4, temperature=100.0)
    assert flatter[0] < probabilities[0]
    assert np.ptp(flatter) < 0.01


def test_donor_choice_follows_rank_softmax() -> None:
    donors = _donors([0.4, -3.0, 9.0, 0.1])
    rank_of_pod = {donor.pod_id: rank for rank, donor in enumerate(donors)}
    generator, rng = _generator(), np.random.default_rng(0)
    parents = [generator.propose(donors, 0.0, rng).parent for _ in range(DRAWS)]
    counts = Counter(rank_of_pod[parent.pod_id] for parent in parents if parent is not None)
    assert sum(counts.values()) == DRAWS
    expected = rank_softmax_probabilities(4, 1.0) * DRAWS
    observed = np.array([counts[rank] for rank in range(4)])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < CHI2_CRITICAL_DF3_P001, (observed, expected)


def test_fresh_pods_come_at_the_stated_rate() -> None:
    generator, rng = _generator(), np.random.default_rng(1)
    origins = [generator.propose(_donors([1.0, 0.5]), 0.3, rng) for _ in range(DRAWS)]
    fresh = [o for o in origins if o.parent is None]
    sigma = math.sqrt(DRAWS * 0.3 * 0.7)
    assert abs(len(fresh) - 0.3 * DRAWS) < BINOMIAL_SIGMAS * sigma
    assert all(o.agent_config == TINY_PPO for o in fresh)
    assert all(o.agent_config != TINY_PPO for o in origins if o.parent is not None)


def test_no_donor_gives_fresh_pods_only() -> None:
    generator, rng = _generator(), np.random.default_rng(2)
    assert all(generator.propose([], 0.0, rng).parent is None for _ in range(50))


def test_a_child_of_gamma_0_99_stays_within_the_step_of_its_horizon() -> None:
    scale = 0.2
    children = _children(dataclasses.replace(TINY_PPO, gamma=0.99, gae_lambda=0.95), scale)
    gammas = np.array([c.gamma for c in children])
    assert gammas.min() >= 1 - 0.01 * (1 + scale) - EPS  # 0.988: the horizon 100 steps shrinks to >= 83
    assert gammas.max() <= 1 - 0.01 / (1 + scale) + EPS  # 0.99167: grows to <= 120
    u = np.log((1 - gammas) / 0.01) / math.log1p(scale)  # the draw, uniform on [-1, 1] in log(1 - gamma)
    assert abs(u.mean()) < UNIFORM_MEAN_SIGMAS / math.sqrt(3 * DRAWS)
    assert np.histogram(u, bins=4, range=(-1, 1))[0].min() > DRAWS / 4 * 0.85
    lambdas = np.array([c.gae_lambda for c in children])
    assert lambdas.max() < 1.0  # was: 35 % of children at lambda = 1.0
    assert 1 - 0.05 * (1 + scale) - EPS <= lambdas.min()


def test_the_learning_rate_moves_by_a_log_uniform_factor() -> None:
    scale, parent = 0.25, dataclasses.replace(TINY_PPO, learning_rate=3e-4)  # far from its bounds
    children = _children(parent, scale)
    log_ratio = np.log(np.array([c.learning_rate for c in children]) / parent.learning_rate)
    assert np.abs(log_ratio).max() <= math.log1p(scale) + EPS
    u = log_ratio / math.log1p(scale)
    assert abs(u.mean()) < UNIFORM_MEAN_SIGMAS / math.sqrt(3 * DRAWS)


def test_entropy_moves_additively_so_a_zero_weight_is_searched() -> None:
    scale = 0.2
    low, high = PPOConfig.PERTURBABLE["entropy_coef"]
    step = scale * (high - low)
    from_zero = np.array(
        [c.entropy_coef for c in _children(dataclasses.replace(TINY_PPO, entropy_coef=0.0), scale)]
    )
    assert from_zero.min() == 0.0
    assert from_zero.max() <= step + EPS
    positive = (from_zero > 0).mean()
    assert abs(positive - 0.5) < BINOMIAL_SIGMAS * math.sqrt(
        0.25 / DRAWS
    )  # was: 0 times a factor, never moved
    middle = dataclasses.replace(TINY_PPO, entropy_coef=0.02)
    moved = np.array([c.entropy_coef for c in _children(middle, scale)]) - 0.02
    assert np.abs(moved).max() <= step + EPS
    assert abs(moved.mean() / step) < UNIFORM_MEAN_SIGMAS / math.sqrt(3 * DRAWS)


def test_every_value_stays_within_its_bounds_and_other_fields_are_kept() -> None:
    ranges = check_agent_config(TINY_PPO)
    for child in _children(TINY_PPO, 1.0, count=500, seed=3):
        for name, bounds in ranges.items():
            assert bounds.low <= getattr(child, name) <= bounds.high
        unperturbed = {f.name for f in dataclasses.fields(TINY_PPO)} - set(ranges)
        assert all(getattr(child, name) == getattr(TINY_PPO, name) for name in unperturbed)


def test_the_user_sets_the_bounds() -> None:
    bounds = {"gamma": (0.985, 0.99), "learning_rate": (1e-3, 3e-3)}
    rng = np.random.default_rng(4)
    children = [perturb_config(TINY_PPO, 1.0, rng, bounds) for _ in range(500)]
    assert min(c.gamma for c in children) == 0.985
    assert max(c.gamma for c in children) == 0.99
    assert all(1e-3 <= c.learning_rate <= 3e-3 for c in children)
    generator = Generator(TINY_PPO, 1.0, 1.0, perturb_bounds=bounds)
    origin = generator.propose(_donors([1.0]), 0.0, np.random.default_rng(5))
    assert 0.985 <= origin.agent_config.gamma <= 0.99


def test_a_value_set_outside_the_bounds_is_not_pulled_in_to_them() -> None:
    outside = dataclasses.replace(TINY_PPO, learning_rate=1e-2, gamma=0.85)  # bounds 3e-3 and 0.9 above/below
    assert perturb_config(outside, 0.0, np.random.default_rng(7)) == outside
    children = [perturb_config(outside, 0.25, np.random.default_rng(seed)) for seed in range(200)]
    assert max(c.learning_rate for c in children) == 1e-2
    assert any(3e-3 < c.learning_rate < 1e-2 for c in children)
    assert min(c.gamma for c in children) == 0.85


def test_zero_scale_changes_nothing_and_draws_are_seeded() -> None:
    assert perturb_config(TINY_PPO, 0.0, np.random.default_rng(5)) == TINY_PPO
    first = perturb_config(TINY_PPO, 0.5, np.random.default_rng(6))
    assert first == perturb_config(TINY_PPO, 0.5, np.random.default_rng(6))


RESAMPLE_PROB = 0.25
SEARCH = {"gamma": (0.0, 0.99), "learning_rate": (1e-4, 3e-2)}


def test_resampling_draws_from_the_search_space_in_each_fields_space_at_its_rate() -> None:
    poor = dataclasses.replace(TINY_PPO, learning_rate=3e-2, gamma=0.9)
    rng = np.random.default_rng(11)
    children = [perturb_config(poor, 0.2, rng, SEARCH, RESAMPLE_PROB) for _ in range(DRAWS)]
    step = 1.2 + EPS  # a step moves the learning rate by at most a factor 1 + s
    far = np.array([not (3e-2 / step <= c.learning_rate <= 3e-2 * step) for c in children])
    # a resample lands outside one step's reach unless it falls in the top log(1.2)/log(300) of the space
    reach = math.log(1.2) / math.log(3e-2 / 1e-4)
    expected = RESAMPLE_PROB * (1.0 - reach)
    sigma = math.sqrt(expected * (1 - expected) / DRAWS)
    assert abs(far.mean() - expected) < BINOMIAL_SIGMAS * sigma
    rates = np.array([c.learning_rate for c in children])[far]
    assert rates.min() >= 1e-4
    assert rates.max() <= 3e-2
    # log-uniform: half of the resampled rates lie below the geometric middle of the space
    below = np.mean(rates < math.sqrt(1e-4 * 3e-2 / step))
    assert abs(below - 0.5 / (1.0 - reach)) < 0.06
    horizons = np.array([1.0 / (1.0 - c.gamma) for c in children])
    resampled = horizons[(horizons < 10.0 / step) | (horizons > 10.0 * step)]  # a step keeps 10 within 1.2x
    assert resampled.min() >= 1.0
    assert resampled.max() <= 100.0 + 1e-9
    # 1 - gamma log-uniform in [0.01, 1]: a horizon under 3 bars (from gamma 0.9's 10) in one draw
    assert abs(np.mean(resampled < 3.0) - math.log(3.0) / math.log(100.0) / (1.0 - reach)) < 0.06


def test_without_resampling_the_draws_are_those_of_the_steps_alone() -> None:
    stepped = perturb_config(TINY_PPO, 0.3, np.random.default_rng(12))
    assert perturb_config(TINY_PPO, 0.3, np.random.default_rng(12), None, 0.0) == stepped
    always = perturb_config(TINY_PPO, 0.3, np.random.default_rng(12), None, 1.0)
    assert always != stepped


def test_resampled_log1m_values_never_reach_one() -> None:
    rng = np.random.default_rng(13)
    children = [perturb_config(TINY_PPO, 0.2, rng, {"gae_lambda": (0.8, 1.0)}, 1.0) for _ in range(500)]
    lambdas = np.array([c.gae_lambda for c in children])
    assert lambdas.max() <= 1.0 - 1e-4
    assert lambdas.min() >= 0.8
    assert np.mean(lambdas > 0.99) > 0.3  # 1 - lambda log-uniform in [1e-4, 0.2]


def test_the_first_pod_keeps_the_base_config_and_later_fresh_pods_sample_the_space() -> None:
    generator = Generator(TINY_PPO, 0.2, 1.0, perturb_bounds=SEARCH, resample_prob=RESAMPLE_PROB)
    rng = np.random.default_rng(14)
    assert all(generator.propose([], 0.0, rng, first=True).agent_config == TINY_PPO for _ in range(50))
    fresh = [generator.propose([], 0.0, rng).agent_config for _ in range(DRAWS)]
    rates = np.array([c.learning_rate for c in fresh])
    assert rates.min() >= 1e-4
    assert rates.max() <= 3e-2
    # log-uniform over [1e-4, 3e-2]: half below the geometric middle
    assert abs(np.mean(rates < math.sqrt(1e-4 * 3e-2)) - 0.5) < BINOMIAL_SIGMAS * math.sqrt(0.25 / DRAWS)
    assert len({c.gamma for c in fresh}) == DRAWS  # every field drawn, not kept
    assert all(c.rollout_steps == TINY_PPO.rollout_steps for c in fresh)
    plain = Generator(TINY_PPO, 0.2, 1.0)
    assert all(plain.propose([], 0.0, rng).agent_config == TINY_PPO for _ in range(50))


@dataclasses.dataclass(frozen=True)
class _NoTable:
    rate: float = 0.1


@dataclasses.dataclass(frozen=True)
class _BadField:
    steps: int = 3
    PERTURBABLE: ClassVar[dict[str, tuple[float, float]]] = {"steps": (1.0, 9.0)}


@dataclasses.dataclass(frozen=True)
class _BadBounds:
    rate: float = 0.1
    PERTURBABLE: ClassVar[dict[str, tuple[float, float]]] = {"rate": (0.5, 0.1)}


@dataclasses.dataclass(frozen=True)
class _LogFromZero:
    rate: float = 0.1
    PERTURBABLE: ClassVar[dict[str, tuple[float, float]]] = {"rate": (0.0, 0.5)}


@dataclasses.dataclass(frozen=True)
class _BadSpace:
    rate: float = 0.1
    PERTURBABLE: ClassVar[dict[str, tuple[float, float]]] = {"rate": (0.0, 0.5)}
    PERTURB_SPACES: ClassVar[dict[str, str]] = {"rate": "sqrt"}


@dataclasses.dataclass(frozen=True)
class _Log1mAboveOne:
    rate: float = 0.1
    PERTURBABLE: ClassVar[dict[str, tuple[float, float]]] = {"rate": (0.0, 2.0)}
    PERTURB_SPACES: ClassVar[dict[str, str]] = {"rate": "log1m"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"rate": 0.1}, "not a dataclass instance"),
        (_NoTable(), "has no PERTURBABLE"),
        (_BadField(), "not a float field"),
        (_BadBounds(), "0 <= min <= max"),
        (_LogFromZero(), "log-space field needs min > 0"),
        (_BadSpace(), "the space 'sqrt'"),
        (_Log1mAboveOne(), r"log\(1 - x\) field needs max <= 1"),
    ],
)
def test_configs_the_generator_cannot_perturb_are_refused(config: object, message: str) -> None:
    with pytest.raises(TournamentError, match=message):
        check_agent_config(config)


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        ({"hidden_sizes": (1.0, 2.0)}, r"perturb_bounds names \['hidden_sizes'\]"),
        ({"gamma": (0.99, 0.9)}, "perturb_bounds of 'gamma' are"),
        ({"learning_rate": (0.0, 1e-3)}, "log-space field needs min > 0"),
    ],
)
def test_bad_user_bounds_are_refused(bounds: dict[str, tuple[float, float]], message: str) -> None:
    with pytest.raises(TournamentError, match=message):
        check_agent_config(TINY_PPO, bounds)
