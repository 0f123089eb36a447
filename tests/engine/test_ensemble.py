"""The ensemble: the mean of the top-k leaderboard agents' deterministic actions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine._tournament_kit import OBS_DIM, ROUND_ENV_STEPS, make_agent, new_tournament, tournament_config
from podracer import EnsemblePolicy, Leaderboard, TournamentError


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Leaderboard:
    run_dir = tmp_path_factory.mktemp("ensemble")
    config = tournament_config(pool_size=3, budget_env_steps=9 * ROUND_ENV_STEPS, leaderboard_size=3)
    return new_tournament(run_dir, config).run().leaderboard


def test_the_ensemble_averages_the_top_k_actions(board: Leaderboard) -> None:
    obs = torch.randn(32, OBS_DIM, generator=torch.Generator().manual_seed(0))
    agents = [board.load_agent(rank, make_agent) for rank in range(3)]
    actions = [agent.act(obs) for agent in agents]
    assert not torch.equal(actions[0], actions[1])
    ensemble = EnsemblePolicy.from_leaderboard(board, k=3, agent_factory=make_agent)
    torch.testing.assert_close(ensemble(obs), torch.stack(actions).mean(dim=0))
    single = EnsemblePolicy.from_leaderboard(board, k=1, agent_factory=make_agent)
    torch.testing.assert_close(single(obs), actions[0])


@pytest.mark.parametrize("k", [0, 4])
def test_k_outside_the_leaderboard_is_refused(board: Leaderboard, k: int) -> None:
    with pytest.raises(TournamentError, match=f"k={k} but the leaderboard holds 3 entries"):
        EnsemblePolicy.from_leaderboard(board, k=k, agent_factory=make_agent)


def test_an_empty_ensemble_is_refused() -> None:
    with pytest.raises(TournamentError, match="at least one agent"):
        EnsemblePolicy([])


def test_a_leaderboard_rebuilt_from_disk_gives_the_same_ensemble(board: Leaderboard, tmp_path: Path) -> None:
    obs = torch.randn(8, OBS_DIM, generator=torch.Generator().manual_seed(1))
    reopened = Leaderboard.open(board.directory)
    first = EnsemblePolicy.from_leaderboard(board, k=2, agent_factory=make_agent)
    second = EnsemblePolicy.from_leaderboard(reopened, k=2, agent_factory=make_agent)
    assert torch.equal(first(obs), second(obs))
