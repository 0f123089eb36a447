"""Replay pick rules on the snapshots of skill-bench runs: which validated policy would each rule
have traded, and what did it hold out?

Reads the JSON of ``finpod bench skill ... --snapshots --json`` runs (one file each, any number of
seeds and cases) and prints, per run, the held-out Sharpe minus equal weight's of the policy each
rule picks (its validation tracking error after the slash), then the mean and median over runs.

Gates (``gate z``, ``deflated``, ``defl-score``: :data:`GATES`) keep the tournament's own pick or
trade equal weight instead (a held-out edge of 0, printed ``EW``).

Rules: ``score`` (the tournament's own pick: the best validation score), ``shrunk t`` (the best
validation Sharpe with its edge over equal weight shrunk by its standard error, prior spread ``t``:
:func:`finpod.report.verdict.shrunk_sharpe`), ``lcb z`` (the best edge minus ``z`` standard errors),
``top8 t`` (the shrunk re-ranking of the leaderboard's entries only: each pod's best score, the
8 best pods) and ``edge z`` (the continuous validation edge over equal weight in standard errors:
a t-statistic, blind to how far a policy strays from equal weight). BENCHMARKS.md "Picking by a
shrunk validation Sharpe" ran it on 12 tuning runs.

    PYTHONPATH=. python scripts/pick_rules.py runs/*.json
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from finpod.report.verdict import expected_maximum_sharpe, shrink_edge

SCORE, POD = 2, 3
VALIDATION_SHARPE, TRACKING_ERROR, EQUAL_SHARPE, VARIANCE, HELD_OUT_EDGE = 7, 9, 10, 11, 12
LEADERBOARD_SIZE = 8

Rule = Callable[[Sequence[Any]], float]


def shrunk(prior: float) -> Rule:
    """The shrunk validation Sharpe at prior spread ``prior`` (the tournament's score as the estimate)."""

    def value(row: Sequence[Any]) -> float:
        return shrink_edge(float(row[SCORE]), float(row[EQUAL_SHARPE]), float(row[VARIANCE]), prior)

    return value


def lower_bound(z: float) -> Rule:
    """The validation edge over equal weight minus ``z`` standard errors."""

    def value(row: Sequence[Any]) -> float:
        variance = float(row[VARIANCE])
        spread = math.sqrt(variance) if math.isfinite(variance) else math.inf
        return float(row[SCORE]) - float(row[EQUAL_SHARPE]) - z * spread

    return value


Gate = Callable[[Sequence[Any], Sequence[Sequence[Any]]], bool]
"""(the tournament's pick, every validated row) -> keep the pick (else trade equal weight)."""


def edge_z(row: Sequence[Any]) -> float:
    """The pick's continuous validation edge over equal weight in standard errors (-inf unmeasured)."""
    variance = float(row[VARIANCE])
    if not (math.isfinite(variance) and variance > 0.0):
        return -math.inf
    return (float(row[VALIDATION_SHARPE]) - float(row[EQUAL_SHARPE])) / math.sqrt(variance)


def z_gate(z: float) -> Gate:
    """Keep the pick when its validation edge over equal weight is positive and at least ``z``
    standard errors (``gate 0``: :func:`finpod.report.verdict.pick_verdict`'s default)."""
    return lambda pick, rows: edge_z(pick) > 0.0 and edge_z(pick) >= z


def _beats_luck(pick: Sequence[Any], trials: Sequence[float]) -> bool:
    """The pick's continuous validation edge over equal weight beats the largest value ``len(trials)``
    skill-less trials with the spread of ``trials`` would show (and 0)."""
    spread = statistics.variance(trials) if len(trials) > 1 else 0.0
    edge = float(pick[VALIDATION_SHARPE]) - float(pick[EQUAL_SHARPE])
    return edge > max(0.0, expected_maximum_sharpe(len(trials), spread))


def deflated_gate(pick: Sequence[Any], rows: Sequence[Sequence[Any]]) -> bool:
    """Keep the pick when its validation edge beats the largest edge ``len(rows)`` skill-less trials
    with the rows' spread of edges would show (:func:`~finpod.report.verdict.expected_maximum_sharpe`)."""
    return _beats_luck(pick, [float(r[VALIDATION_SHARPE]) - float(r[EQUAL_SHARPE]) for r in rows])


def deflated_score_gate(pick: Sequence[Any], rows: Sequence[Sequence[Any]]) -> bool:
    """:func:`deflated_gate` with the spread of the rows' validation scores (what a run has: every
    score its tournament logged) in place of the spread of their continuous validation edges."""
    return _beats_luck(pick, [float(r[SCORE]) for r in rows])


GATES: dict[str, Gate] = {
    "gate 0": z_gate(0.0),
    "gate 1": z_gate(1.0),
    "gate 2": z_gate(2.0),
    "deflated": deflated_gate,
    "defl-score": deflated_score_gate,
}
"""Gates on the tournament's own pick: equal weight (held-out edge 0) where they close."""

RULES: dict[str, tuple[Rule, bool]] = {
    "score": (lambda row: float(row[SCORE]), False),
    "shrunk 0.5": (shrunk(0.5), False),
    "shrunk 1.0": (shrunk(1.0), False),
    "lcb 1": (lower_bound(1.0), False),
    "lcb 2": (lower_bound(2.0), False),
    "top8 0.5": (shrunk(0.5), True),
    "edge z": (lambda row: edge_z(row), False),
}
"""Rule name -> (its ranking value, whether it ranks the leaderboard's entries only)."""


def leaderboard(rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """Each pod's best-scoring snapshot, the :data:`LEADERBOARD_SIZE` best pods (podracer keeps one
    entry a pod)."""
    best: dict[str, Sequence[Any]] = {}
    for row in rows:
        if row[POD] not in best or float(row[SCORE]) > float(best[row[POD]][SCORE]):
            best[row[POD]] = row
    return sorted(best.values(), key=lambda row: -float(row[SCORE]))[:LEADERBOARD_SIZE]


def main(paths: Sequence[str]) -> int:
    """Print the table for the runs in ``paths``; 2 with a usage line when there are none."""
    if not paths:
        print("usage: python scripts/pick_rules.py RUN.json [RUN.json ...]", file=sys.stderr)
        return 2
    picks: dict[str, list[float]] = {name: [] for name in (*RULES, *GATES)}
    print(f"{'run':<34}" + "".join(f"{name:>14}" for name in picks))
    for path in paths:
        for seed in json.loads(Path(path).read_text())["seeds"]:
            for contender, result in seed["contenders"].items():
                rows = result.get("snapshots") or []
                if not rows or len(rows[0]) <= HELD_OUT_EDGE:
                    continue
                cells = []
                for name, (value, board_only) in RULES.items():
                    pick = max(leaderboard(rows) if board_only else rows, key=value)
                    picks[name].append(float(pick[HELD_OUT_EDGE]))
                    cells.append(f"{float(pick[HELD_OUT_EDGE]):+6.2f}/{float(pick[TRACKING_ERROR]):.2f}")
                own = max(rows, key=RULES["score"][0])
                for name, gate in GATES.items():
                    kept = gate(own, rows)
                    picks[name].append(float(own[HELD_OUT_EDGE]) if kept else 0.0)
                    cells.append(
                        f"{float(own[HELD_OUT_EDGE]):+6.2f}/{float(own[TRACKING_ERROR]):.2f}"
                        if kept
                        else "EW"
                    )
                label = f"{seed['case']} {seed['seed']} {contender.split('/')[0]}"
                print(f"{label:<34}" + "".join(f"{cell:>14}" for cell in cells))
    if not picks["score"]:
        print("no snapshot rows with validation edges: run the bench with --snapshots", file=sys.stderr)
        return 2
    print(f"{'mean':<34}" + "".join(f"{statistics.fmean(v):>+14.3f}" for v in picks.values()))
    print(f"{'median':<34}" + "".join(f"{statistics.median(v):>+14.3f}" for v in picks.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
