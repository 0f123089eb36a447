"""Atomic file writes: a reader sees the old file or the whole new one, never a partial write."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FILE_MODE = 0o644
"""Permissions of written files (readable by everyone, like an ordinary ``open(..., "w")``)."""


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    """Write ``payload`` to a temporary file beside ``path``, fsync it, then rename it over ``path``.

    Creates missing parent directories.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, FILE_MODE)
        with os.fdopen(handle, "wb") as temp_file:
            temp_file.write(payload)
            temp_file.flush()
            os.fsync(temp_file.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, text.encode("utf-8"))
