"""The generator: rank-softmax parent choice, bounded multiplicative perturbation, fresh pods at rate."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from engine._tournament_kit import TINY_PPO
from podracer import Leaderboard, TournamentError
from podracer.generator import Generator, perturb_config, rank_softmax_probabilities
from podracer.leaderboard import Candidate
from podracer.pod import check_agent_config, config_to_record

DRAWS = 4000
CHI2_CRITICAL_DF3_P001 = 16.27
"""Chi-square critical value, 3 degrees of freedom, p = 0.001."""
BINOMIAL_SIGMAS = 4.0


def _board(tmp_path: Path, scores: list[float]) -> Leaderboard:
    board = Leaderboard.create(tmp_path, capacity=len(scores))
    for pod_id, score in enumerate(scores):
        candidate = Candidate(pod_id, None, 0, 1, score, 10, pod_id, config_to_record(TINY_PPO))
        board.offer(candidate, {"w": torch.zeros(1)})
    return board


def _generator(fresh_pod_prob: float, perturb_scale: float = 0.25, temperature: float = 1.0) -> Generator:
    return Generator(TINY_PPO, fresh_pod_prob, perturb_scale, temperature)


def test_rank_softmax_probabilities() -> None:
    probabilities = rank_softmax_probabilities(4, temperature=1.0)
    expected = np.exp(-np.arange(4.0)) / np.exp(-np.arange(4.0)).sum()
    np.testing.assert_allclose(probabilities, expected)
    assert np.all(np.diff(probabilities) < 0)
    flatter = rank_softmax_probabilities(4, temperature=100.0)
    assert flatter[0] < probabilities[0]
    assert np.ptp(flatter) < 0.01


def test_parent_choice_follows_rank_softmax(tmp_path: Path) -> None:
    board = _board(tmp_path, [0.4, -3.0, 9.0, 0.1])
    rank_of_pod = {entry.pod_id: rank for rank, entry in enumerate(board.entries)}
    generator, rng = _generator(fresh_pod_prob=0.0), np.random.default_rng(0)
    parents = [generator.propose(board, rng).parent for _ in range(DRAWS)]
    counts = Counter(rank_of_pod[parent.pod_id] for parent in parents if parent is not None)
    assert sum(counts.values()) == DRAWS
    expected = rank_softmax_probabilities(4, 1.0) * DRAWS
    observed = np.array([counts[rank] for rank in range(4)])
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < CHI2_CRITICAL_DF3_P001, (observed, expected)


def test_fresh_pods_come_at_the_stated_rate(tmp_path: Path) -> None:
    board = _board(tmp_path, [1.0, 0.5])
    generator, rng = _generator(fresh_pod_prob=0.3), np.random.default_rng(1)
    origins = [generator.propose(board, rng) for _ in range(DRAWS)]
    fresh = [o for o in origins if o.parent is None]
    sigma = math.sqrt(DRAWS * 0.3 * 0.7)
    assert abs(len(fresh) - 0.3 * DRAWS) < BINOMIAL_SIGMAS * sigma
    assert all(o.agent_config == TINY_PPO for o in fresh)
    assert all(o.agent_config != TINY_PPO for o in origins if o.parent is not None)


def test_an_empty_board_gives_fresh_pods_only(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    generator, rng = _generator(fresh_pod_prob=0.0), np.random.default_rng(2)
    assert all(generator.propose(board, rng).parent is None for _ in range(50))


def test_perturbation_is_multiplicative_and_within_bounds() -> None:
    rng = np.random.default_rng(3)
    bounds = check_agent_config(TINY_PPO)
    scale = 0.25
    for _ in range(500):
        child = perturb_config(TINY_PPO, scale, rng)
        for name, (low, high) in bounds.items():
            value, parent_value = getattr(child, name), getattr(TINY_PPO, name)
            assert low <= value <= high
            if parent_value > 0 and low < value < high:
                assert 1 / (1 + scale) - 1e-12 <= value / parent_value <= 1 + scale + 1e-12
        unperturbed = {f.name for f in dataclasses.fields(TINY_PPO)} - set(bounds)
        assert all(getattr(child, name) == getattr(TINY_PPO, name) for name in unperturbed)


def test_perturbation_clamps_to_the_bounds() -> None:
    at_top = dataclasses.replace(TINY_PPO, gamma=0.9999, clip_coef=0.05)
    rng = np.random.default_rng(4)
    children = [perturb_config(at_top, 1.0, rng) for _ in range(200)]
    assert max(c.gamma for c in children) == 0.9999
    assert min(c.clip_coef for c in children) == 0.05
    assert any(c.gamma < 0.9999 for c in children)


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


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"rate": 0.1}, "not a dataclass instance"),
        (_NoTable(), "has no PERTURBABLE"),
        (_BadField(), "not a float field"),
        (_BadBounds(), "0 <= min <= max"),
    ],
)
def test_configs_the_generator_cannot_perturb_are_refused(config: object, message: str) -> None:
    with pytest.raises(TournamentError, match=message):
        check_agent_config(config)
