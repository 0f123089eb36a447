"""What a user sees while the tournament trains: a progress line with an ETA, and TensorBoard logs."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from torch.utils.tensorboard import SummaryWriter

from podracer.api import TournamentEvent

LEADERS_SHOWN = 3
"""Leaderboard scores shown on the progress line."""
BAR_WIDTH = 24
"""Characters of the bar itself; every other field has a fixed width too, so the line never jumps."""
STATS_WIDTH = 76
"""Characters of the stats field:
``pods NNN | val Sharpe +S.SS +S.SS +S.SS | NNN,NNN steps/s | N,NNN/N,NNN s``."""
POD_METRICS = (
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "learning_rate",
)
"""PPO diagnostics logged per pod (``pod_<id>/<name>``), when the agent reports them."""
ETA_WINDOW_S = 30.0
"""Tournament seconds of recent events the ETA's rate of env steps is measured over."""
UNKNOWN_ETA = "-:--:--"


class TrainingMonitor:
    """Turns tournament events into a progress line and TensorBoard logs.

    The line shows the env-step budget spent (bar, percent, steps), pods started, the leaderboard's
    validation scores (best first), the tournament's env steps per second (all pods, learning and
    validation included), the wall-time budget spent, elapsed time and the ETA: the env steps left
    at the recent rate (the last :data:`ETA_WINDOW_S` seconds of tournament time), or the wall
    time left when the wall budget runs out first. Every field has a fixed width.

    TensorBoard (x axis: tournament env steps): ``tournament/best_validation_score``,
    ``tournament/env_steps_per_s``, ``tournament/leaderboard_entries``,
    ``pods/validation_score``; per pod ``pod_<id>/validation_score`` and PPO's
    :data:`POD_METRICS`; every tournament event as text (``tournament/events``); and each pod's
    hyper-parameters with its best validation score in the HParams plugin (written on exit).

    Args:
        console: where the progress line is drawn (nothing animates when it is not a terminal).
        tensorboard_dir: folder for the event files.
        budget_env_steps: the tournament's env-step budget (the bar's total).
        leaderboard_scores: returns the leaderboard's current scores, best first.
        budget_seconds: the tournament's wall-time budget, shown beside the steps (the tournament
            stops at whichever budget runs out first).
    """

    def __init__(
        self,
        console: Console,
        tensorboard_dir: Path,
        budget_env_steps: int,
        leaderboard_scores: Callable[[], list[float]],
        budget_seconds: float | None = None,
    ) -> None:
        self._dir = tensorboard_dir
        self._writer = SummaryWriter(log_dir=str(tensorboard_dir))
        steps_width = len(f"{budget_env_steps:,}")
        self._progress = Progress(
            TextColumn("[bold]tournament[/]"),
            BarColumn(bar_width=BAR_WIDTH),
            TaskProgressColumn(),
            TextColumn(
                f"{{task.completed:>{steps_width},.0f}}/{{task.total:,.0f}} env steps",
                table_column=Column(no_wrap=True),
            ),
            TextColumn(
                "{task.fields[stats]}",
                table_column=Column(width=STATS_WIDTH, no_wrap=True, overflow="ellipsis"),
            ),
            TextColumn("elapsed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TextColumn("{task.fields[eta]}", table_column=Column(no_wrap=True)),
            console=console,
            transient=False,
        )
        self._task: TaskID = self._progress.add_task(
            "train", total=budget_env_steps, stats="starting", eta=UNKNOWN_ETA
        )
        self._budget_env_steps = budget_env_steps
        self._budget_seconds = budget_seconds
        self._recent: deque[tuple[float, int]] = deque()
        self._scores = leaderboard_scores
        self._pods = 0
        self._steps_per_s = 0.0
        self._hparams: dict[int, dict[str, Any]] = {}
        self._best: dict[int, float] = {}

    def __enter__(self) -> TrainingMonitor:
        self._progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._progress.stop()
        for pod_id, hparams in sorted(self._hparams.items()):
            score = self._best.get(pod_id, math.nan)
            self._writer.add_hparams(
                hparams, {"hparam/best_validation_score": score}, run_name=f"hparams/pod_{pod_id:03d}"
            )
        self._writer.close()

    def __call__(self, event: TournamentEvent) -> None:
        """Handle one tournament event (the ``on_event`` callback)."""
        step = event.env_steps
        scores = self._scores()
        data = event.data
        self._writer.add_text("tournament/events", _event_text(event), step)
        if event.kind == "pod_started":
            self._pods += 1
            if event.pod_id is not None and isinstance(data.get("agent_config"), Mapping):
                self._hparams[event.pod_id] = hparams_of(data["agent_config"])
        elif event.kind == "round_finished":
            score = float(data["score"])
            self._steps_per_s = step / event.elapsed_s if event.elapsed_s > 0 else 0.0
            self._writer.add_scalar("pods/validation_score", score, step)
            self._writer.add_scalar("tournament/env_steps_per_s", self._steps_per_s, step)
            self._writer.add_scalar("tournament/leaderboard_entries", len(scores), step)
            if scores:
                self._writer.add_scalar("tournament/best_validation_score", scores[0], step)
            if event.pod_id is not None:
                self._pod_scalars(event.pod_id, score, data.get("metrics", {}), step)
        board = " ".join(f"{score:+5.2f}" for score in scores[:LEADERS_SHOWN]) or "empty"
        stats = f"pods {self._pods:>3} | val Sharpe {board:<17} | {self._steps_per_s:>9,.0f} steps/s"
        if self._budget_seconds is not None:
            stats += f" | {event.elapsed_s:,.0f}/{self._budget_seconds:,.0f} s"
        eta = self._eta(event.elapsed_s, step, finished=event.kind == "tournament_finished")
        self._progress.update(self._task, completed=step, stats=stats, eta=eta)

    def _eta(self, elapsed_s: float, step: int, *, finished: bool) -> str:
        """``H:MM:SS`` until a budget runs out: the env steps left at the rate of the last
        :data:`ETA_WINDOW_S` seconds, capped by the wall time left; :data:`UNKNOWN_ETA` before a rate."""
        self._recent.append((elapsed_s, step))
        while len(self._recent) > 2 and elapsed_s - self._recent[0][0] > ETA_WINDOW_S:
            self._recent.popleft()
        left: list[float] = []
        if finished:
            left.append(0.0)
        if self._budget_seconds is not None:
            left.append(max(0.0, self._budget_seconds - elapsed_s))
        (first_s, first_step) = self._recent[0]
        if elapsed_s > first_s and step > first_step:
            rate = (step - first_step) / (elapsed_s - first_s)
            left.append(max(0, self._budget_env_steps - step) / rate)
        if not left:
            return UNKNOWN_ETA
        return str(dt.timedelta(seconds=math.ceil(min(left))))

    def _pod_scalars(self, pod_id: int, score: float, metrics: Mapping[str, Any], step: int) -> None:
        prefix = f"pod_{pod_id:03d}"
        self._writer.add_scalar(f"{prefix}/validation_score", score, step)
        if math.isfinite(score):
            self._best[pod_id] = max(score, self._best.get(pod_id, -math.inf))
        for name in POD_METRICS:
            if name in metrics:
                self._writer.add_scalar(f"{prefix}/{name}", float(metrics[name]), step)


def hparams_of(agent_config: Mapping[str, Any]) -> dict[str, Any]:
    """An agent config as HParams values: numbers, bools and strings kept, anything else as JSON text."""
    out: dict[str, Any] = {}
    for key, value in sorted(agent_config.items()):
        if isinstance(value, bool | int | float | str):
            out[key] = value
        elif value is None:
            out[key] = "none"
        else:
            out[key] = json.dumps(value)
    return out


def _event_text(event: TournamentEvent) -> str:
    pod = "" if event.pod_id is None else f" pod {event.pod_id}"
    details = {k: v for k, v in event.data.items() if k not in ("agent_config", "metrics")}
    return f"{event.kind}{pod}: {json.dumps(details, sort_keys=True, default=str)}"
