"""Several pods' envs as one batched env: how a population steps ``P x N`` envs at once.

Shapes: ``P`` member envs of ``N`` envs each (``N`` may differ per member), ``D`` observation size,
``A`` action size.

A population (:mod:`podracer.population`) trains the pods of one architecture in lockstep. Each pod
keeps its own env (so it can leave the population, be snapshotted, or train alone and continue
exactly where it was); for a round, :func:`stack_envs` joins the members into one env whose rows are
the members' envs in order, continuing their states, and :meth:`EnvStack.scatter` writes the state
reached back into the members.

* An env that implements :class:`StackableEnv` (finpod's trading env does) stacks into ONE env of
  ``sum(N)`` rows: one step call for the whole population.
* Any other :class:`~podracer.api.TensorVectorEnv` is joined by :class:`ConcatEnvs`, which steps the
  members one after the other and concatenates their outputs: correct for any env, and the policy
  still runs as one batched computation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from podracer.entity_advantage import ENTITY_COSTS, ENTITY_OUTCOMES
from podracer.errors import TournamentError
from podracer.pathwise import ENTITY_COST_RATES, ENTITY_HOLDINGS
from podracer.protocols import TensorVectorEnv


@runtime_checkable
class StackableEnv(TensorVectorEnv, Protocol):
    """An env that can join others of its kind into one env and hand their states back.

    Members must share everything but their dynamic state (the same data, settings and device).
    """

    def stack(self, members: Sequence[TensorVectorEnv]) -> TensorVectorEnv:
        """One env of ``sum(N_i)`` rows: ``members``' envs in order, continuing from their states."""
        ...

    def scatter(self, stacked: TensorVectorEnv, members: Sequence[TensorVectorEnv]) -> None:
        """Write ``stacked``'s state (made by :meth:`stack` from ``members``) back into ``members``."""
        ...


class ConcatEnvs:
    """``members`` as one :class:`~podracer.api.TensorVectorEnv`: each is stepped in turn, outputs joined.

    Args:
        members: envs with the same ``obs_dim``, ``action_dim``, action bounds and device.
    """

    def __init__(self, members: Sequence[TensorVectorEnv]) -> None:
        self.members = list(members)
        first = self.members[0]
        self.obs_dim = first.obs_dim
        self.action_dim = first.action_dim
        self.action_low = first.action_low
        self.action_high = first.action_high
        self.device = first.device
        self.num_envs = sum(member.num_envs for member in self.members)
        self._splits = [member.num_envs for member in self.members]

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every member (member ``i`` with ``seed + i`` when a seed is given)."""
        outputs = [
            member.reset(seed=None if seed is None else seed + index)[0]
            for index, member in enumerate(self.members)
        ]
        return torch.cat(outputs), {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step member ``i`` with its rows of ``actions`` ``(sum N, A)``; outputs concatenated in order."""
        parts = [
            member.step(rows) for member, rows in zip(self.members, actions.split(self._splits), strict=True)
        ]
        obs = torch.cat([part[0] for part in parts])
        reward = torch.cat([part[1] for part in parts])
        terminated = torch.cat([part[2] for part in parts])
        truncated = torch.cat([part[3] for part in parts])
        info = {"final_obs": torch.cat([part[4]["final_obs"] for part in parts])}
        for key in (ENTITY_OUTCOMES, ENTITY_COSTS, ENTITY_HOLDINGS, ENTITY_COST_RATES):  # per-row extras
            if all(key in part[4] for part in parts):
                info[key] = torch.cat([part[4][key] for part in parts])
        return obs, reward, terminated, truncated, info


class EnvStack:
    """The members of a population round and the one env that steps them.

    Attributes:
        members: the pods' own envs, in population order.
        env: the joined env (rows of member ``i`` follow those of member ``i - 1``).
    """

    def __init__(self, members: Sequence[TensorVectorEnv]) -> None:
        """Join ``members`` (see :func:`stack_envs`)."""
        self.members = list(members)
        if not self.members:
            raise TournamentError("a population round needs at least one env")
        first = self.members[0]
        shapes = {(m.obs_dim, m.action_dim, m.action_low, m.action_high, str(m.device)) for m in self.members}
        if len(shapes) > 1:
            raise TournamentError(
                f"the population's envs differ in (obs_dim, action_dim, bounds, device): {sorted(shapes)}; "
                "a population trains pods of one env shape, so give every pod the same env_factory"
            )
        self._stacked = isinstance(first, StackableEnv) and all(
            type(member) is type(first) for member in self.members
        )
        self.env: TensorVectorEnv = (
            first.stack(self.members)
            if isinstance(first, StackableEnv) and self._stacked
            else ConcatEnvs(self.members)
        )

    @property
    def native(self) -> bool:
        """Whether the members stacked into one env (:class:`StackableEnv`), not a :class:`ConcatEnvs`."""
        return self._stacked

    def scatter(self) -> None:
        """Write the joined env's state back into the members (a :class:`ConcatEnvs` shares them already)."""
        first = self.members[0]
        if self._stacked and isinstance(first, StackableEnv):
            first.scatter(self.env, self.members)


def stack_envs(members: Sequence[TensorVectorEnv]) -> EnvStack:
    """Join ``members`` into one env for a population round; call ``.scatter()`` after the round.

    Raises:
        TournamentError: no members, or members of different shapes or devices.
    """
    return EnvStack(members)


__all__ = ["ConcatEnvs", "EnvStack", "StackableEnv", "stack_envs"]
