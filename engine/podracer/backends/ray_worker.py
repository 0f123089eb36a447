"""The pod worker: the Ray actor that runs rounds of the pod it holds (a :class:`PodHost`).

A worker keeps its pod's agent and env between that pod's rounds. The application's code (the
factories and ``evaluate``) reaches it through the object store, fetched once; agent states travel
as tensors only (:func:`pack_state`, :func:`unpack_state` in :mod:`podracer.backends.pod_host`).
"""

from __future__ import annotations

import os
from typing import Any

# First: importing ray_cluster sets Ray's environment, which Ray reads once when it is imported.
from podracer.backends import ray_cluster  # noqa: F401

# isort: split
import ray
import torch

from podracer.backends.pod_host import Code, PodHost, WorkerLostError, pack_state, unpack_state

__all__ = ["PodWorker", "WorkerLostError", "pack_state", "unpack_state"]


class PodWorker:
    """A Ray actor that runs rounds of the pod it holds (its agent and env stay between rounds).

    Args:
        torch_threads: torch intra-op threads of this worker (its CPU share).
    """

    def __init__(self, torch_threads: int) -> None:
        """See the class docstring."""
        torch.set_num_threads(torch_threads)
        self._code_key: str | None = None
        self._code: Code | None = None
        self._host = PodHost()

    def where(self) -> dict[str, Any]:
        """``pid`` and ``node_id`` of this worker."""
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def run_round(
        self,
        code: list[Any],
        incarnation: int,
        pod_id: int,
        agent_config: Any,
        seed: int,
        train_rounds: int,
        state: bytes | None,
        budget_spent: float = 0.0,
    ) -> tuple[dict[str, Any], bytes]:
        """Run one round of pod ``incarnation`` (:meth:`PodHost.run_round`); ``code`` is
        ``[ObjectRef]`` of ``(agent_factory, env_factory, evaluate)`` (boxed: fetched once)."""
        key = code[0].hex()
        if key != self._code_key:
            self._code = ray.get(code[0])
            self._code_key = key
        assert self._code is not None
        return self._host.run_round(
            self._code, incarnation, pod_id, agent_config, seed, train_rounds, state, budget_spent
        )
