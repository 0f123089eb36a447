"""The pod workers: the Ray actors that run rounds of the pods they hold.

:class:`PodWorker` holds one pod (a :class:`PodHost`); :class:`PopulationWorker` holds several and
trains them in lockstep as one population (a :class:`~podracer.backends.population_host.PopulationHost`).
A worker keeps its pods' agents and envs between their rounds. The application's code (the
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
from podracer.backends.population_host import PodRound, PopulationHost, RoundOutcome

__all__ = ["PodWorker", "PopulationWorker", "WorkerLostError", "pack_state", "unpack_state"]


class _CodeCache:
    """The application's code, fetched from the object store once per distinct reference."""

    def __init__(self) -> None:
        self._key: str | None = None
        self._code: Code | None = None

    def get(self, boxed: list[Any]) -> Code:
        """``boxed`` is ``[ObjectRef]`` of ``(agent_factory, env_factory, evaluate)``."""
        key = boxed[0].hex()
        if key != self._key:
            self._code = ray.get(boxed[0])
            self._key = key
        assert self._code is not None
        return self._code


class PodWorker:
    """A Ray actor that runs rounds of the pod it holds (its agent and env stay between rounds).

    Args:
        torch_threads: torch intra-op threads of this worker (its CPU share).
    """

    def __init__(self, torch_threads: int) -> None:
        """See the class docstring."""
        torch.set_num_threads(torch_threads)
        self._code = _CodeCache()
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
        return self._host.run_round(
            self._code.get(code), incarnation, pod_id, agent_config, seed, train_rounds, state, budget_spent
        )


class PopulationWorker:
    """A Ray actor that trains the pods it holds in lockstep, as one population on its device.

    Args:
        torch_threads: torch intra-op threads of the population's computation (its CPU share).
    """

    def __init__(self, torch_threads: int) -> None:
        """See the class docstring."""
        torch.set_num_threads(torch_threads)
        self._code = _CodeCache()
        self._host = PopulationHost(torch_threads)

    def where(self) -> dict[str, Any]:
        """``pid`` and ``node_id`` of this worker."""
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id()}

    def run_rounds(self, code: list[Any], rounds: list[PodRound]) -> list[RoundOutcome]:
        """One round of every pod in ``rounds`` (:meth:`PopulationHost.run_rounds`); ``code`` is
        ``[ObjectRef]`` of ``(agent_factory, env_factory, evaluate)`` (boxed: fetched once)."""
        return self._host.run_rounds(self._code.get(code), [PodRound(*part) for part in rounds])
