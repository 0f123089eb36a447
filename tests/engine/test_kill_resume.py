"""Kill tests: a tournament SIGKILLed at random moments, ten times, resumes each time intact."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine._kill_child import KILL_TEST_CONFIG
from engine._tournament_kit import Validation, make_agent, resume_tournament
from kill_moment import wait_for_kill_moment
from podracer import Leaderboard, read_events
from podracer.api import archive_of
from podracer.snapshot import load_snapshot

TESTS_DIR = Path(__file__).resolve().parents[1]
KILLS = 10
KILL_SEED = 20261121
MAX_DELAY_AFTER_FIRST_ROUND_S = 0.25
"""Each kill lands at a uniform random moment up to this long after the child's first new round."""
CHILD_PROGRESS_TIMEOUT_S = 120.0
"""How long a child may take to import torch and finish a round before the test gives up."""
MAX_EXTRA_ROUNDS_BEFORE_KILL = 4
"""A kill lands at most this many rounds after the first new one; the budget outlasts ten kills."""
ROUND_FINISHED = b'"kind": "round_finished"'
SCORE_RTOL = 1e-5
"""Re-evaluating a loaded snapshot may run with another torch thread count than the child did."""


def _rounds_logged(run_dir: Path) -> int:
    """Rounds the event log shows (a cheap text count: the parent polls while the child works)."""
    path = run_dir / "events.jsonl"
    return path.read_bytes().count(ROUND_FINISHED) if path.exists() else 0


def _check_intact(run_dir: Path, validation: Validation) -> Leaderboard:
    """The leaderboard opens, every snapshot loads and re-scores to its index score; the pool loads."""
    board = Leaderboard.open(run_dir / "leaderboard")
    board.verify()
    for rank, entry in enumerate(board.entries):
        agent = board.load_agent(rank, make_agent)
        assert validation(agent.act) == pytest.approx(entry.score, rel=SCORE_RTOL)
    state = json.loads((run_dir / "state.json").read_text())
    for pod in state["pool"]:
        load_snapshot(run_dir / "pods" / pod["snapshot_name"])
    archive = archive_of(run_dir)  # the trajectory archive: evenly spaced rounds, every snapshot loads
    assert archive is not None
    rounds = [entry.admission for entry in archive.entries]
    assert rounds == sorted(set(rounds))
    assert all(r % archive.stride == 0 for r in rounds)
    for position in range(len(rounds)):
        archive.load_agent(position, make_agent)
    return board


def test_sigkill_at_random_moments_never_loses_or_corrupts_the_leaderboard(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    rng = random.Random(KILL_SEED)
    validation = Validation()
    inherited = os.environ.get("PYTHONPATH")  # the podracer under test, not whichever one is installed
    child_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *([inherited] if inherited else [])]),
    }
    best_before, entries_before, kills = -float("inf"), 0, 0
    for _ in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, "-m", "engine._kill_child", str(run_dir)], cwd=TESTS_DIR, env=child_env
        )
        wait_for_kill_moment(
            child,
            lambda: _rounds_logged(run_dir),
            rng,
            max_delay_s=MAX_DELAY_AFTER_FIRST_ROUND_S,
            max_extra_rounds=MAX_EXTRA_ROUNDS_BEFORE_KILL,
            progress_timeout_s=CHILD_PROGRESS_TIMEOUT_S,
        )
        child.send_signal(signal.SIGKILL)
        child.wait()
        kills += 1
        board = _check_intact(run_dir, validation)
        scores = board.scores()
        assert len(scores) >= entries_before
        assert scores[0] >= best_before
        best_before, entries_before = scores[0], len(scores)
    assert kills == KILLS

    result = resume_tournament(run_dir).run()
    budget = KILL_TEST_CONFIG.budget_env_steps
    assert budget is not None
    assert result.env_steps >= budget
    final = _check_intact(run_dir, validation)
    assert final.scores()[0] >= best_before
    assert sorted(p.name for p in (run_dir / "leaderboard").iterdir()) == sorted(
        ["index.json", *(e.snapshot.name for e in final.entries)]
    )
    archive = archive_of(run_dir)
    assert archive is not None
    assert len(archive.entries) >= KILL_TEST_CONFIG.archive_size // 2
    assert sorted(p.name for p in (run_dir / "archive").iterdir()) == sorted(
        ["index.json", *(e.snapshot.name for e in archive.entries)]
    )
    new_pods = [
        e["pod_id"]
        for e in read_events(run_dir)
        if e["kind"] == "pod_started" and e["data"]["origin"] != "snapshot"
    ]
    assert len(new_pods) == len(set(new_pods)), "a pod id was handed to two agents across the kills"
    logged_rounds = sum(1 for e in read_events(run_dir) if e["kind"] == "round_finished")
    assert logged_rounds == result.rounds, "a round redone after a kill was logged twice (DSR trials)"
