"""The helper learners of a fused pod: their processes, their main loop, and stopping them.

Learners ``1 .. K-1`` run in processes spawned on the pod's first round (:func:`start_team`), each
building its own agent and env from the pod's factories (sent as cloudpickle bytes) with its own
seed (:func:`learner_seed`). The lead (learner 0, the pod's agent) drives them over the pod's
process group with a broadcast command per step (:data:`TRAIN`, :data:`SYNC`, :data:`STOP`,
:data:`GATHER`). Each pod's group meets through its own file store in a temporary folder, so any
number of pods fuse side by side; :class:`Team` stops the helpers and removes the folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Any

import cloudpickle  # type: ignore[import-untyped]
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from podracer.fusion.collectives import (
    EpochFusion,
    broadcast_bytes,
    command,
    gather_vectors,
    make_group,
    unpack,
)
from podracer.pod import AgentFactory, EnvFactory
from podracer.ppo import PPOAgent

HELPER_SEED_STRIDE = 7919
"""Learner ``r``'s env and generator seed is ``(seed + r * HELPER_SEED_STRIDE) % 2**31``."""
TRAIN, SYNC, STOP, GATHER = 1, 2, 3, 4
"""The lead's commands: train one round, load the lead's state (sent next), stop, gather the vectors."""


def learner_seed(seed: int, rank: int) -> int:
    """The seed of learner ``rank`` of a pod seeded ``seed`` (rank 0 keeps ``seed``)."""
    return (seed + rank * HELPER_SEED_STRIDE) % 2**31


def helper_main(
    rank: int, world: int, store_path: str, code: bytes, config: Any, seed: int, fuse_moments: bool
) -> None:
    """A helper learner's process: build its agent and env, then obey the lead until told to stop."""
    torch.set_num_threads(1)
    if torch.cuda.is_available() and torch.cuda.device_count() >= world:
        torch.cuda.set_device(rank)  # before the factory: "cuda" is then this learner's own GPU
    agent_factory, env_factory = cloudpickle.loads(code)
    own_seed = learner_seed(seed, rank)
    agent: PPOAgent = agent_factory(config, own_seed)
    env = env_factory(own_seed)
    store = dist.FileStore(store_path, world)
    group, device = make_group(dist.PrefixStore("fusion", store), rank, world, agent.device)
    agent.epoch_hook = EpochFusion(agent, group, world, fuse_moments, device)
    while True:
        code_now = command(group, 0, device)
        if code_now == STOP:
            break
        if code_now == SYNC:
            agent.load_state_dict(unpack(broadcast_bytes(group, None, device)))
            agent.generator.manual_seed(own_seed * 1_000_003 + agent.policy_version)
        elif code_now == TRAIN:
            agent.train_round(env)
        elif code_now == GATHER:
            gather_vectors(group, agent, world, device)


class Team:
    """The helper processes and the process group of one fused pod (kept apart from the agent so
    that the agent's finaliser can stop them)."""

    def __init__(
        self, group: Any, processes: list[Any], store: Any, folder: str, device: torch.device
    ) -> None:
        """The lead's group, the helpers' processes, the file store and its folder, the group's device."""
        self.group = group
        self.processes = processes
        self.store = store
        self.folder = folder
        self.device = device

    def close(self) -> None:
        """Tell the helpers to stop, then end any that do not within 10 s."""
        with contextlib.suppress(Exception):  # a helper died already: nothing to tell it
            command(self.group, STOP, self.device)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)


def pickle_factories(agent_factory: AgentFactory, env_factory: EnvFactory) -> bytes:
    """The factories as the bytes a helper builds its agent and env from (cloudpickle)."""
    code: bytes = cloudpickle.dumps((agent_factory, env_factory))
    return code


def start_team(
    lead: PPOAgent, code: bytes, config: Any, seed: int, learners: int, fuse_moments: bool
) -> Team:
    """Spawn the ``learners - 1`` helpers of a pod, join the lead to their group, and hook the lead's
    epochs to the fusion (:class:`~podracer.fusion.collectives.EpochFusion`).

    Args:
        lead: the pod's agent (learner 0).
        code: :func:`pickle_factories` of the pod's factories.
        config: the pod's hyper-parameters.
        seed: the pod's seed.
        learners: ``K`` (>= 2).
        fuse_moments: also average Adam's moments.
    """
    folder = tempfile.mkdtemp(prefix="podracer-fusion-")
    store = dist.FileStore(os.path.join(folder, "store"), learners)
    context = mp.get_context("spawn")
    processes = [
        context.Process(
            target=helper_main,
            args=(rank, learners, os.path.join(folder, "store"), code, config, seed, fuse_moments),
            daemon=True,
            name=f"podracer-learner-{rank}",
        )
        for rank in range(1, learners)
    ]
    for process in processes:
        process.start()
    group, device = make_group(dist.PrefixStore("fusion", store), 0, learners, lead.device)
    lead.epoch_hook = EpochFusion(lead, group, learners, fuse_moments, device)
    return Team(group, processes, store, folder, device)
