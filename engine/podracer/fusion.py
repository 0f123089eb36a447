"""Learner fusion: a pod with ``K`` PPO learners whose parameters are averaged after every epoch.

Each learner has its own envs (``env_factory`` of its own seed) and collects its own rollout; after
every update epoch the learners average, over a ``torch.distributed`` process group (gloo on CPU,
NCCL when every learner has its own GPU), their network parameters, their Adam moments
(``exp_avg``, ``exp_avg_sq``), their observation statistics (mean and second moment), and the
epoch's approximate KL (so that ``target_kl`` stops every learner after the same epoch). After the
fusion all learners hold identical parameters: the pod is one agent trained on ``K`` times the data
per round.

Why the moments too (the reference's "model fusion" does it): averaging the parameters alone leaves
each learner's Adam moments pointing along its own past gradients, so the learners drift apart again
from the first step of the next epoch; averaged moments keep the next steps consistent. The extra
cost is two more tensors of the parameters' size per fusion (see BENCHMARKS.md).

Layout: learner 0 (the *lead*) is the pod's agent in the pod's own process and thread, training on
the pod's env; learners ``1 .. K-1`` run in helper processes (spawned on the first round, stopped
when the agent is garbage-collected). The lead drives them over the same process group: a broadcast
command per round (train, sync, stop) and, after a ``load_state_dict`` or ``load_weights_from``,
the lead's full state as ``torch.save`` bytes, read back with ``weights_only=True``. Each fused pod
has its own group (a ``ProcessGroupGloo`` object bound to 127.0.0.1, meeting through its own file
store in a temporary folder: no listening port beyond gloo's loopback pairs), so any number of pods
fuse side by side. ``K = 1`` never builds any of this: use the plain agent.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping
from typing import Any

import cloudpickle  # type: ignore[import-untyped]
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from podracer.errors import TournamentError
from podracer.pod import AgentFactory, EnvFactory
from podracer.ppo import PPOAgent
from podracer.protocols import Policy, RoundStats, TensorVectorEnv

FUSION_TIMEOUT = datetime.timedelta(seconds=120)
"""How long a learner waits for the others at a collective before the round fails."""
HELPER_SEED_STRIDE = 7919
"""Learner ``r``'s env and generator seed is ``(seed + r * HELPER_SEED_STRIDE) % 2**31``."""
_TRAIN, _SYNC, _STOP, _GATHER = 1, 2, 3, 4


def learner_seed(seed: int, rank: int) -> int:
    """The seed of learner ``rank`` of a pod seeded ``seed`` (rank 0 keeps ``seed``)."""
    return (seed + rank * HELPER_SEED_STRIDE) % 2**31


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


def _make_group(store: Any, rank: int, world: int, device: torch.device) -> tuple[Any, torch.device]:
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


def _broadcast_bytes(group: Any, data: bytes | None, device: torch.device) -> bytes:
    """Rank 0 sends ``data``; every rank returns it (a length, then a uint8 tensor)."""
    length = torch.tensor([0 if data is None else len(data)], dtype=torch.int64, device=device)
    group.broadcast([length]).wait()
    buffer = torch.empty(int(length.item()), dtype=torch.uint8, device=device)
    if data is not None:
        buffer.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    group.broadcast([buffer]).wait()
    return buffer.cpu().numpy().tobytes()


def _command(group: Any, command: int, device: torch.device) -> int:
    value = torch.tensor([command], dtype=torch.int64, device=device)
    group.broadcast([value]).wait()
    return int(value.item())


