"""What fused learners exchange over their process group: commands, state bytes, averages.

Every collective here runs on one :mod:`torch.distributed` process group of ``K`` learners (gloo on
127.0.0.1 with host buffers, or NCCL when every learner has its own GPU; :func:`make_group`).
:class:`EpochFusion` is the hook a learner runs after every update epoch: it averages the network
parameters, the Adam moments (``exp_avg``, ``exp_avg_sq``), the observation statistics (mean and
second moment) and the epoch's approximate KL, in one all-reduce per dtype (:func:`average_`).
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from podracer.ppo import PPOAgent

FUSION_TIMEOUT = datetime.timedelta(seconds=120)
"""How long a learner waits for the others at a collective before the round fails."""


def make_group(store: Any, rank: int, world: int, device: torch.device) -> tuple[Any, torch.device]:
    """``(group, communication device)``: NCCL on this learner's GPU when every learner has its own
    GPU, else gloo on 127.0.0.1 with buffers on the host."""
    if device.type == "cuda" and torch.cuda.device_count() >= world:
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = FUSION_TIMEOUT
        return dist.ProcessGroupNCCL(store, rank, world, options), torch.device("cuda", rank)
    options = dist.ProcessGroupGloo._Options()  # type: ignore[attr-defined]  # bind loopback: torch's own API
    options._timeout = FUSION_TIMEOUT
    options._devices = [dist.ProcessGroupGloo.create_device(hostname="127.0.0.1")]
    return dist.ProcessGroupGloo(store, rank, world, options), torch.device("cpu")


def broadcast_bytes(group: Any, data: bytes | None, device: torch.device) -> bytes:
    """Rank 0 sends ``data``; every rank returns it (a length, then a uint8 tensor)."""
    length = torch.tensor([0 if data is None else len(data)], dtype=torch.int64, device=device)
    group.broadcast([length]).wait()
    buffer = torch.empty(int(length.item()), dtype=torch.uint8, device=device)
    if data is not None:
        buffer.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    group.broadcast([buffer]).wait()
    return buffer.cpu().numpy().tobytes()


def command(group: Any, code: int, device: torch.device) -> int:
    """Rank 0 sends the command ``code``; every rank returns it."""
    value = torch.tensor([code], dtype=torch.int64, device=device)
    group.broadcast([value]).wait()
    return int(value.item())


def pack(state: Mapping[str, Any]) -> bytes:
    """An agent ``state_dict`` as ``torch.save`` bytes."""
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    return buffer.getvalue()


def unpack(data: bytes) -> dict[str, Any]:
    """:func:`pack` bytes read back with ``torch.load(weights_only=True)`` onto the CPU."""
    state: dict[str, Any] = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    return state


def average_(tensors: list[torch.Tensor], group: Any, world: int, device: torch.device) -> None:
    """Average ``tensors`` in place across the ``world`` members of ``group``, one all-reduce per dtype.

    The flat buffer travels on ``device``, the group's communication device (the host for gloo).
    """
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for tensor in tensors:
        by_dtype.setdefault(tensor.dtype, []).append(tensor)
    for same in by_dtype.values():
        flat = torch.cat([t.reshape(-1) for t in same]).to(device)
        group.allreduce([flat]).wait()
        flat /= world
        offset = 0
        for tensor in same:
            tensor.copy_(flat[offset : offset + tensor.numel()].view_as(tensor))
            offset += tensor.numel()


class EpochFusion:
    """The hook a learner calls after every update epoch: average everything, return the fused KL.

    Args:
        agent: this process's learner.
        group: the pod's process group.
        world: ``K``, learners in the group.
        fuse_moments: also average Adam's ``exp_avg`` and ``exp_avg_sq``.
        device: the group's communication device (the learner's GPU for NCCL, else the CPU).
    """

    def __init__(
        self, agent: PPOAgent, group: Any, world: int, fuse_moments: bool, device: torch.device
    ) -> None:
        """See the class docstring."""
        self.agent = agent
        self.group = group
        self.device = device
        self.world = world
        self.fuse_moments = fuse_moments
        self.fusions = 0

    def __call__(self, epoch_kl: torch.Tensor) -> torch.Tensor:
        """Fuse the learners; returns the mean of their epoch KLs (0-d)."""
        agent = self.agent
        params = [p.data for p in agent.model.parameters()]
        tensors = list(params)
        if self.fuse_moments:
            for param in agent.model.parameters():
                state = agent.optimizer.state.get(param, {})
                tensors += [state[name] for name in ("exp_avg", "exp_avg_sq") if name in state]
        stats = agent.obs_stats
        second_moment = stats.var + stats.mean.square()
        kl = epoch_kl.detach().reshape(1).to(torch.float32).clone()
        average_([*tensors, stats.mean, second_moment, kl], self.group, self.world, self.device)
        stats.var.copy_((second_moment - stats.mean.square()).clamp_min(0.0))
        self.fusions += 1
        return kl[0]


def learner_vector(agent: PPOAgent) -> torch.Tensor:
    """What fusion averages, flat in float64: parameters, Adam moments (if any), observation statistics."""
    parts = [p.detach().reshape(-1) for p in agent.model.parameters()]
    for param in agent.model.parameters():
        state = agent.optimizer.state.get(param, {})
        parts += [state[name].reshape(-1) for name in ("exp_avg", "exp_avg_sq") if name in state]
    parts += [agent.obs_stats.mean, agent.obs_stats.var]
    return torch.cat([part.double() for part in parts])


def gather_vectors(group: Any, agent: PPOAgent, world: int, device: torch.device) -> list[torch.Tensor]:
    """Every learner's :func:`learner_vector` (an all-gather; each rank gets all ``world``)."""
    mine = learner_vector(agent).to(device)
    everyone = [torch.empty_like(mine) for _ in range(world)]
    group.allgather([everyone], [mine]).wait()
    return [vector.cpu() for vector in everyone]


def parameters_of(agent: PPOAgent) -> torch.Tensor:
    """All network parameters of ``agent`` as one flat float32 vector (for comparing learners)."""
    return torch.cat([p.detach().reshape(-1).float().cpu() for p in agent.model.parameters()])
