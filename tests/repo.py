"""Paths of this checkout, for tests that read the shipped example specs or run scripts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = REPO_ROOT / "strategies"


def load_script(name: str) -> ModuleType:
    """The module of ``scripts/<name>.py`` (scripts are not a package), loaded afresh."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
