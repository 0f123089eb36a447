"""The paths a user hands ``finpod data import``: files and folders, each checked before it is read.

A path that is not a readable regular file or folder gets its own one-line message: missing, a
broken symbolic link, a symbolic-link loop, a file where a folder was meant, a named pipe (FIFO),
socket or device, a folder that cannot be listed, a file that cannot be opened. Nothing is skipped
silently: a folder's ``.csv``/``.csv.gz``/``.parquet`` entries are checked the same way.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from finpod.errors import DataError

DATA_SUFFIXES: Final[tuple[str, ...]] = (".csv", ".csv.gz", ".parquet")
_SPECIAL_FILES: Final[tuple[tuple[int, str], ...]] = (
    (stat.S_IFIFO, "a named pipe (FIFO)"),
    (stat.S_IFSOCK, "a socket"),
    (stat.S_IFCHR, "a character device"),
    (stat.S_IFBLK, "a block device"),
)
_SAVE_FIRST: Final[str] = (
    "finpod reads bars from regular files it can read twice; fix: save the data to a file first "
    "(e.g. cat PIPE > bars.csv) and import that"
)
_PERMISSION_FIX: Final[str] = "fix: give your user read access (e.g. chmod u+r) or run as a user who has it"


def _stat_error(path: Path, err: OSError) -> DataError:
    """The message for a path whose ``stat`` failed."""
    if isinstance(err, FileNotFoundError):
        if path.is_symlink():
            return DataError(
                f"{path}: a broken symbolic link (to {os.readlink(path)}); fix: point it at the file"
            )
        return DataError(f"{path}: no such file or folder; check the path")
    if isinstance(err, NotADirectoryError):
        above = next((p for p in reversed(path.parents) if p.is_file()), path.parent)
        return DataError(f"{path}: {above} is a file, not a folder; check the path")
    if isinstance(err, PermissionError):
        return DataError(
            f"{path}: permission denied (a folder on the way cannot be entered); {_PERMISSION_FIX}"
        )
    if err.errno == errno.ELOOP:
        return DataError(f"{path}: a loop of symbolic links; fix: point the link at the file itself")
    reason = err.strerror or type(err).__name__
    return DataError(f"{path}: cannot be read ({reason.lower()}); check the path")


def open_for_reading(path: Path) -> None:
    """Open the regular file ``path`` for reading and close it again (a permission check that holds).

    Raises:
        OSError: the file cannot be opened.
    """
    os.close(os.open(path, os.O_RDONLY))


def _check_file(path: Path, mode: int) -> None:
    """Refuse a path (of mode ``mode``) that is not a regular file the user can read."""
    kind = next((name for flag, name in _SPECIAL_FILES if stat.S_IFMT(mode) == flag), None)
    if kind is not None:
        raise DataError(f"{path}: {kind}, not a regular file; {_SAVE_FIRST}")
    if not stat.S_ISREG(mode):
        raise DataError(f"{path}: not a regular file or folder; pass a data file or a folder of them")
    try:
        open_for_reading(path)
    except PermissionError:
        raise DataError(f"{path}: not readable (permission denied); {_PERMISSION_FIX}") from None
    except OSError as err:
        raise _stat_error(path, err) from None


def check_input_file(path: Path) -> None:
    """Refuse ``path`` unless it is a regular file the user can read (one line: missing, FIFO...).

    Raises:
        DataError: as :func:`expand_paths` says of a file.
    """
    try:
        mode = path.stat().st_mode
    except OSError as err:
        raise _stat_error(path, err) from None
    _check_file(path, mode)


def _folder_files(folder: Path) -> list[Path]:
    """The data files in ``folder``, each checked, in name order."""
    try:
        entries = sorted(p for p in folder.iterdir() if p.name.endswith(DATA_SUFFIXES))
    except PermissionError:
        raise DataError(f"{folder}: folder cannot be listed (permission denied); {_PERMISSION_FIX}") from None
    except OSError as err:
        raise _stat_error(folder, err) from None
    files: list[Path] = []
    for entry in entries:
        try:
            mode = entry.stat().st_mode
        except OSError as err:
            raise _stat_error(entry, err) from None
        if not stat.S_ISDIR(mode):
            _check_file(entry, mode)
            files.append(entry)
    if not files:
        raise DataError(f"{folder}: folder holds no .csv or .parquet file; point at the data files")
    return files


def expand_paths(paths: Sequence[Path]) -> list[Path]:
    """Files named directly plus the data files (``.csv``, ``.csv.gz``, ``.parquet``) inside folders.

    Args:
        paths: files and folders given by the user.

    Returns:
        The data files, folders expanded in name order.

    Raises:
        DataError: a path (or a data file inside a folder) is missing, a broken or looping symbolic
            link, not a regular file (a FIFO, socket or device), not readable, or a folder holds no
            data file or cannot be listed.
    """
    files: list[Path] = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError as err:
            raise _stat_error(path, err) from None
        if stat.S_ISDIR(mode):
            files.extend(_folder_files(path))
        else:
            _check_file(path, mode)
            files.append(path)
    if not files:
        raise DataError("no input files; pass at least one file or folder")
    return files
