"""The judge's decisions from scores and counts alone: no env, no agent, no run directory."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from podracer.config import TournamentConfig
from podracer.judge import idle_reason, is_lagging, judge_crash, judge_round, promotes, smooth
from podracer.schedule import budget_left, retirees

CONFIG = TournamentConfig(
    pool_size=4,
    leaderboard_size=3,
    budget_env_steps=1_000,
    budget_seconds=None,
    fresh_pod_prob=0.1,
    perturb_scale=0.2,
    softmax_temperature=1.0,
    eval_every_rounds=1,
    seed=0,
    lagging_rounds=2,
    lag_margin=0.1,
    max_consecutive_crashes=2,
    pool_schedule="halving",
)


@dataclass(frozen=True)
class Standing:
    """A pod as the judge sees it."""

    pod_id: int
    smoothed_score: float | None
    rounds_since_start: int = 5


def test_promotion_fills_the_board_then_needs_to_beat_the_last_entry() -> None:
    assert promotes([], 3, pod_id=0, score=-9.0)
    board = [(0, 3.0), (1, 2.0), (2, 1.0)]
    assert not promotes(board, 3, pod_id=3, score=1.0)  # a tie with the K-th stays out
    assert promotes(board, 3, pod_id=3, score=1.5)
    assert promotes(board[:2], 3, pod_id=3, score=-5.0)  # room left


def test_a_pod_on_the_board_must_beat_its_own_entry() -> None:
    board = [(0, 3.0), (1, 2.0), (2, 1.0)]
    assert not promotes(board, 3, pod_id=0, score=2.5)  # above the K-th, below its own best
    assert not promotes(board, 3, pod_id=1, score=2.0)
    assert promotes(board, 3, pod_id=2, score=1.01)


def test_smoothing_starts_from_the_first_score_then_averages() -> None:
    assert smooth(None, 2.0, 0.5) == 2.0
    assert smooth(2.0, 4.0, 0.5) == 3.0
    assert smooth(2.0, 4.0, 1.0) == 4.0


def test_lagging_is_judged_against_the_other_live_pods_only() -> None:
    others = [Standing(1, 1.0), Standing(2, 2.0), Standing(3, None)]
    assert is_lagging(Standing(0, 0.5), others, CONFIG)  # median 1.5, margin 0.1
    assert not is_lagging(Standing(0, 1.45), others, CONFIG)  # within the margin
    assert not is_lagging(Standing(0, 0.5, rounds_since_start=1), others, CONFIG)  # too young
    assert not is_lagging(Standing(0, None), others, CONFIG)
    assert not is_lagging(Standing(0, -100.0), [], CONFIG)  # alone: nothing to lag
    assert not is_lagging(Standing(0, -100.0), [Standing(3, None)], CONFIG)


def test_a_lagging_pod_is_replaced_from_the_better_pods_while_budget_remains() -> None:
    pod = Standing(0, 0.5)
    others = [Standing(4, 2.0), Standing(1, 0.2), Standing(2, 1.0), Standing(3, None)]
    verdict = judge_round(pod, others, CONFIG, retiring=False, fraction=0.1, budget_left=True)
    assert (verdict.action, verdict.reason, verdict.donors) == ("replace", "lagging", (4, 2))
    spent = judge_round(pod, others, CONFIG, retiring=False, fraction=0.1, budget_left=False)
    assert spent.action == "continue"


def test_a_pod_that_keeps_up_continues() -> None:
    verdict = judge_round(
        Standing(0, 1.0), [Standing(1, 1.0)], CONFIG, retiring=False, fraction=0.0, budget_left=True
    )
    assert (verdict.action, verdict.reason, verdict.donors) == ("continue", None, ())


def test_a_retiring_pod_retires_whatever_its_score_and_says_why() -> None:
    best = Standing(0, 99.0)
    early = judge_round(best, [], CONFIG, retiring=True, fraction=0.1, budget_left=True)
    assert (early.action, early.reason) == ("retire", "pool shrank")  # the backend shrank
    halved = judge_round(best, [], CONFIG, retiring=True, fraction=0.5, budget_left=True)
    assert (halved.action, halved.reason) == ("retire", "schedule")  # pool of 4: phases at 1/3, 2/3
    fixed = dataclasses.replace(CONFIG, pool_schedule="fixed")
    assert judge_round(best, [], fixed, retiring=True, fraction=0.9, budget_left=True).reason == "pool shrank"


def test_the_worst_smoothed_scores_retire_first() -> None:
    pods = [Standing(0, 1.0), Standing(1, None), Standing(2, -1.0), Standing(3, -1.0)]
    assert [p.pod_id for p in retirees(pods, 3)] == [1, 3, 2]  # no score first; ties: youngest
    assert retirees(pods, 0) == []
    assert retirees(pods, -2) == []


def test_an_idle_pod_retires_for_lack_of_room_or_of_budget() -> None:
    assert idle_reason(budget_left=True) == "pool shrank"
    assert idle_reason(budget_left=False) == "budget spent"


@pytest.mark.parametrize(
    ("crashes", "has_snapshot", "restored_after_crash", "action"),
    [
        (1, True, False, "restore"),
        (2, True, True, "replace"),  # crashed again straight after its restore
        (1, False, False, "replace"),  # nothing to restore
        (3, True, False, "give_up"),  # more than max_consecutive_crashes = 2 in a row
    ],
)
def test_a_crash_restores_once_then_replaces_then_gives_up(
    crashes: int, has_snapshot: bool, restored_after_crash: bool, action: str
) -> None:
    assert (
        judge_crash(crashes, CONFIG, has_snapshot=has_snapshot, restored_after_crash=restored_after_crash)
        == action
    )


def test_the_budget_counts_the_rounds_in_flight_and_the_wall_time() -> None:
    assert budget_left(CONFIG, env_steps=800, last_round_env_steps=100, rounds_in_flight=1, seconds=0.0)
    assert not budget_left(CONFIG, env_steps=800, last_round_env_steps=100, rounds_in_flight=2, seconds=0.0)
    timed = dataclasses.replace(CONFIG, budget_env_steps=None, budget_seconds=10.0)
    assert budget_left(timed, env_steps=10**9, last_round_env_steps=10**6, rounds_in_flight=8, seconds=9.9)
    assert not budget_left(timed, env_steps=0, last_round_env_steps=0, rounds_in_flight=0, seconds=10.0)
