"""Run one report step in a forked child process while this process draws the rest.

Drawing a report is single-threaded matplotlib and pandas work, bound by the interpreter; the
pyfolio tear sheet alone is over half of it. :func:`start_forked` runs such a step in a child forked
from this process (it inherits every imported module and the step's inputs, so it starts in
milliseconds) and :meth:`ForkedCall.result` collects what it returned, pickled over a pipe, with
what it printed and warned, shown here as the step would have shown it. The step must be a pure
function of its arguments whose result pickles, and whose files, if it writes any, are written
atomically: the two processes then draw the same page the one process would. Import what the step
needs before starting it: a child forked while another thread imports a module can wait forever on
that module's import lock.

Only where forking is safe and cheap (Linux). Elsewhere, and whenever the child fails (it cannot
start, dies, sends back something that does not unpickle, or has not answered after
:data:`CHILD_DEADLINE_S`), the step runs again in this process, so a report never depends on the
child.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import pickle
import select
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

CHILD_DEADLINE_S = 900.0
"""How long :meth:`ForkedCall.result` waits for a child before it stops it and runs the step here."""
_MAX_FD_FALLBACK = 4096
"""The highest descriptor closed in the child when the system does not say (``SC_OPEN_MAX``)."""


def forking_supported() -> bool:
    """Whether :func:`start_forked` forks here (Linux with ``os.fork``); elsewhere it runs inline."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class ForkedCall(Generic[T]):
    """A call running in a forked child (or, where none could start, not yet run).

    Use :func:`start_forked`; :meth:`result` returns what the call returned (the same object when
    asked again), :meth:`cancel` stops a child that is no longer wanted.
    """

    def __init__(self, function: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """See the class docstring; the child starts at once where forking is supported."""
        self._function, self._args, self._kwargs = function, args, kwargs
        self._pid: int | None = None  # a child not yet reaped
        self._read_fd: int | None = None
        self.forked = False
        """Whether a child process was started for the call."""
        self._done = False
        self._value: T | None = None
        if forking_supported():
            self._fork()

    def _fork(self) -> None:
        try:
            read_fd, write_fd = os.pipe()
        except OSError:  # out of descriptors: the step runs here
            return
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
                # no finaliser of an inherited object may close a descriptor number reused here
                gc.freeze()
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
        self._pid, self._read_fd, self.forked = pid, read_fd, True

    def _call_in_child(self) -> _Reply:
        """Run the call; what it printed and warned travels back with its result."""
        stdout, stderr = io.StringIO(), io.StringIO()
        with (
            warnings.catch_warnings(record=True) as caught,  # after this process's filters
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
        ):
            error: Exception | None = None
            value: Any = None
            try:
                value = self._function(*self._args, **self._kwargs)
            except Exception as exc:
                error = exc
        shown = [(str(w.message), w.category, w.filename, w.lineno) for w in caught]
        output = _Output(stdout.getvalue(), stderr.getvalue(), shown)
        if error is None:
            return _Reply("ok", value, output)
        return _Reply("error", _portable(error), output)

    def result(self) -> T:
        """What the call returned (its exception is raised here, with the child's traceback as a
        note); the call runs in this process when no child ran it or the child failed."""
        if self._done:
            return self._value  # type: ignore[return-value]
        reply = self._collect()
        if reply is None:
            value = self._function(*self._args, **self._kwargs)
        else:
            reply.output.replay()
            if reply.kind == "error":
                raise reply.value
            value = reply.value
        self._done, self._value = True, value
        return value

    def _collect(self) -> _Reply | None:
        """The child's reply, or ``None`` when there was no child or it failed."""
        if self._read_fd is None:
            return None
        data = bytearray()
        deadline = time.monotonic() + CHILD_DEADLINE_S
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._read_fd], [], [], left)[0]:
                    return None  # stuck: stopped below, the step runs here
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    break
                data += chunk
        finally:
            self.cancel()  # reaps the child; kills it first when it has not answered
        try:
            reply = pickle.loads(data)
        except Exception:  # nothing, or a partial reply: the child died
            return None
        return reply if isinstance(reply, _Reply) else None

    def cancel(self) -> None:
        """Stop the child, if one runs, and reap it (for a caller that gives up; a no-op after
        :meth:`result`)."""
        if self._read_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._read_fd)
            self._read_fd = None
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, 9)  # a child that answered has exited already: nothing to kill
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)
            self._pid = None


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
        """Print and show it here. The warnings passed the filters in the child (this process's,
        inherited), so they are shown, not filtered again."""
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        for message, category, filename, lineno in self.warnings:
            warnings.showwarning(category(message), category, filename, lineno)


@dataclass(frozen=True)
class _Reply:
    """A child's answer: ``kind`` ``"ok"`` with the call's ``value``, or ``"error"`` with its
    exception; and its :class:`_Output`."""

    kind: str
    value: Any
    output: _Output


def _portable(error: Exception) -> Exception:
    """``error`` with the child's traceback as a note, or, when it would not come back through
    pickle as itself, a ``RuntimeError`` that says what it was."""
    text = "".join(traceback.format_exception(error)).rstrip()
    with contextlib.suppress(Exception):
        error.add_note(f"in the forked report step:\n{text}")
        copy = pickle.loads(pickle.dumps(error))
        if type(copy) is type(error):
            return error
    return RuntimeError(f"the forked report step failed with {type(error).__name__}: {error}\n{text}")


def _send(fd: int, reply: _Reply) -> None:
    try:
        data = pickle.dumps(reply)
    except Exception as exc:  # a result that does not pickle: say why, as an error
        failure = RuntimeError(f"the forked call's result does not pickle: {exc}")
        data = pickle.dumps(_Reply("error", failure, reply.output))
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(data)


def _max_fd() -> int:
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return _MAX_FD_FALLBACK
    return limit if limit > 0 else _MAX_FD_FALLBACK
