"""Run one report step in a forked child process while this process draws the rest.

Drawing a report is single-threaded matplotlib and pandas work, bound by the interpreter; the
pyfolio tear sheet alone is over half of it. :func:`start_forked` runs such a step in a child forked
from this process (it inherits every imported module and the step's inputs, so it starts in
milliseconds) and :meth:`ForkedCall.result` collects what it returned, pickled over a pipe. The
step must be a pure function of its arguments whose result pickles, and whose files, if it writes
any, are written atomically: the two processes then draw the same page the one process would.

Only where forking is safe and cheap (Linux). Elsewhere, and whenever the child fails (it cannot
start, dies, or sends back something that does not unpickle), the step runs again in this process,
so a report never depends on the child.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_MAX_FD_FALLBACK = 4096
"""The highest descriptor closed in the child when the system does not say (``SC_OPEN_MAX``)."""


def forking_supported() -> bool:
    """Whether :func:`start_forked` forks here (Linux with ``os.fork``); elsewhere it runs inline."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class ForkedCall(Generic[T]):
    """A call running in a forked child (or, where none could start, not yet run).

    Use :func:`start_forked`; :meth:`result` returns what the call returned, exactly once.
    """

    def __init__(self, function: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """See the class docstring; the child starts at once where forking is supported."""
        self._function, self._args, self._kwargs = function, args, kwargs
        self._pid: int | None = None
        self._read_fd: int | None = None
        if forking_supported():
            self._fork()

    @property
    def forked(self) -> bool:
        """Whether a child process runs (or ran) the call."""
        return self._pid is not None

    def _fork(self) -> None:
        read_fd, write_fd = os.pipe()
        try:
            with warnings.catch_warnings():  # Python 3.12+ warns about forking a threaded process;
                warnings.simplefilter("ignore", DeprecationWarning)  # the child runs no other thread's code
                pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return
        if pid == 0:  # the child: run, send, leave without this process's exit handlers
            code = 0
            try:
                os.close(read_fd)
                # keep only the pipe and stdio: an inherited descriptor (a run folder's lock) would
                # outlive this process's parent
                os.closerange(3, write_fd)
                os.closerange(write_fd + 1, _max_fd())
                _send(write_fd, self._call_in_child())
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        self._pid, self._read_fd = pid, read_fd

    def _call_in_child(self) -> tuple[str, Any, _Output]:
        """Run the call; what it printed and warned travels back with its result, for this process's
        parent to print and warn as if it had run the call itself."""
        stdout, stderr = io.StringIO(), io.StringIO()
        with (
            warnings.catch_warnings(record=True) as caught,
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            try:
                outcome: tuple[str, Any] = ("ok", self._function(*self._args, **self._kwargs))
            except Exception as exc:
                outcome = ("error", exc)
        shown = [(str(w.message), w.category, w.filename, w.lineno) for w in caught]
        return (*outcome, _Output(stdout.getvalue(), stderr.getvalue(), shown))

    def result(self) -> T:
        """What the call returned (its exception is raised here); runs it in this process when no
        child ran it or the child failed."""
        reply = self._collect()
        if reply is None:
            return self._function(*self._args, **self._kwargs)
        kind, value, output = reply
        output.replay()
        if kind == "error":
            raise value
        result: T = value
        return result

    def _collect(self) -> tuple[str, Any, _Output] | None:
        """The child's reply, or ``None`` when there was no child or it failed."""
        if self._pid is None or self._read_fd is None:
            return None
        pid, read_fd = self._pid, self._read_fd
        self._read_fd = None
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                data = pipe.read()
        finally:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        try:
            reply = pickle.loads(data)
        except Exception:  # nothing, or a partial reply: the child died
            return None
        if not (isinstance(reply, tuple) and len(reply) == 3 and reply[0] in ("ok", "error")):
            return None
        if not isinstance(reply[2], _Output):
            return None
        return reply

    def cancel(self) -> None:
        """Stop the child, if one runs, and forget its reply (for a caller that gives up)."""
        if self._pid is None or self._read_fd is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, 9)
        os.close(self._read_fd)
        self._read_fd = None
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self._pid, 0)


def start_forked(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> ForkedCall[T]:
    """Start ``function(*args, **kwargs)`` in a forked child (see the module doc); collect it with
    :meth:`ForkedCall.result`, or stop it with :meth:`ForkedCall.cancel`."""
    return ForkedCall(function, args, kwargs)


@dataclass(frozen=True)
class _Output:
    """What a call printed (``stdout``, ``stderr``) and warned (message, category, file, line)."""

    stdout: str
    stderr: str
    warnings: list[tuple[str, type[Warning], str, int]]

    def replay(self) -> None:
        """Print and warn it here, as the call would have in this process."""
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        for message, category, filename, lineno in self.warnings:
            warnings.warn_explicit(message, category, filename, lineno)


def _send(fd: int, reply: tuple[str, Any, _Output]) -> None:
    try:
        data = pickle.dumps(reply)
    except Exception as exc:  # a result or exception that does not pickle: say why, as an error
        failure = RuntimeError(f"the forked call's result does not pickle: {exc}")
        data = pickle.dumps(("error", failure, reply[2]))
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(data)


def _max_fd() -> int:
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return _MAX_FD_FALLBACK
    return limit if limit > 0 else _MAX_FD_FALLBACK
