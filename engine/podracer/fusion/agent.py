"""The fused agent: a pod of ``K`` PPO learners that acts, snapshots and loads as one.

Learner 0 (the *lead*) is the pod's agent in the pod's own process and thread, training on the pod's
env; the helpers (:mod:`podracer.fusion.spawn`) start on the first round and stop when the agent is
garbage-collected or closed. After a ``load_state_dict`` or ``load_weights_from`` the lead's full
state reaches the helpers before the next round. A fused pod's snapshot is the lead's: a plain PPO
snapshot.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from typing import Any

import torch

from podracer.errors import TournamentError
from podracer.fusion.collectives import broadcast_bytes, command, gather_vectors, pack
from podracer.fusion.spawn import GATHER, SYNC, TRAIN, Team, pickle_factories, start_team
from podracer.pod import AgentFactory, EnvFactory
from podracer.ppo import PPOAgent
from podracer.protocols import Policy, RoundStats, TensorVectorEnv


class FusedAgent:
    """A pod agent of ``K >= 2`` fused PPO learners; the :class:`~podracer.pod.PodAgent` interface.

    Args:
        agent_factory: ``(config, seed) -> PPOAgent`` (picklable by cloudpickle: helpers build theirs).
        env_factory: ``seed -> env`` (picklable by cloudpickle).
        config: the pod's hyper-parameters.
        seed: the pod's seed (the lead's; helper ``r`` uses :func:`~podracer.fusion.learner_seed`).
        learners: ``K`` (>= 2).
        fuse_moments: also average Adam's moments (default; see :mod:`podracer.fusion`).
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
        if lead.config.lr_schedule == "budget":
            raise TournamentError(
                "learner fusion does not pass the tournament's budget to its helper learners, so "
                "lr_schedule 'budget' cannot decay there; fix: use lr_schedule 'linear' or 'constant', "
                "or one learner"
            )
        self.lead = lead
        self.learners = learners
        self.fuse_moments = fuse_moments
        self._config = config
        self._seed = seed
        self._code = pickle_factories(agent_factory, env_factory)
        self._team: Team | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._sync = True

    # ------------------------------------------------------------------ the Agent interface

    @property
    def env_steps(self) -> int:
        """The lead learner's env steps (each learner collects as many)."""
        return self.lead.env_steps

    @env_steps.setter
    def env_steps(self, value: int) -> None:
        """Set the lead's count (a child continuing its parent's); the helpers follow before the next
        round, with the lead's whole state."""
        self.lead.env_steps = value
        self._sync = True

    def train_round(self, env: TensorVectorEnv) -> RoundStats:
        """One round of every learner (the lead on ``env``), fused after every epoch.

        Returns:
            The lead's stats with ``env_steps`` counting every learner's transitions.

        Raises:
            TournamentError: a helper learner is gone or a collective timed out (the pod crashed).
        """
        start = time.perf_counter()
        try:
            team = self._synced_team()
            command(team.group, TRAIN, team.device)
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

    def _start(self) -> Team:
        if self._team is not None:
            return self._team
        self._team = start_team(
            self.lead, self._code, self._config, self._seed, self.learners, self.fuse_moments
        )
        self._finalizer = weakref.finalize(self, self._team.close)
        self._sync = True
        return self._team

    def _synced_team(self) -> Team:
        """The running team (started if needed), the helpers holding the lead's state."""
        team = self._start()
        if self._sync:
            command(team.group, SYNC, team.device)
            broadcast_bytes(team.group, pack(self.lead.state_dict()), team.device)
            self._sync = False
        return team

    def close(self) -> None:
        """Stop the helper learners now (they restart at the next round)."""
        if self._finalizer is not None:
            self._finalizer()
        self._team, self._finalizer = None, None
        self.lead.epoch_hook = None
        self._sync = True

    def learner_vectors(self) -> list[torch.Tensor]:
        """Each learner's :func:`~podracer.fusion.learner_vector`, lead first (a diagnostic: after a
        round with moment fusion they are all equal; without it, only the parameters are). Starts
        the helpers if needed."""
        team = self._synced_team()
        command(team.group, GATHER, team.device)
        return gather_vectors(team.group, self.lead, self.learners, team.device)

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
