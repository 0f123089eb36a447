"""Recording which files a module writes through the durable writer (temp file, fsync, rename)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def record_durable_writes(monkeypatch: pytest.MonkeyPatch, module: ModuleType, writer: str) -> list[str]:
    """Wrap ``module.<writer>`` (a durable write taking the path first) so each call still writes and
    appends the file's name to the returned list."""
    written: list[str] = []
    durable = getattr(module, writer)

    def record(path: Path, *args: Any) -> None:
        written.append(path.name)
        durable(path, *args)

    monkeypatch.setattr(module, writer, record)
    return written
