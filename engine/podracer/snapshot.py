"""Durable files: atomic writes, immutable content-addressed snapshots, loads that refuse foreign data.

Every write goes to a temporary file in the target's directory, is flushed and fsynced, renamed over
the target with ``os.replace`` (atomic on POSIX), and the directory is fsynced so the rename itself
survives a crash. A reader therefore sees either the old file or the new one, never half of one.

A snapshot file is named ``<stem>-<sha256 prefix>.pt`` after its content: it is written once and
never changed, and a load checks the bytes against the name, so a truncated or corrupted file is
refused. Snapshots are read with ``torch.load(weights_only=True)`` only: a pickle of an arbitrary
object is refused with :class:`~podracer.errors.SnapshotError`, never executed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from podracer.errors import SnapshotError

SNAPSHOT_FORMAT = "podracer.snapshot"
"""Marker stored inside every snapshot file; a file without it is not ours."""
SNAPSHOT_FORMAT_VERSION = 1
"""Layout version of snapshot files."""
SNAPSHOT_SUFFIX = ".pt"
"""File-name suffix of snapshot files."""
TEMP_SUFFIX = ".tmp"
"""Suffix of the temporary files of atomic writes (named ``.<target name>.<random>.tmp``)."""
FILE_MODE = 0o644
"""Permissions of written files (readable by everyone, like an ordinary ``open(..., "w")``)."""
DIGEST_HEX_CHARS = 16
"""Hex characters of the content's SHA-256 kept in a snapshot's file name (64 bits)."""


def fsync_directory(directory: Path) -> None:
    """Flush a directory's entries (new names, renames, deletions) to disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably (temp file, fsync, rename, dir fsync)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    fsync_directory(path.parent)


def atomic_write_json(path: Path, record: Mapping[str, Any], indent: int | None = 2) -> None:
    """Write a JSON object atomically (see :func:`atomic_write_bytes`); ``indent=None`` writes it on
    one line, with the C encoder (indenting takes Python's, about 10x slower on a long record)."""
    text = json.dumps(record, indent=indent, sort_keys=True, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def read_json_record(path: Path, file_format: str, format_version: int) -> dict[str, Any]:
    """Read a JSON object that podracer wrote, checking its ``format`` and ``version`` markers.

    Args:
        path: the file.
        file_format: the expected ``format`` marker, e.g. ``"podracer.leaderboard"``.
        format_version: the expected ``version``.

    Raises:
        SnapshotError: the file is missing, unreadable, not JSON, or not a file of that format.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SnapshotError(f"{path} does not exist; point at a directory podracer wrote") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path} cannot be read ({exc}); restore it from a backup") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}): corrupt or foreign"
        ) from None
    if not isinstance(record, dict) or record.get("format") != file_format:
        raise SnapshotError(f"{path} is not a {file_format} file (no matching 'format' marker): foreign file")
    if record.get("version") != format_version:
        raise SnapshotError(
            f"{path} has {file_format} version {record.get('version')!r}, this podracer reads "
            f"version {format_version}; use the podracer that wrote it"
        )
    return record


def save_snapshot(directory: Path, stem: str, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` (tensors and plain values only) as an immutable, content-named snapshot.

    Args:
        directory: where the file goes (created if needed).
        stem: the file-name prefix, e.g. ``"pod-000003"``.
        payload: what to store; it must load with ``torch.load(weights_only=True)``.

    Returns:
        The path ``directory / f"{stem}-{digest}.pt"``. Saving the same content again returns the
        same path without rewriting it.
    """
    path, data = snapshot_bytes(directory, stem, payload)
    write_snapshot_file(path, data)
    return path


@dataclass(frozen=True)
class EncodedSnapshot:
    """A payload serialised once (:func:`encode_snapshot`): the file's bytes and the digest its
    name carries. A round's state is offered to ``pods/``, the leaderboard and the archive: they
    share one encoding instead of serialising and hashing the same bytes up to three times.

    Attributes:
        data: the snapshot file's bytes.
        digest: the first :data:`DIGEST_HEX_CHARS` hex digits of their SHA-256.
    """

    data: bytes
    digest: str

    def path(self, directory: Path, stem: str) -> Path:
        """Where a snapshot of these bytes named ``stem`` lives in ``directory``."""
        return directory / f"{stem}-{self.digest}{SNAPSHOT_SUFFIX}"


def encode_snapshot(payload: Mapping[str, Any]) -> EncodedSnapshot:
    """``payload`` (tensors and plain values only) as snapshot file bytes, and their digest.

    The zip records carry no CRC-32 (torch's ``set_crc32_options``): the SHA-256 in the name
    already guards every byte, and the CRC cost about a quarter of ``torch.save`` (a GPU run
    snapshots every pod every round on the orchestrator's thread: 22 % of its training time at
    the paper's minute shape, BENCHMARKS.md "third measurements").
    """
    buffer = io.BytesIO()
    record = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_FORMAT_VERSION, "payload": dict(payload)}
    with _without_zip_crc():
        torch.save(record, buffer)
    data = buffer.getvalue()
    return EncodedSnapshot(data, hashlib.sha256(data).hexdigest()[:DIGEST_HEX_CHARS])


