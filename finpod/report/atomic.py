"""Atomic file writes: a reader sees the old file or the whole new one, never a partial write.

The engine's durable writer (temp file, fsync, rename, directory fsync) serves the report too.
"""

from __future__ import annotations

from pathlib import Path

from podracer.api import atomic_write_bytes as write_bytes_atomic

__all__ = ["write_bytes_atomic", "write_text_atomic"]


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`podracer.snapshot.atomic_write_bytes`)."""
    write_bytes_atomic(path, text.encode("utf-8"))
