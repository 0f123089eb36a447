"""What a user sees while the tournament trains: a rich progress line and TensorBoard scalars."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from torch.utils.tensorboard import SummaryWriter

from podracer import TournamentEvent

LEADERS_SHOWN = 4
"""Leaderboard scores shown on the progress line."""


class TrainingMonitor:
    """Turns tournament events into a progress bar (over the env-step budget) and TensorBoard scalars.

    Shows pods started, the leaderboard's validation scores (best first) and env steps per second.
    Scalars (x axis: tournament env steps): ``tournament/best_validation_score``,
    ``tournament/env_steps_per_s``, ``tournament/leaderboard_entries``, ``pods/validation_score``.

    Args:
        console: where the progress bar is drawn (nothing animates when it is not a terminal).
        tensorboard_dir: folder for the event files.
        budget_env_steps: the tournament's env-step budget (the bar's total).
        leaderboard_scores: returns the leaderboard's current scores, best first.
    """

    def __init__(
        self,
        console: Console,
        tensorboard_dir: Path,
        budget_env_steps: int,
        leaderboard_scores: Callable[[], list[float]],
    ) -> None:
        self._writer = SummaryWriter(log_dir=str(tensorboard_dir))
        self._progress = Progress(
            TextColumn("[bold]tournament[/]"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} env steps"),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._task: TaskID = self._progress.add_task("train", total=budget_env_steps, stats="starting")
        self._scores = leaderboard_scores
        self._pods = 0
        self._steps_per_s = 0.0

    def __enter__(self) -> TrainingMonitor:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._progress.stop()
        self._writer.close()

    def __call__(self, event: TournamentEvent) -> None:
        """Handle one tournament event (the ``on_event`` callback)."""
        step = event.env_steps
        scores = self._scores()
        if event.kind == "pod_started":
            self._pods += 1
        elif event.kind == "round_finished":
            self._steps_per_s = float(event.data["steps_per_s"])
            self._writer.add_scalar("pods/validation_score", float(event.data["score"]), step)
            self._writer.add_scalar("tournament/env_steps_per_s", self._steps_per_s, step)
            self._writer.add_scalar("tournament/leaderboard_entries", len(scores), step)
            if scores:
                self._writer.add_scalar("tournament/best_validation_score", scores[0], step)
        board = " ".join(f"{score:+.2f}" for score in scores[:LEADERS_SHOWN]) or "empty"
        stats = f"pods {self._pods} | val Sharpe {board} | {self._steps_per_s:,.0f} steps/s"
        self._progress.update(self._task, completed=step, stats=stats)
