"""The top-k ensemble trades the average of its agents' target weights, not of their raw scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from finpod.backtest.ensemble import ensemble_policy, target_weights
from finpod.errors import SpecError
from finpod.pipeline.main import select
from finpod.spec import Spec
from tests.app.tiny import tiny_spec


class _Fixed:
    """An agent whose deterministic action is one fixed row."""

    def __init__(self, row: list[float]) -> None:
        self.row = torch.tensor([row])

    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        return self.row.expand(obs.shape[0], -1)


class _Board:
    """A leaderboard of fixed agents, each its own lineage but ``same_lineage`` (ranks sharing rank 0's)."""

    def __init__(self, agents: list[_Fixed], same_lineage: frozenset[int] = frozenset()) -> None:
        self.entries = list(range(len(agents)))
        self.agents = agents
        self.lineages = [0 if rank in same_lineage else rank for rank in self.entries]

    def load_agent(self, rank: int, factory: Any) -> _Fixed:
        return self.agents[rank]

    def top_lineage_ranks(self, k: int) -> list[int]:
        firsts = [rank for rank in self.entries if self.lineages.index(self.lineages[rank]) == rank]
        return firsts[:k]


# Raw scores [0.1, 0.1, 0] mean weights [0.5, 0.5, 0]; [1, 0, 0] means all cash. Averaging the
# weights gives [0.75, 0.25, 0]; averaging raw scores would give [0.55, 0.05, 0] -> [0.92, 0.08, 0].
SMALL, CASH = [0.1, 0.1, 0.0], [1.0, 0.0, 0.0]
EXPECTED = [0.75, 0.25, 0.0]


def test_target_weights_follow_the_env_rule() -> None:
    rows = torch.tensor([[0.1, 0.1, 0.0], [0.0, 0.0, 0.0], [2.0, -1.0, 1.0]])
    expected = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.5, 0.0, 0.5]])
    before = rows.clone()
    torch.testing.assert_close(target_weights(rows), expected)
    assert torch.equal(rows, before)  # the caller's actions are left alone


def test_ensemble_averages_target_weights() -> None:
    policy = ensemble_policy([_Fixed(SMALL), _Fixed(CASH)], "weights")  # type: ignore[list-item]
    action = policy(torch.zeros(2, 4))
    torch.testing.assert_close(target_weights(action), torch.tensor([EXPECTED, EXPECTED]))


def test_ensemble_averages_share_deltas() -> None:
    policy = ensemble_policy([_Fixed([0.2, -1.0]), _Fixed([0.6, 0.0])], "share_delta")  # type: ignore[list-item]
    torch.testing.assert_close(policy(torch.zeros(1, 4)), torch.tensor([[0.4, -0.5]]))


def test_select_builds_the_weight_averaging_ensemble() -> None:
    spec: Spec = tiny_spec(Path("unused"))
    board = _Board([_Fixed(SMALL), _Fixed(CASH)])
    policies = select(spec, board, factory=None)  # type: ignore[arg-type]
    assert list(policies) == ["best", "ensemble_top2"]
    action = policies["ensemble_top2"](torch.zeros(1, 4))
    torch.testing.assert_close(target_weights(action), torch.tensor([EXPECTED]))


def test_select_takes_ensemble_members_from_distinct_lineages() -> None:
    spec: Spec = tiny_spec(Path("unused"))
    assert spec.tournament.ensemble_k >= 2
    board = _Board([_Fixed(SMALL), _Fixed(SMALL), _Fixed(CASH)], same_lineage=frozenset({1}))
    policies = select(spec, board, factory=None)  # type: ignore[arg-type]
    assert list(policies) == ["best", "ensemble_top2"]  # rank 1 is rank 0's descendant: skipped
    action = policies["ensemble_top2"](torch.zeros(1, 4))
    torch.testing.assert_close(target_weights(action), torch.tensor([EXPECTED]))
    one_lineage = _Board([_Fixed(SMALL), _Fixed(CASH)], same_lineage=frozenset({1}))
    assert list(select(spec, one_lineage, factory=None)) == ["best"]  # type: ignore[arg-type]


class _Archive:
    """A trajectory archive of fixed agents (in round order)."""

    def __init__(self, agents: list[_Fixed]) -> None:
        self.entries = list(range(len(agents)))
        self.agents = agents

    def load_agent(self, position: int, factory: Any) -> _Fixed:
        return self.agents[position]


