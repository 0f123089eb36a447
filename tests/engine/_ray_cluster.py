"""A real Ray cluster on 127.0.0.1 for tests: a head and worker nodes, each node its own processes.

``ray.cluster_utils.Cluster`` starts a real GCS and one raylet (with its worker processes) per node,
exactly what ``ray start`` starts, but bound to loopback (``ray start --address`` would resolve
127.0.0.1 to a public address). ``tests/conftest.py`` imports the fixture :func:`ray_cluster` from
here (after :mod:`engine._ray_env` has set the Ray environment): a test module that uses it gets its
own cluster, started when its first Ray test runs and stopped after its module, so no Ray process
idles through the rest of the suite. Stopping it checks that every Ray process it started (GCS,
raylets, workers, agents) has ended, and fails the module's teardown naming any that has not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from engine import _ray_env  # noqa: F401  (before Ray is imported)

TESTS_DIR = Path(__file__).resolve().parents[1]
RAY_PROCESS_MARKERS = ("gcs_server", "raylet", "ray::", "default_worker.py", "ray/dashboard", "ray/_private")
"""Command-line fragments of the processes a Ray node runs."""
EXIT_TIMEOUT_S = 15.0
"""How long the Ray processes get to end after the cluster's shutdown, seconds."""
FAST_FAILURE_DETECTION = {"health_check_period_ms": 500, "health_check_failure_threshold": 4}
"""A dead node is noticed in about 2 s (Ray's default is about 15 s)."""


class LocalCluster:
    """A head node and worker nodes of one CPU each; ``address`` is the head's GCS address."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.address: str = cluster.address
        self.extra_nodes: list[Any] = []

    def add_node(self) -> None:
        """Start one more worker node (1 CPU) and wait until it has joined."""
        self.extra_nodes.append(self.cluster.add_node(num_cpus=1, wait=True))

    def remove_node(self) -> None:
        """Stop the newest worker node (its raylet and workers end; the GCS drops the node)."""
        self.cluster.remove_node(self.extra_nodes.pop(), allow_graceful=True)


@contextmanager
def local_cluster(worker_nodes: int) -> Iterator[LocalCluster]:
    """A head (1 CPU) and ``worker_nodes`` worker nodes (1 CPU each), all stopped on exit.

    Worker processes import the test helpers by name as the driver does: ``tests/`` is put on
    their ``PYTHONPATH``.
    """
    from ray.cluster_utils import Cluster

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), saved) if p)
    cluster = None
    try:
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "include_dashboard": False,
                "node_ip_address": "127.0.0.1",
                "_system_config": FAST_FAILURE_DETECTION,
            },
        )
        nodes = LocalCluster(cluster)
        for _ in range(worker_nodes):
            nodes.add_node()
        yield nodes
    finally:
        started = ray_processes()
        if cluster is not None:
            cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    assert_ended(started)


def ray_processes() -> list[psutil.Process]:
    """This process's descendants that are Ray's (workers included, while their raylet lives)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            command = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if any(marker in command for marker in RAY_PROCESS_MARKERS):
            found.append(child)
    return found


def assert_ended(processes: list[psutil.Process], timeout_s: float = EXIT_TIMEOUT_S) -> None:
    """Fail naming any of ``processes`` still running after ``timeout_s`` (zombies count as ended)."""
    _, alive = psutil.wait_procs(processes, timeout=timeout_s)
    left = []
    for process in alive:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.pid} {' '.join(process.cmdline())[:80]}")
        except psutil.Error:
            continue
    assert not left, f"Ray processes left running after the cluster stopped: {left}"


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``condition`` every 0.1 s until it holds; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the cluster"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalCluster]:
    """The module's Ray cluster: a head and one worker node of 1 CPU each on 127.0.0.1.

    A test that adds or removes nodes leaves it as it found it (two nodes).
    """
    with local_cluster(worker_nodes=1) as nodes:
        yield nodes
