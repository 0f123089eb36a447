"""The trajectory archive: judged rounds kept evenly spaced over a run (or the best-scoring ones),
durable, resumable."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from engine._tournament_kit import (
    TINY_PPO,
    Validation,
    make_agent,
    make_env,
    new_tournament,
    resume_tournament,
    tournament_config,
)
from podracer import SnapshotError, TournamentError
from podracer.api import Tournament, TrajectoryArchive, archive_of
from podracer.leaderboard import INDEX_NAME, Candidate
from podracer.pod import config_to_record
from podracer.runfiles import read_state
from podracer.snapshot import SNAPSHOT_SUFFIX


def _candidate(pod_id: int, score: float = 0.0) -> Candidate:
    return Candidate(
        pod_id=pod_id,
        parent_id=None,
        lineage_id=pod_id,
        generation=0,
        policy_version=1,
        score=score,
        env_steps=10,
        seed=pod_id,
        agent_config=config_to_record(TINY_PPO),
    )


def _offer_rounds(archive: TrajectoryArchive, rounds: range, state: dict[str, Any] | None = None) -> None:
    for judged in rounds:
        archive.offer(judged, _candidate(judged % 3), state or {"w": torch.full((2,), float(judged))})


def _rounds(archive: TrajectoryArchive) -> list[int]:
    return [entry.admission for entry in archive.entries]


def test_keeps_every_round_until_full_then_thins_to_an_even_stride(tmp_path: Path) -> None:
    archive = TrajectoryArchive.create(tmp_path, capacity=8)
    _offer_rounds(archive, range(1, 9))
    assert _rounds(archive) == list(range(1, 9))
    _offer_rounds(archive, range(9, 10))  # the ninth overflows: stride 2, round 9 itself is dropped
    assert (archive.stride, _rounds(archive)) == (2, [2, 4, 6, 8])
    _offer_rounds(archive, range(10, 101))
    assert (archive.stride, _rounds(archive)) == (16, [16, 32, 48, 64, 80, 96])
    assert [archive.load_state(i)["w"][0].item() for i in range(6)] == [16.0, 32.0, 48.0, 64.0, 80.0, 96.0]
    # only the kept snapshots are on disk
    assert len(list(tmp_path.glob(f"*{SNAPSHOT_SUFFIX}"))) == 6


def test_reopens_with_its_stride_and_goes_on(tmp_path: Path) -> None:
    archive = TrajectoryArchive.create(tmp_path, capacity=4)
    _offer_rounds(archive, range(1, 20))
    again = TrajectoryArchive.open(tmp_path)
    assert (again.stride, _rounds(again)) == (archive.stride, _rounds(archive)) == (4, [4, 8, 12, 16])
    trained = make_agent(TINY_PPO, 7)
    _offer_rounds(again, range(20, 33), trained.state_dict())
    assert _rounds(again) == [8, 16, 24, 32]
    rebuilt = again.load_agent(3, make_agent)
    pairs = zip(rebuilt.model.parameters(), trained.model.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_refuses_a_bad_capacity_a_corrupt_index_and_a_missing_position(tmp_path: Path) -> None:
    with pytest.raises(TournamentError, match="archive capacity is 2; it must be at least 3"):
        TrajectoryArchive.create(tmp_path / "two", capacity=2)
    archive = TrajectoryArchive.create(tmp_path / "a", capacity=4)
    with pytest.raises(TournamentError, match="archive position 0 does not exist; it has 0 entries"):
        archive.load_state(0)
    index = tmp_path / "a" / INDEX_NAME
    record = json.loads(index.read_text())
    index.write_text(json.dumps({**record, "stride": 0}))
    with pytest.raises(SnapshotError, match="no valid capacity/stride: corrupt index"):
        TrajectoryArchive.open(tmp_path / "a")


def test_a_config_with_an_archive_of_one_is_a_one_line_error() -> None:
    for size in (1, 2):
        with pytest.raises(
            TournamentError, match=rf"archive_size is {size}; use 0 \(no archive\) or at least 3"
        ):
            tournament_config(archive_size=size)


def test_a_tournament_archives_its_judged_rounds_and_resume_keeps_them(tmp_path: Path) -> None:
    config = tournament_config(archive_size=4)
    tournament = new_tournament(tmp_path, config)
    result = tournament.run()
    tournament.close()
    archive = archive_of(tmp_path)
    assert archive is not None
    assert tournament.archive is not None
    rounds = _rounds(archive)
    assert result.rounds > 4
    assert 2 <= len(rounds) <= 4
    assert rounds == [archive.stride * (i + 1) for i in range(len(rounds))]  # evenly spaced from the start
    assert rounds[-1] > result.rounds - archive.stride  # ... to the end of the run
    assert len({entry.pod_id for entry in archive.entries}) >= 2  # every pod's rounds, not one pod's
    # The archive survives a reopen (no new budget: nothing changes), and a run without one has none.
    resume_tournament(tmp_path).close()
    reopened = archive_of(tmp_path)
    assert reopened is not None
    assert _rounds(reopened) == rounds
    new_tournament(tmp_path / "plain", tournament_config()).run()
    assert archive_of(tmp_path / "plain") is None


def test_a_resumed_run_forgets_rounds_its_state_never_saved(tmp_path: Path) -> None:
    archive = TrajectoryArchive.create(tmp_path, capacity=8)
    _offer_rounds(archive, range(1, 8))
    dropped = archive.forget_after(5)  # the state saved 5 judged rounds; 6 and 7 are judged again
    assert [e.admission for e in dropped] == [6, 7]
    assert _rounds(archive) == [1, 2, 3, 4, 5]
    _offer_rounds(archive, range(6, 8))
    assert _rounds(TrajectoryArchive.open(tmp_path)) == [1, 2, 3, 4, 5, 6, 7]
    assert len(list(tmp_path.glob(f"*{SNAPSHOT_SUFFIX}"))) == 7


def test_a_capacity_of_three_always_keeps_an_ensemble(tmp_path: Path) -> None:
    archive = TrajectoryArchive.create(tmp_path, capacity=3)
    for judged in range(1, 200):
        _offer_rounds(archive, range(judged, judged + 1))
        if judged >= 2:
            assert len(archive.entries) >= 2, judged


def test_resume_forgets_archived_rounds_its_state_never_saved(tmp_path: Path) -> None:
    new_tournament(tmp_path, tournament_config(archive_size=4)).run()
    archive = archive_of(tmp_path)
    assert archive is not None
    rounds = read_state(tmp_path).progress.rounds
    # A kill after the archive's write and before state.json's: the archive holds a later round
    # (a multiple of twice the stride, so it survives the thinning its own offer may cause).
    ahead = (rounds // (4 * archive.stride) + 1) * 4 * archive.stride
    assert archive.offer(ahead, _candidate(0), make_agent(TINY_PPO, 1).state_dict()) is not None
    resume_tournament(tmp_path).close()
    reopened = archive_of(tmp_path)
    assert reopened is not None
    assert reopened.entries
    assert all(entry.admission <= rounds for entry in reopened.entries)
    assert len(list((tmp_path / "archive").glob(f"*{SNAPSHOT_SUFFIX}"))) == len(reopened.entries)


def test_resume_refuses_a_run_whose_archive_was_deleted(tmp_path: Path) -> None:
    new_tournament(tmp_path, tournament_config(archive_size=4)).run()
    (tmp_path / "archive" / INDEX_NAME).unlink()
    with pytest.raises(SnapshotError, match="its trajectory archive was deleted; restore the folder"):
        resume_tournament(tmp_path)


def _offer_scores(archive: TrajectoryArchive, scores: dict[int, float]) -> list[bool]:
    """Offer each judged round (pod 0 throughout) with its score; whether each was archived."""
    return [
        archive.offer(judged, _candidate(0, score), {"w": torch.full((2,), float(judged))}) is not None
        for judged, score in scores.items()
    ]


def test_a_score_archive_keeps_the_best_scoring_rounds_of_any_pod(tmp_path: Path) -> None:
    archive = TrajectoryArchive.create(tmp_path, capacity=3, rule="score")
    # Rounds 1-3 fill it; 4 (0.5) beats the lowest (round 2, 0.1); 5 ties the lowest kept (0.2,
    # round 3): the earlier round stays; 6 is below every score; 7 beats 0.2 again.
    taken = _offer_scores(archive, {1: 0.3, 2: 0.1, 3: 0.2, 4: 0.5, 5: 0.2, 6: -1.0, 7: 0.25})
    assert taken == [True, True, True, True, False, False, True]
    assert (archive.stride, _rounds(archive)) == (1, [1, 4, 7])  # in round order; one pod, three rounds
    assert sorted(entry.score for entry in archive.entries) == [0.25, 0.3, 0.5]
    assert [archive.load_state(i)["w"][0].item() for i in range(3)] == [1.0, 4.0, 7.0]
    assert len(list(tmp_path.glob(f"*{SNAPSHOT_SUFFIX}"))) == 3  # the dropped rounds' files are gone
    # A reopen keeps the rule; equal scores drop the later round first.
    again = TrajectoryArchive.open(tmp_path)
    assert (again.rule, _rounds(again)) == ("score", [1, 4, 7])
    assert _offer_scores(again, {8: 0.4, 9: 0.4, 10: 0.4}) == [True, True, False]
    assert _rounds(again) == [4, 8, 9]
    assert again.forget_after(8)
    assert _rounds(again) == [4, 8]


def test_an_archive_written_before_the_rule_reads_as_even_and_a_rule_mismatch_is_refused(
    tmp_path: Path,
) -> None:
    archive = TrajectoryArchive.create(tmp_path / "old", capacity=4)
    _offer_rounds(archive, range(1, 4))
    index = tmp_path / "old" / INDEX_NAME
    record = json.loads(index.read_text())
    del record["rule"]
    index.write_text(json.dumps(record))
    assert TrajectoryArchive.open(tmp_path / "old").rule == "even"
    index.write_text(json.dumps({**record, "rule": "lucky"}))
    with pytest.raises(SnapshotError, match="names the archive rule 'lucky': corrupt or foreign index"):
        TrajectoryArchive.open(tmp_path / "old")
    TrajectoryArchive.create(tmp_path / "empty", capacity=4)  # an empty even archive ...
    with pytest.raises(TournamentError, match="holds another archive; pick a new run folder"):
        TrajectoryArchive.create(tmp_path / "empty", capacity=4, rule="score")  # ... is not a score one
    with pytest.raises(TournamentError, match=r"archive rule is 'best'; use one of \['even', 'score'\]"):
        TrajectoryArchive.create(tmp_path / "bad", capacity=4, rule="best")  # type: ignore[arg-type]
    with pytest.raises(TournamentError, match=r"archive_rule is 'best'; use one of \['even', 'score'\]"):
        tournament_config(archive_size=4, archive_rule="best")


def test_a_tournament_with_a_score_archive_keeps_its_best_validated_rounds(tmp_path: Path) -> None:
    config = tournament_config(archive_size=4, archive_rule="score")
    tournament = new_tournament(tmp_path, config)
    tournament.run()
    tournament.close()
    archive = archive_of(tmp_path)
    assert archive is not None
    assert archive.rule == "score"
    scores = [
        json.loads(line)["data"]["score"]
        for line in (tmp_path / "events.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "round_finished"
    ]
    assert len(scores) > 4
    kept = sorted((entry.score for entry in archive.entries), reverse=True)
    assert kept == sorted(scores, reverse=True)[:4]
    board_scores = set(tournament.leaderboard.scores())
    assert max(entry.score for entry in archive.entries) == max(board_scores)  # the best is on both
    # A resume with the other rule is another run.
    with pytest.raises(TournamentError, match="the tournament config differs from the one"):
        Tournament(
            tournament_config(archive_size=4),
            tmp_path,
            make_agent,
            TINY_PPO,
            make_env,
            Validation(),
            resume=True,
        )


def test_a_score_archive_ranks_no_round_before_leaderboard_after(tmp_path: Path) -> None:
    calls = itertools.count()
    lock = threading.Lock()

    def worse_each_time(policy: object) -> float:  # the earliest rounds score best
        with lock:
            return -float(next(calls))

    config = tournament_config(archive_size=4, archive_rule="score", leaderboard_after=0.5)
    Tournament(config, tmp_path, make_agent, TINY_PPO, make_env, worse_each_time).run()
    archive = archive_of(tmp_path)
    assert archive is not None
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    judged = [event for event in events if event["kind"] == "round_finished"]
    budget = config.budget_env_steps
    assert budget is not None
    ranked = {n: e["data"]["score"] for n, e in enumerate(judged, start=1) if e["env_steps"] >= budget / 2}
    assert 4 < len(ranked) < len(judged)  # some rounds before the half, more than 4 after
    # the best four of the ranked rounds, not the better-scoring ones before the half
    assert {entry.admission for entry in archive.entries} <= set(ranked)
    assert sorted(entry.score for entry in archive.entries) == sorted(ranked.values())[-4:]
