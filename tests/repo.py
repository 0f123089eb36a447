"""Paths of this checkout, for tests that read the shipped example specs or run scripts."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = REPO_ROOT / "strategies"