def _pack(state: Mapping[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(dict(state), buffer)
    return buffer.getvalue()


def _unpack(data: bytes) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    return state


def _helper_main(
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
    group, device = _make_group(dist.PrefixStore("fusion", store), rank, world, agent.device)
    agent.epoch_hook = EpochFusion(agent, group, world, fuse_moments, device)
    while True:
        command = _command(group, 0, device)
        if command == _STOP:
            break
        if command == _SYNC:
            agent.load_state_dict(_unpack(_broadcast_bytes(group, None, device)))
            agent.generator.manual_seed(own_seed * 1_000_003 + agent.policy_version)
        elif command == _TRAIN:
            agent.train_round(env)
        elif command == _GATHER:
            _gather_vectors(group, agent, world, device)


def learner_vector(agent: PPOAgent) -> torch.Tensor:
    """What fusion averages, flat in float64: parameters, Adam moments (if any), observation statistics."""
    parts = [p.detach().reshape(-1) for p in agent.model.parameters()]
    for param in agent.model.parameters():
        state = agent.optimizer.state.get(param, {})
        parts += [state[name].reshape(-1) for name in ("exp_avg", "exp_avg_sq") if name in state]
    parts += [agent.obs_stats.mean, agent.obs_stats.var]
    return torch.cat([part.double() for part in parts])


def _gather_vectors(group: Any, agent: PPOAgent, world: int, device: torch.device) -> list[torch.Tensor]:
    """Every learner's :func:`learner_vector` (an all-gather; each rank gets all ``world``)."""
    mine = learner_vector(agent).to(device)
    everyone = [torch.empty_like(mine) for _ in range(world)]
    group.allgather([everyone], [mine]).wait()
    return [vector.cpu() for vector in everyone]


class _Team:
    """The helper processes and the process group of one fused pod (kept apart from the agent so
    that the agent's finaliser can stop them)."""

    def __init__(
        self, group: Any, processes: list[Any], store: Any, folder: str, device: torch.device
    ) -> None:
        self.group = group
        self.processes = processes
        self.store = store
        self.folder = folder
        self.device = device

    def close(self) -> None:
        """Tell the helpers to stop, then end any that do not within 10 s."""
        with contextlib.suppress(Exception):  # a helper died already: nothing to tell it
            _command(self.group, _STOP, self.device)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)


class FusedAgent:
    """A pod agent of ``K >= 2`` fused PPO learners; the :class:`~podracer.pod.PodAgent` interface.

    Args:
        agent_factory: ``(config, seed) -> PPOAgent`` (picklable by cloudpickle: helpers build theirs).
        env_factory: ``seed -> env`` (picklable by cloudpickle).
        config: the pod's hyper-parameters.
        seed: the pod's seed (the lead's; helper ``r`` uses :func:`learner_seed`).
        learners: ``K`` (>= 2).
        fuse_moments: also average Adam's moments (default; see the module docstring).
    """

    def __init__(
        self,
        agent_factory: AgentFactory,
        env_factory: EnvFactory,
        config: Any,
        seed: int,
        learners: int,
        fuse_moments: bool = True,
    ) -> None:
        """See the class docstring."""
        if learners < 2:
            raise TournamentError(
                f"FusedAgent needs learners >= 2, got {learners}; use the plain agent for 1"
            )
        lead = agent_factory(config, seed)
        if not isinstance(lead, PPOAgent):
            raise TournamentError(f"learner fusion averages PPOAgent learners, not {type(lead).__name__}")
        self.lead = lead
        self.learners = learners
        self.fuse_moments = fuse_moments
        self._config = config
        self._seed = seed
        self._code = cloudpickle.dumps((agent_factory, env_factory))
        self._team: _Team | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._sync = True

    # ------------------------------------------------------------------ the Agent interface

    @property
    def env_steps(self) -> int:
        """The lead learner's env steps (each learner collects as many)."""
        return self.lead.env_steps

    def train_round(self, env: TensorVectorEnv) -> RoundStats:
        """One round of every learner (the lead on ``env``), fused after every epoch.

        Returns:
            The lead's stats with ``env_steps`` counting every learner's transitions.

        Raises:
            TournamentError: a helper learner is gone or a collective timed out (the pod crashed).
        """
        start = time.perf_counter()
        try:
            team = self._start()
            if self._sync:
                _command(team.group, _SYNC, team.device)
                _broadcast_bytes(team.group, _pack(self.lead.state_dict()), team.device)
                self._sync = False
            _command(team.group, _TRAIN, team.device)
            stats = self.lead.train_round(env)
        except RuntimeError as exc:
            self.close()
            raise TournamentError(
                f"learner fusion failed ({exc}); the pod's helper learners stopped"
            ) from None
        return RoundStats(
            env_steps=stats.env_steps * self.learners,
            seconds=time.perf_counter() - start,
            metrics={**stats.metrics, "learners": float(self.learners)},
        )

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """The lead's actions (all learners hold the same parameters after a round)."""
        return self.lead.act(obs, deterministic)

    def evaluation_policy(self) -> Policy:
        """The lead's frozen deterministic policy (:meth:`PPOAgent.evaluation_policy`)."""
        return self.lead.evaluation_policy()

    def state_dict(self) -> dict[str, Any]:
        """The lead's state: a plain PPO snapshot (it loads into a one-learner agent too)."""
        return self.lead.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the lead; the helpers get the same state before the next round."""
        self.lead.load_state_dict(state)
        self._sync = True

    def load_weights_from(self, state: Mapping[str, Any], keep_optimizer: bool) -> None:
        """Copy a snapshot's weights into the lead; the helpers follow before the next round."""
        self.lead.load_weights_from(state, keep_optimizer)
        self._sync = True

    def __getattr__(self, name: str) -> Any:
        """Anything else (``config``, ``model``, ...) is the lead's."""
        if name == "lead":
            raise AttributeError(name)
        return getattr(self.lead, name)

    # ------------------------------------------------------------------ the team

    def _start(self) -> _Team:
        if self._team is not None:
            return self._team
        world = self.learners
        folder = tempfile.mkdtemp(prefix="podracer-fusion-")
        store = dist.FileStore(os.path.join(folder, "store"), world)
        context = mp.get_context("spawn")
        processes = [
            context.Process(
                target=_helper_main,
                args=(
                    rank,
                    world,
                    os.path.join(folder, "store"),
                    self._code,
                    self._config,
                    self._seed,
                    self.fuse_moments,
                ),
                daemon=True,
                name=f"podracer-learner-{rank}",
            )
            for rank in range(1, world)
        ]
        for process in processes:
            process.start()
        group, device = _make_group(dist.PrefixStore("fusion", store), 0, world, self.lead.device)
        self.lead.epoch_hook = EpochFusion(self.lead, group, world, self.fuse_moments, device)
        self._team = _Team(group, processes, store, folder, device)
        self._finalizer = weakref.finalize(self, self._team.close)
        self._sync = True
        return self._team

    def close(self) -> None:
        """Stop the helper learners now (they restart at the next round)."""
        if self._finalizer is not None:
            self._finalizer()
        self._team, self._finalizer = None, None
        self.lead.epoch_hook = None
        self._sync = True

    def learner_vectors(self) -> list[torch.Tensor]:
        """Each learner's :func:`learner_vector`, lead first (a diagnostic: after a round with moment
        fusion they are all equal; without it, only the parameters are). Starts the helpers if needed."""
        team = self._start()
        if self._sync:
            _command(team.group, _SYNC, team.device)
            _broadcast_bytes(team.group, _pack(self.lead.state_dict()), team.device)
            self._sync = False
        _command(team.group, _GATHER, team.device)
        return _gather_vectors(team.group, self.lead, self.learners, team.device)

    def helper_pids(self) -> list[int]:
        """Process ids of the running helper learners (empty before the first round)."""
        return [] if self._team is None else [p.pid for p in self._team.processes if p.pid is not None]


def fused_agent_factory(
    agent_factory: AgentFactory, env_factory: EnvFactory, learners: int, fuse_moments: bool = True
) -> AgentFactory:
    """``agent_factory`` itself for ``learners == 1`` (no process group at all), else one that builds
    :class:`FusedAgent` pods of ``learners`` learners."""
    if learners < 1:
        raise TournamentError(f"learners is {learners}; use 1 (no fusion) or more")
    if learners == 1:
        return agent_factory

    def make(config: Any, seed: int) -> Any:
        return FusedAgent(agent_factory, env_factory, config, seed, learners, fuse_moments)

    return make


def parameters_of(agent: PPOAgent) -> torch.Tensor:
    """All network parameters of ``agent`` as one flat float32 vector (for comparing learners)."""
    return torch.cat([p.detach().reshape(-1).float().cpu() for p in agent.model.parameters()])
