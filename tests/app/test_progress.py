"""The progress line: fixed width whatever the numbers, an ETA, nothing cut off."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from finpod.pipeline.progress import TrainingMonitor
from podracer import TournamentEvent


def test_progress_line_has_an_eta_and_a_stable_width(tmp_path: Path) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=200, color_system=None)
    scores: list[float] = []
    monitor = TrainingMonitor(
        console, tmp_path, 400_000, lambda: sorted(scores, reverse=True), budget_seconds=3600.0
    )
    with monitor:  # the rate shown is the tournament's: env steps so far / wall seconds so far
        for index, (score, seconds) in enumerate([(0.1, 4_000.0), (-1.5, 40.0), (2.25, 120_000 / 123_456)]):
            scores.append(score)
            data = {"score": score, "steps_per_s": 1.0, "round_env_steps": 1024, "policy_version": 1}
            monitor(TournamentEvent("round_finished", seconds, (index + 1) * 40_000, index, data))
            monitor._progress.refresh()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())  # cursor and erase codes
    lines = [line for line in text.replace("\r", "\n").split("\n") if "tournament" in line]
    assert len(lines) >= 3
    assert len({len(line.rstrip()) for line in lines}) == 1, lines
    assert all("ETA" in line and "elapsed" in line for line in lines)
    assert "…" not in "".join(lines)
    assert "123,456 steps/s" in lines[-1]
    assert any(" 10 steps/s" in line for line in lines)
    assert "1/3,600 s" in lines[-1]  # the wall-time budget spent, a first-class stop
    assert "+2.25 +0.10 -1.50" in lines[-1]


def _eta_of(
    tensorboard: Path, budget_env_steps: int, budget_seconds: float | None, events: list[tuple[float, int]]
) -> str:
    """The ETA the progress line shows after round events at (tournament seconds, env steps)."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=220, color_system=None)
    with TrainingMonitor(console, tensorboard, budget_env_steps, list, budget_seconds) as monitor:
        for seconds, steps in events:
            monitor(TournamentEvent("round_finished", seconds, steps, 0, {"score": 0.0}))
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buffer.getvalue())
    return re.findall(r"ETA (\S+)", text)[-1]


def test_the_eta_is_the_budget_that_runs_out_first(tmp_path: Path) -> None:
    """1,000 env steps/s with 9,000 steps left: 9 s at the step budget; a wall budget with 4 s left
    stops the run first, and the ETA says so (it said the step budget's hour when that stopped it)."""
    events = [(1.0, 1_000), (2.0, 2_000), (3.0, 3_000)]
    assert _eta_of(tmp_path / "a", 12_000, None, events) == "0:00:09"
    assert _eta_of(tmp_path / "b", 12_000, 7.0, events) == "0:00:04"
    assert _eta_of(tmp_path / "c", 12_000, 600.0, events) == "0:00:09"
    assert _eta_of(tmp_path / "d", 10_000_000, 4.0, [*events, (4.2, 4_200)]) == "0:00:00"
    assert _eta_of(tmp_path / "e", 12_000, None, events[:1]) == "-:--:--"  # no rate yet
    # the rate is the recent one: a slow start 60 s ago does not stretch the ETA
    assert _eta_of(tmp_path / "f", 100_000, None, [(0.0, 0), (60.0, 1_000), (70.0, 11_000)]) == "0:01:29"
