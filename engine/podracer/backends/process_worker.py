"""The process pool's pod worker: ``python -m podracer.backends.process_worker FD THREADS``.

It reads requests from the socket ``FD`` that its driver (:class:`podracer.backends.processes.
ProcessBackend`) passed it, runs each pod round on its :class:`~podracer.backends.pod_host.PodHost`
with ``THREADS`` torch threads, and answers every request with one reply. It exits when the socket
closes (its driver stopped or died) or on a ``stop`` request. Ctrl-C reaches the driver, which stops
its workers; a worker ignores it.

Requests (``pickle`` of a tuple): ``("round", code_key, code, incarnation, pod_id, agent_config, seed,
train_rounds, state, budget_spent)``, where ``code`` is the ``cloudpickle`` bytes of ``(agent_factory,
env_factory, evaluate)`` the first time ``code_key`` is sent to this worker and ``None`` after;
``("stop",)``. Replies: ``("ok", result_fields, state_bytes)`` or ``("error", exception_bytes | None,
message)``.
"""

from __future__ import annotations

import pickle
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

import cloudpickle  # type: ignore[import-untyped]
import torch

from podracer.backends.pod_host import Code, PodHost


def error_reply(exc: BaseException) -> tuple[str, bytes | None, str]:
    """A round's exception as a reply: the exception itself when it pickles, and its message."""
    message = f"{type(exc).__name__}: {exc}"
    data: bytes | None
    try:
        pickled: bytes = cloudpickle.dumps(exc)
        pickle.loads(pickled)  # the driver must be able to read it back
        data = pickled
    except Exception:
        data = None
        message += "\n" + "".join(traceback.format_exception(exc))
    return "error", data, message


def serve(connection: Connection) -> None:
    """Answer requests on ``connection`` until it closes or a ``stop`` request comes."""
    host = PodHost()
    codes: dict[int, Code] = {}
    while True:
        try:
            request: tuple[Any, ...] = pickle.loads(connection.recv_bytes())
        except (EOFError, OSError):
            return
        if request[0] == "stop":
            return
        _, code_key, code, *arguments = request
        reply: tuple[Any, ...]
        try:
            if code is not None:
                codes = {code_key: cloudpickle.loads(code)}  # one tournament's code at a time
            fields, new_state = host.run_round(codes[code_key], *arguments)
            reply = ("ok", fields, new_state)
        except Exception as exc:
            reply = error_reply(exc)
        try:
            data = pickle.dumps(reply)
        except Exception as exc:  # a result that does not pickle: the round failed, not the worker
            data = pickle.dumps(error_reply(exc))
        try:
            connection.send_bytes(data)
        except OSError:
            return


def run_worker(socket_fd: int, torch_threads: int) -> None:
    """Serve the driver on ``socket_fd`` with ``torch_threads`` torch threads (a started or forked worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torch.set_num_threads(torch_threads)
    serve(Connection(socket_fd))


def main(argv: list[str]) -> None:
    """Entry point: ``argv`` is ``[program, socket_fd, torch_threads]``."""
    run_worker(int(argv[1]), int(argv[2]))


if __name__ == "__main__":
    main(sys.argv)
