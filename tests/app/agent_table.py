"""The demo spec with an ``[agent]`` table of a test's choosing, for tests of agent settings."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from repo import REPO_ROOT

DEMO = REPO_ROOT / "strategies" / "demo.toml"


def demo_with_agent(tmp_path: Path, **agent: Any) -> Path:
    """``strategies/demo.toml`` with ``agent`` merged into its ``[agent]`` table, under ``tmp_path``."""
    raw = tomllib.loads(DEMO.read_text(encoding="utf-8"))
    raw["agent"] = {**raw.get("agent", {}), **agent}
    path = tmp_path / "spec.toml"
    path.write_text(tomli_w.dumps(raw), encoding="utf-8")
    return path
