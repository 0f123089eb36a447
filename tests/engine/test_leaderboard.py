"""The leaderboard: top-K order, the admission rule, durable index, refusal of corrupt or foreign files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine._tournament_kit import OBS_DIM, TINY_PPO, make_agent
from podracer import Leaderboard, SnapshotError, TournamentError
from podracer.leaderboard import INDEX_NAME, Candidate
from podracer.pod import config_from_record, config_to_record


def _candidate(pod_id: int, score: float) -> Candidate:
    return Candidate(
        pod_id=pod_id,
        parent_id=None,
        lineage_id=pod_id,
        generation=0,
        policy_version=pod_id,
        score=score,
        env_steps=100 * pod_id,
        seed=pod_id,
        agent_config=config_to_record(TINY_PPO),
    )


def _state(value: float) -> dict[str, torch.Tensor]:
    return {"w": torch.full((3,), value)}


def _fill(board: Leaderboard, scores: list[float]) -> None:
    for pod_id, score in enumerate(scores):
        board.offer(_candidate(pod_id, score), _state(float(pod_id)))


def test_keeps_the_best_k_best_first_with_ties_in_admission_order(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=3)
    _fill(board, [0.1, 0.5, 0.3, 0.5, 0.2])
    assert [(e.pod_id, e.score) for e in board.entries] == [(1, 0.5), (3, 0.5), (2, 0.3)]
    assert [board.load_state(rank)["w"][0].item() for rank in range(3)] == [1.0, 3.0, 2.0]


def test_admission_needs_room_or_a_strictly_better_score(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    assert board.admits(5, -1e9)
    _fill(board, [0.4, 0.6])
    assert not board.admits(9, 0.4)
    assert board.offer(_candidate(9, 0.4), _state(9.0)) is None
    assert board.admits(10, 0.41)
    entry = board.offer(_candidate(10, 0.41), _state(10.0))
    assert entry is not None
    assert board.rank_of(entry) == 1
    assert [e.pod_id for e in board.entries] == [1, 10]


def test_a_pod_holds_one_entry_its_best_snapshot(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=3)
    _fill(board, [0.5, 0.1])
    assert not board.admits(0, 0.5)
    assert board.offer(_candidate(0, 0.3), _state(30.0)) is None
    better = board.offer(_candidate(0, 0.7), _state(70.0))
    assert better is not None
    assert [(e.pod_id, e.score) for e in board.entries] == [(0, 0.7), (1, 0.1)]
    assert board.load_state(0)["w"][0].item() == 70.0
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == sorted(e.snapshot.name for e in board.entries)


def test_evicted_snapshots_are_deleted_and_kept_ones_stay(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    _fill(board, [0.1, 0.2, 0.3])
    snapshots = sorted(p.name for p in tmp_path.glob("*.pt"))
    assert snapshots == sorted(e.snapshot.name for e in board.entries)
    assert len(snapshots) == 2


def test_index_survives_reopening(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=3)
    _fill(board, [0.3, 0.1, 0.2, 0.4])
    reopened = Leaderboard.open(tmp_path)
    assert reopened.entries == board.entries
    assert reopened.capacity == 3
    reopened.verify()
    entry = reopened.offer(_candidate(7, 0.35), _state(7.0))
    assert entry is not None
    assert entry.admission == 4


def test_load_agent_rebuilds_the_agent_with_its_weights(tmp_path: Path) -> None:
    agent = make_agent(TINY_PPO, seed=3)
    board = Leaderboard.create(tmp_path, capacity=2)
    candidate = _candidate(0, 1.0)
    board.offer(Candidate(**{**candidate.__dict__, "seed": 3}), agent.state_dict())
    loaded = Leaderboard.open(tmp_path).load_agent(0, make_agent)
    obs = torch.randn(5, OBS_DIM, generator=torch.Generator().manual_seed(0))
    assert torch.equal(loaded.act(obs), agent.act(obs))


def test_unknown_rank_is_a_clear_error(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    _fill(board, [0.1])
    with pytest.raises(TournamentError, match="rank 1 does not exist; it has 1 entries"):
        board.load_state(1)


def test_bad_capacity_and_existing_board_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TournamentError, match="at least 1"):
        Leaderboard.create(tmp_path / "a", capacity=0)
    Leaderboard.create(tmp_path / "b", capacity=1)
    with pytest.raises(TournamentError, match="already holds a leaderboard"):
        Leaderboard.create(tmp_path / "b", capacity=1)


def test_leftovers_of_an_interrupted_admission_are_removed(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    _fill(board, [0.1, 0.2])
    (tmp_path / "pod-000099-v000001-0123456789abcdef.pt").write_bytes(b"orphan")
    (tmp_path / ".index.json.abc.tmp").write_bytes(b"half")
    removed = Leaderboard.open(tmp_path).remove_unreferenced()
    assert sorted(p.name for p in removed) == [
        ".index.json.abc.tmp",
        "pod-000099-v000001-0123456789abcdef.pt",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [INDEX_NAME, *(e.snapshot.name for e in board.entries)]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"format": "podracer.leaderboard", "version": 1, "capa', "not valid JSON"),
        ('{"some": "other tool"}', "foreign file"),
        (
            '{"format": "podracer.leaderboard", "version": 2, "capacity": 2, "admissions": 1, '
            '"entries": [{"pod_id": 1}]}',
            "malformed entry",
        ),
        (
            '{"format": "podracer.leaderboard", "version": 1, "capacity": 2, "admissions": 0, "entries": []}',
            "version 1, this podracer reads version 2",
        ),
    ],
)
def test_corrupt_or_foreign_index_is_refused(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / INDEX_NAME).write_text(content)
    with pytest.raises(SnapshotError, match=message):
        Leaderboard.open(tmp_path)


def test_an_index_pointing_outside_its_folder_is_refused(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    _fill(board, [0.1])
    record = json.loads((tmp_path / INDEX_NAME).read_text())
    record["entries"][0]["snapshot"] = "../../etc/passwd.pt"
    (tmp_path / INDEX_NAME).write_text(json.dumps(record))
    with pytest.raises(SnapshotError, match="outside its folder"):
        Leaderboard.open(tmp_path)


def test_a_corrupted_snapshot_is_refused_on_load(tmp_path: Path) -> None:
    board = Leaderboard.create(tmp_path, capacity=2)
    _fill(board, [0.1, 0.2])
    victim = board.entries[1].snapshot
    victim.write_bytes(victim.read_bytes()[:-10])
    with pytest.raises(SnapshotError, match="truncated or corrupted"):
        Leaderboard.open(tmp_path).verify()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"type": "not_imported_module:Config", "fields": {}}, "import not_imported_module first"),
        ({"type": "podracer.ppo:learning_rate_at", "fields": {}}, "not a dataclass config class"),
        (
            {"type": "podracer.ppo:PPOConfig", "fields": {"no_such_field": 1}},
            "do not fit podracer.ppo:PPOConfig",
        ),
        ({"fields": {}}, "malformed"),
    ],
)
def test_bad_config_records_are_refused(record: dict[str, object], message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        config_from_record(record)


def test_config_records_round_trip() -> None:
    assert config_from_record(config_to_record(TINY_PPO)) == TINY_PPO
