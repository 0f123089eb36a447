"""The seams of the engine: what an env, an agent and a policy look like to podracer.

Shapes: ``N`` parallel envs, ``D`` observation size, ``A`` action size. All tensors live on the
env's device; nothing here forces a host sync.

The engine's own modules import these protocols from here; an application imports them, with the
rest of the engine's public face, from :mod:`podracer.api`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

Policy = Callable[[torch.Tensor], torch.Tensor]
"""A deterministic policy: observations ``(N, D)`` float32 -> actions ``(N, A)`` float32."""


@runtime_checkable
class TensorVectorEnv(Protocol):
    """A batched env on one device with torch tensors in and out and same-step autoreset.

    ``step`` returns ``(obs, reward, terminated, truncated, info)``:

    * ``obs``: ``(N, D)`` float32. For an env that finished on this step it is already the first
      observation of its next episode (same-step autoreset).
    * ``reward``: ``(N,)`` float32.
    * ``terminated`` / ``truncated``: ``(N,)`` bool. ``truncated`` (time limit, end of data) means
      the learner must bootstrap the value of the state reached; ``terminated`` means it must not.
    * ``info["final_obs"]``: ``(N, D)`` float32, the observation this step reached before any reset
      (equal to ``obs`` for envs that did not finish). Always present.
    """

    num_envs: int
    obs_dim: int
    action_dim: int
    action_low: float
    action_high: float
    device: torch.device

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start every env; returns observations ``(N, D)`` and an info dict."""
        ...

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env by one step with ``actions`` ``(N, A)`` in ``[action_low, action_high]``."""
        ...


@runtime_checkable
class CapturableEnv(TensorVectorEnv, Protocol):
    """A :class:`TensorVectorEnv` whose step a CUDA graph can record (the population's graphed
    collection, :mod:`podracer.population_collect`): all of its dynamic state is the tuple
    ``state`` (a NamedTuple of tensors that a step replaces), and :meth:`capturable_step` is
    ``step`` as device work alone (no host sync, the same kernels on every step, no host-side
    bookkeeping), equal to ``step`` bit for bit; :meth:`note_steps_taken` then advances whatever
    the host keeps (e.g. an episode clock) by the steps a graph replay took."""

    state: Any

    def capturable_step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """``step`` without host work; ``actions`` ``(N, A)`` float32."""
        ...

    def note_steps_taken(self, num_steps: int) -> None:
        """Advance the host's bookkeeping by ``num_steps`` steps taken with :meth:`capturable_step`."""
        ...


@dataclass(frozen=True)
class RoundStats:
    """What one training round of an agent did.

    Attributes:
        env_steps: env transitions collected in the round (``N`` x rollout length).
        seconds: wall time of the round (collection and learning).
        metrics: scalar diagnostics by name (losses, entropy, KL, mean reward, ...).
    """

    env_steps: int
    seconds: float
    metrics: Mapping[str, float] = field(default_factory=dict)


class Agent(Protocol):
    """A learner the tournament can train, score, snapshot and restore.

    ``state_dict`` holds tensors and plain Python values only, so that a snapshot loads with
    ``torch.load(weights_only=True)``.
    """

    env_steps: int

    def train_round(self, env: TensorVectorEnv) -> RoundStats:
        """Collect one rollout from ``env`` and learn from it."""
        ...

    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions ``(N, A)`` for observations ``(N, D)``."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: networks, optimiser, counters, hyper-parameters."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`'s output."""
        ...


@runtime_checkable
class FreezesPolicy(Protocol):
    """An agent that can hand out its deterministic policy as a fast, frozen evaluation copy."""

    def evaluation_policy(self) -> Policy:
        """The deterministic policy at the current weights; later learning does not change it."""
        ...


@runtime_checkable
class FollowsBudget(Protocol):
    """An agent whose training follows the tournament's budget (a learning rate that decays as it is
    spent, :data:`podracer.ppo_config.LrSchedule` ``"budget"``)."""

    budget_spent: float
    """The share of the tournament's budget spent when its current round was submitted, in ``[0, 1]``."""


def follow_budget(agent: Any, budget_spent: float) -> None:
    """Tell ``agent`` the share ``budget_spent`` of the budget spent, if it follows it (a round's start)."""
    if isinstance(agent, FollowsBudget):
        agent.budget_spent = min(1.0, max(0.0, float(budget_spent)))


def deterministic_policy(agent: Agent) -> Policy:
    """The deterministic policy of ``agent`` for evaluation loops (validation, backtest, replay).

    The agent's frozen evaluation copy when it has one (:class:`FreezesPolicy`: equal to
    ``act(obs, deterministic=True)`` to float32 rounding, faster at batch 1), else ``act`` itself.
    Every evaluation of a trained agent goes through here, so all of them agree bit for bit.
    """
    if isinstance(agent, FreezesPolicy):
        return agent.evaluation_policy()

    def act(obs: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, deterministic=True)

    return act


@runtime_checkable
class ScoresMany(Protocol):
    """An application ``evaluate`` (``policy -> score``) that can also score several policies in one
    batched pass: what a population backend uses to validate all its pods at once."""

    def __call__(self, policy: Policy) -> float:
        """The score of one policy (higher is better)."""
        ...

    def score_many(self, policies: Sequence[Policy], rows: Policy) -> list[float]:
        """The scores of ``policies``, in order.

        Args:
            policies: ``P`` deterministic policies, each observations ``(B, D)`` -> actions ``(B, A)``.
            rows: the same ``P`` policies as one call: observations ``(P, D)`` -> actions ``(P, A)``,
                row ``p`` by ``policies[p]`` (to float32 rounding); or, for ``B`` rows a policy,
                ``(P B, D)`` -> ``(P B, A)``, rows ``p B .. (p + 1) B - 1`` by ``policies[p]``.
        """
        ...
