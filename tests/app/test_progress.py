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
