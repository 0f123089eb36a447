"""The CLI's one error path: any exception becomes ONE line on stderr and an exit code.

* finpod's own errors (:class:`finpod.errors.FinpodError`), the engine's
  (:class:`podracer.errors.PodracerError`), OS errors on a user's path (a read-only folder, a file
  where a folder should be, a full disk) and text that is not UTF-8: ``error: <problem>; fix: ...``,
  exit code :data:`USER_ERROR`.
* anything else is a bug: ``error: internal error (<type>: <text>); rerun with -v for the
  traceback``, exit code :data:`INTERNAL_ERROR`.

Under ``finpod -v`` (:func:`finpod.cli.output.is_verbose`) the traceback is printed above the line.
"""

from __future__ import annotations

import errno
import os
import traceback
from pathlib import Path
from typing import Final, TextIO

from finpod.cli import output
from finpod.errors import FinpodError
from finpod.net import redact, register_secret
from podracer.errors import PodracerError

USER_ERROR: Final[int] = 2
"""Exit code of a mistake the user can fix (bad file, spec, flag, folder, disk)."""
INTERNAL_ERROR: Final[int] = 1
"""Exit code of a bug in finpod (anything not classified as a user error)."""
SECRET_VARIABLES: Final[tuple[str, ...]] = ("APCA_API_KEY_ID", "APCA_API_SECRET_KEY")
"""Environment variables whose values never appear in an error message."""
INTERRUPTED: Final[int] = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells expect."""

_OS_FIXES: Final[dict[int, str]] = {
    errno.EACCES: "permission denied; fix: make the folder writable or pick another path (e.g. --out)",
    errno.EPERM: "operation not permitted; fix: make the folder writable or pick another path (e.g. --out)",
    errno.EROFS: "read-only file system; fix: pick a writable path (e.g. --out)",
    errno.ENOSPC: "no space left on the device; fix: free disk space or pick another path (e.g. --out)",
    errno.EDQUOT: "disk quota exceeded; fix: free disk space or pick another path (e.g. --out)",
    errno.ENOTDIR: "a file stands where a folder should be; fix: move that file or pick another path",
    errno.EISDIR: "a folder stands where a file should be; fix: move that folder or pick another path",
    errno.EEXIST: "already exists; fix: remove it or pick another path",
    errno.ENOENT: "no such file or folder; fix: check the path",
    errno.ENAMETOOLONG: "file name too long; fix: pick a shorter path",
    errno.ELOOP: "too many symbolic links (a link loop); fix: point at the real file",
}


def describe(err: BaseException) -> tuple[int, str]:
    """The exit code and the one-line message (without the ``error:`` prefix) for ``err``.

    Args:
        err: the exception that reached the CLI.

    Returns:
        ``(exit code, message)``; the message never contains a newline.
    """
    if isinstance(err, FinpodError | PodracerError):
        return USER_ERROR, _one_line(str(err))
    if isinstance(err, KeyboardInterrupt):
        return INTERRUPTED, "interrupted; a run folder can be continued with `finpod run SPEC --resume`"
    if isinstance(err, UnicodeError):
        return USER_ERROR, _one_line(
            f"text is not UTF-8 ({err}); fix: save the file as UTF-8 (or convert it with iconv)"
        )
    if isinstance(err, OSError) and (code := _os_error_code(err)) is not None:
        where = " -> ".join(str(name) for name in (err.filename, err.filename2) if name is not None)
        prefix = f"{where}: " if where else ""
        if code == errno.EEXIST and err.filename is not None and Path(err.filename).is_file():
            code = errno.ENOTDIR  # mkdir(parents=True) met a file where a folder belongs
        return USER_ERROR, _one_line(f"{prefix}{_OS_FIXES[code]}")
    text = str(err) or "no message"
    return INTERNAL_ERROR, _one_line(
        f"internal error ({type(err).__name__}: {text}); rerun with -v for the traceback"
    )


def report(err: BaseException, stream: TextIO) -> int:
    """Print ``err`` as ``error: <one line>`` on ``stream`` (traceback first at ``verbosity >= 1``).

    Args:
        err: the exception that reached the CLI.
        stream: usually ``sys.stderr``.

    Returns:
        The exit code for ``err`` (see :func:`describe`).
    """
    code, message = describe(err)
    message = _redact(message)
    if output.is_verbose() and not isinstance(err, KeyboardInterrupt):
        stream.write(_redact("".join(traceback.format_exception(err))))
    stream.write(f"error: {message}\n")
    stream.flush()
    return code


def _os_error_code(err: OSError) -> int | None:
    """The errno of ``err`` when finpod knows its fix; pyarrow's I/O errors carry it only as text."""
    if err.errno in _OS_FIXES:
        return int(err.errno)
    if err.errno is None:
        text = str(err)
        return next((code for code in _OS_FIXES if os.strerror(code) in text), None)
    return None


def _redact(text: str) -> str:
    """``text`` without any secret this process knows (registered keys, Alpaca keys in the env)."""
    for name in SECRET_VARIABLES:
        value = os.environ.get(name, "")
        if value:
            register_secret(value)
    return redact(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())
