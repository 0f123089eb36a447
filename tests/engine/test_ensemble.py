"""The ensemble: the mean of the deterministic actions of the best agents of DISTINCT lineages."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine._tournament_kit import OBS_DIM, TINY_PPO, make_agent
from podracer import EnsemblePolicy, Leaderboard, TournamentError
from podracer.leaderboard import Candidate
from podracer.pod import config_to_record

LINEAGES = {0: 0, 1: 0, 2: 2, 3: 3}
"""pod id -> lineage id: pod 1 is a child of pod 0 (lineage 0); pods 2 and 3 start lineages."""
SCORES = {0: 0.5, 1: 0.9, 2: 0.7, 3: 0.1}
"""Ranks: pod 1 (lineage 0), pod 2, pod 0 (lineage 0 again), pod 3."""


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Leaderboard:
    board = Leaderboard.create(tmp_path_factory.mktemp("ensemble"), capacity=4)
    for pod_id, lineage_id in LINEAGES.items():
        candidate = Candidate(
            pod_id=pod_id,
            parent_id=0 if pod_id == 1 else None,
            lineage_id=lineage_id,
            generation=1 if pod_id == 1 else 0,
            policy_version=1,
            score=SCORES[pod_id],
            env_steps=10,
            seed=pod_id,
            agent_config=config_to_record(TINY_PPO),
        )
        board.offer(candidate, make_agent(TINY_PPO, pod_id).state_dict())
    return board


def test_members_come_from_distinct_lineages_best_first(board: Leaderboard) -> None:
    assert [e.pod_id for e in board.entries] == [1, 2, 0, 3]
    assert board.top_lineage_ranks(2) == [0, 1]
    assert board.top_lineage_ranks(3) == [0, 1, 3]  # rank 2 (pod 0) shares pod 1's lineage
    assert board.top_lineage_ranks(9) == [0, 1, 3]
    obs = torch.randn(32, OBS_DIM, generator=torch.Generator().manual_seed(0))
    actions = {e.pod_id: board.load_agent(rank, make_agent).act(obs) for rank, e in enumerate(board.entries)}
    assert not torch.equal(actions[1], actions[2])
    ensemble = EnsemblePolicy.from_leaderboard(board, k=3, agent_factory=make_agent)
    torch.testing.assert_close(ensemble(obs), torch.stack([actions[1], actions[2], actions[3]]).mean(dim=0))
    single = EnsemblePolicy.from_leaderboard(board, k=1, agent_factory=make_agent)
    torch.testing.assert_close(single(obs), actions[1])


def test_k_beyond_the_lineages_gives_every_lineage_once(board: Leaderboard) -> None:
    assert len(EnsemblePolicy.from_leaderboard(board, k=4, agent_factory=make_agent).agents) == 3


def test_bad_k_and_empty_boards_are_refused(board: Leaderboard, tmp_path: Path) -> None:
    with pytest.raises(TournamentError, match="k=0"):
        EnsemblePolicy.from_leaderboard(board, k=0, agent_factory=make_agent)
    with pytest.raises(TournamentError, match="leaderboard of 0 entries"):
        EnsemblePolicy.from_leaderboard(Leaderboard.create(tmp_path, 2), k=1, agent_factory=make_agent)
    with pytest.raises(TournamentError, match="at least one agent"):
        EnsemblePolicy([])


def test_a_leaderboard_rebuilt_from_disk_gives_the_same_ensemble(board: Leaderboard) -> None:
    obs = torch.randn(8, OBS_DIM, generator=torch.Generator().manual_seed(1))
    reopened = Leaderboard.open(board.directory)
    first = EnsemblePolicy.from_leaderboard(board, k=2, agent_factory=make_agent)
    second = EnsemblePolicy.from_leaderboard(reopened, k=2, agent_factory=make_agent)
    assert torch.equal(first(obs), second(obs))
