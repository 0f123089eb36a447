"""``finpod run``, ``finpod backtest``, ``finpod report``: the main job and its reruns."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the main-job commands to the top-level ``finpod`` app."""
