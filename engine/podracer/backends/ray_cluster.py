"""Reaching Ray: start a single-node Ray bound to 127.0.0.1, or join a cluster (:func:`connect`).

Loopback by default: importing this module sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` unless it is
set already (before Ray is imported), so a Ray started here (:func:`connect` with no address) binds
127.0.0.1 only, without the dashboard; it also sets ``RAY_USAGE_STATS_ENABLED=0`` unless set (no usage
report leaves the machine). The other Ray modules of the backend import this one before Ray.
Connecting to an existing cluster needs the same ``RAY_AUTH_MODE`` (and token, ``RAY_AUTH_TOKEN``)
as every process of that cluster.
"""

from __future__ import annotations

import logging
import os
import socket
import sys

if "ray" not in sys.modules:  # must precede Ray's import: its constants read them once
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray

from podracer.errors import TournamentError

LOOPBACK = "127.0.0.1"
"""Address a Ray started by :func:`connect` binds."""
CONNECT_TIMEOUT_S = 5.0
"""How long :func:`connect` waits for a cluster's head to accept a connection, seconds."""


def connect(address: str | None = None, *, include_dashboard: bool = False) -> bool:
    """Connect this process to Ray, or start a single-node Ray bound to 127.0.0.1.

    Args:
        address: ``None`` starts a local Ray (loopback only); ``"auto"`` joins the cluster this
            machine belongs to (started with ``ray start``); ``"host:port"`` joins that head's GCS.
        include_dashboard: start Ray's dashboard too (local start only).

    Returns:
        Whether this call started or joined Ray (``False``: it was connected already); the caller
        that gets ``True`` owns the connection and ends it with ``ray.shutdown()``.

    Raises:
        TournamentError: Ray cannot be reached, or a local start would bind a non-loopback address.
    """
    if ray.is_initialized():
        return False
    from ray._private import ray_constants

    try:
        if address is None:
            if ray_constants.ENABLE_RAY_CLUSTER:
                raise TournamentError(
                    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1 would make a local Ray bind a public address; "
                    "unset it, or start a cluster with `ray start --head` and pass its address"
                )
            ray.init(
                address="local",
                _node_ip_address=LOOPBACK,
                include_dashboard=include_dashboard,
                logging_level=logging.ERROR,
                log_to_driver=False,
            )
        else:
            _check_reachable(address)
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except TournamentError:
        raise
    except Exception as exc:
        where = "a local Ray" if address is None else f"the Ray cluster at {address!r}"
        raise TournamentError(
            f"cannot start or join {where} ({type(exc).__name__}: {exc}); check the address and that "
            "RAY_AUTH_MODE / RAY_AUTH_TOKEN match the cluster's"
        ) from None
    return True


def _check_reachable(address: str) -> None:
    """Fail fast when a ``host:port`` address accepts no connection (``ray.init`` retries for minutes).

    Raises:
        ConnectionError: nothing listens there within :data:`CONNECT_TIMEOUT_S`.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "ray://...", or a name Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or exc})") from None