def snapshot_bytes(directory: Path, stem: str, payload: Mapping[str, Any]) -> tuple[Path, bytes]:
    """What :func:`save_snapshot` writes, and where, without writing it: ``(path, file bytes)``."""
    encoded = encode_snapshot(payload)
    return encoded.path(directory, stem), encoded.data


_CRC_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_zip_crc() -> Iterator[None]:
    """``torch.save`` without its records' CRC-32 inside the block (torch's setting is process-wide:
    put back after; a torch without the setting computes it)."""
    get = getattr(torch.serialization, "get_crc32_options", None)
    set_ = getattr(torch.serialization, "set_crc32_options", None)
    if get is None or set_ is None:
        yield
        return
    with _CRC_LOCK:
        before = get()
        set_(False)
        try:
            yield
        finally:
            set_(before)


def write_snapshot_file(path: Path, data: bytes) -> None:
    """Write a snapshot's bytes (:func:`snapshot_bytes`) atomically, unless that content-named file exists."""
    if not path.exists():
        atomic_write_bytes(path, data)


def remove_unreferenced_snapshots(directory: Path, used: set[Path]) -> list[Path]:
    """Delete the snapshot files in ``directory`` that ``used`` does not name, and the temp files of
    interrupted writes (a kill between a snapshot's write and its index's); returns what was deleted."""
    stale = [p for p in sorted(directory.glob(f"*{SNAPSHOT_SUFFIX}")) if p not in used]
    stale += sorted(directory.glob(f".*{TEMP_SUFFIX}"))
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        fsync_directory(directory)
    return stale


def load_snapshot(path: Path) -> dict[str, Any]:
    """Load a snapshot written by :func:`save_snapshot`, refusing anything else.

    The bytes are checked against the digest in the file name before ``torch.load(weights_only=True,
    map_location="cpu")`` reads them.

    Raises:
        SnapshotError: the file is missing, truncated, corrupted, renamed, or not a podracer snapshot.
    """
    name = path.name
    stem, _, digest = name.removesuffix(SNAPSHOT_SUFFIX).rpartition("-")
    if not name.endswith(SNAPSHOT_SUFFIX) or not stem or len(digest) != DIGEST_HEX_CHARS:
        raise SnapshotError(
            f"{path} is not named like a podracer snapshot (<stem>-<digest>.pt): foreign file"
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(f"snapshot {path} is missing; the run directory was modified by hand") from None
    except OSError as exc:
        raise SnapshotError(f"snapshot {path} cannot be read ({exc})") from None
    if hashlib.sha256(data).hexdigest()[:DIGEST_HEX_CHARS] != digest:
        raise SnapshotError(f"snapshot {path} does not match its content digest: truncated or corrupted")
    try:
        record = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise SnapshotError(
            f"{path} is not a podracer snapshot ({type(exc).__name__}); refusing to unpickle it"
        ) from None
    if not isinstance(record, dict) or record.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError(f"{path} holds no podracer snapshot marker: foreign file")
    if record.get("version") != SNAPSHOT_FORMAT_VERSION or not isinstance(record.get("payload"), dict):
        raise SnapshotError(f"{path} has an unknown snapshot layout; use the podracer that wrote it")
    payload: dict[str, Any] = record["payload"]
    return payload