def test_select_adds_the_trajectory_ensemble_of_every_archived_snapshot() -> None:
    spec: Spec = tiny_spec(Path("unused"))
    board = _Board([_Fixed(SMALL)])
    archive = _Archive([_Fixed(SMALL), _Fixed(CASH), _Fixed(SMALL), _Fixed(CASH)])
    policies = select(spec, board, factory=None, archive=archive)  # type: ignore[arg-type]
    assert list(policies) == ["best", "trajectory4"]
    action = policies["trajectory4"](torch.zeros(1, 4))
    torch.testing.assert_close(target_weights(action), torch.tensor([EXPECTED]))
    # one archived snapshot is no ensemble
    assert list(select(spec, board, None, _Archive([_Fixed(SMALL)]))) == ["best"]  # type: ignore[arg-type]


def test_a_spec_silent_on_the_archive_keeps_its_32_best_validated_rounds() -> None:
    spec = Spec.from_toml(Path(__file__).resolve().parents[2] / "strategies" / "demo.toml")
    assert (spec.tournament.archive_size, spec.tournament.archive_rule) == (32, "score")
    assert (spec.tournament_config().archive_size, spec.tournament_config().archive_rule) == (32, "score")
    stated = spec.with_(tournament={"archive_size": 8}).with_(frequency="1min")
    assert stated.tournament_config().archive_size == 8
    assert spec.with_(tournament={"archive_size": 0}).tournament_config().archive_size == 0


def test_an_archive_too_small_for_an_ensemble_is_a_one_line_error() -> None:
    spec = Spec.from_toml(Path(__file__).resolve().parents[2] / "strategies" / "demo.toml")
    for size in (1, 2):
        with pytest.raises(
            SpecError, match=rf"tournament.archive_size: {size} .* fix: use 0 \(no archive\) or at least 3"
        ):
            spec.with_(tournament={"archive_size": size})
    plain = spec.with_(tournament={"archive_size": 0})
    assert plain.spec_hash() != spec.with_(tournament={"archive_size": 16}).spec_hash()


def test_the_archive_rule_reaches_the_tournament_and_changes_the_hash_only_with_an_archive() -> None:
    spec = Spec.from_toml(Path(__file__).resolve().parents[2] / "strategies" / "demo.toml")
    spec = spec.with_(tournament={"archive_size": 0, "archive_rule": "even"})  # as before the defaults
    scored = spec.with_(tournament={"archive_size": 32, "archive_rule": "score"})
    assert scored.tournament_config().archive_rule == "score"
    even = spec.with_(tournament={"archive_size": 32})
    assert scored.spec_hash() != even.spec_hash()  # another archive: another run
    assert even.spec_hash() == spec.with_(tournament={"archive_size": 32, "archive_rule": "even"}).spec_hash()
    # without an archive the rule keeps nothing: the hash is the spec's as before the setting existed
    assert spec.with_(tournament={"archive_rule": "score"}).spec_hash() == spec.spec_hash()
    with pytest.raises(SpecError, match=r"tournament\.archive_rule"):
        spec.with_(tournament={"archive_rule": "best"})


# Member A holds half cash and half asset 1; member B all asset 2. Fully invested, A's own book is all
# asset 1, so the ensemble holds [0, 0.5, 0.5]; averaging first and then dropping cash would give
# [0, 1/3, 2/3] (A's cash weight shrinking its vote).
HALF_CASH, ALL_SECOND = [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]
FULLY_INVESTED_EXPECTED = [0.0, 0.5, 0.5]


def test_a_fully_invested_ensemble_averages_each_member_s_invested_book() -> None:
    members: Any = [_Fixed(HALF_CASH), _Fixed(ALL_SECOND)]
    invested = ensemble_policy(members, "weights", fully_invested=True)(torch.zeros(2, 4))
    torch.testing.assert_close(invested, torch.tensor([FULLY_INVESTED_EXPECTED] * 2))
    torch.testing.assert_close(target_weights(invested, fully_invested=True), invested)
    with_cash = ensemble_policy(members, "weights")(torch.zeros(1, 4))
    torch.testing.assert_close(with_cash, torch.tensor([[0.25, 0.25, 0.5]]))


def test_select_builds_the_ensembles_under_the_spec_s_mandate() -> None:
    spec = tiny_spec(Path("unused")).with_(env={"fully_invested": True}, agent={"pathwise_coef": 0.0})
    board = _Board([_Fixed(HALF_CASH), _Fixed(ALL_SECOND)])
    policies = select(spec, board, factory=None)  # type: ignore[arg-type]
    action = policies["ensemble_top2"](torch.zeros(1, 4))
    torch.testing.assert_close(action, torch.tensor([FULLY_INVESTED_EXPECTED]))
