"""``TournamentConfig.leaderboard_after``: snapshots are ranked only after a share of the budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine._tournament_kit import ROUND_ENV_STEPS, new_tournament, tournament_config
from podracer import TournamentError, TournamentEvent


def _run(tmp_path: Path, after: float) -> tuple[list[TournamentEvent], int]:
    config = tournament_config(leaderboard_after=after)
    events: list[TournamentEvent] = []
    new_tournament(tmp_path, config).run(on_event=events.append)
    assert config.budget_env_steps is not None
    return events, config.budget_env_steps


def test_no_snapshot_is_ranked_before_the_window_opens(tmp_path: Path) -> None:
    events, budget = _run(tmp_path / "late", 0.5)
    rounds = [e for e in events if e.kind == "round_finished"]
    admitted = [e for e in events if e.kind == "entry_admitted"]
    assert admitted, "the window opened and nothing entered the board"
    # Every admission came from a round that finished with half the budget spent ...
    assert min(e.env_steps for e in admitted) >= 0.5 * budget
    # ... while rounds before it were scored (and judged) all the same.
    early = [e for e in rounds if e.env_steps < 0.5 * budget]
    assert len(early) >= 10
    assert all("score" in e.data for e in early)

    events_from_start, _ = _run(tmp_path / "from-start", 0.0)
    first_admission = next(e for e in events_from_start if e.kind == "entry_admitted")
    assert first_admission.env_steps <= 2 * ROUND_ENV_STEPS


def test_the_last_round_is_ranked_when_the_window_never_opens_in_time(tmp_path: Path) -> None:
    # Two rounds of budget and a window at 0.99 of it: the last round finishes with the budget
    # spent, so the board never ends empty.
    config = tournament_config(budget_env_steps=2 * ROUND_ENV_STEPS, pool_size=1, leaderboard_after=0.99)
    result = new_tournament(tmp_path, config).run()
    assert result.leaderboard.entries


@pytest.mark.parametrize("after", [-0.1, 1.0, float("nan")])
def test_a_window_outside_the_budget_is_a_one_line_error(after: float) -> None:
    message = r"leaderboard_after is .*; use a share of the budget in \[0, 1\)"
    with pytest.raises(TournamentError, match=message):
        tournament_config(leaderboard_after=after)
