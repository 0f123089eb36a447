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


def assert_refused_in_one_line(tmp_path: Path, agent: dict[str, Any], expected: str) -> None:
    """Loading the demo spec with ``agent`` in its ``[agent]`` table fails with one line containing
    ``expected`` (the problem and its fix)."""
    from finpod.errors import SpecError
    from finpod.spec import Spec

    try:
        Spec.from_toml(demo_with_agent(tmp_path, **agent))
    except SpecError as error:
        message = str(error)
        assert "\n" not in message, message
        assert expected in message, message
    else:
        raise AssertionError(f"[agent] {agent} was accepted")
