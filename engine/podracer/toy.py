"""A small batched toy task with a known optimum, for tests and examples: contextual target matching.

Shapes: ``N`` envs, ``K`` observation features, ``A`` action dimensions.

Each step every env shows ``K`` fresh standard-normal features ``x``. The best action is a hidden
smooth function of them, ``a* = low + (high - low) * sigmoid(TARGET_LOGIT_SCALE * x @ W)`` with a
fixed ``(K, A)`` matrix ``W`` (unit-norm columns drawn from ``task_seed``), a point in the action box
like a target allocation. The reward is ``-mean_a |a - a*| / (high - low)``, in ``[-1, 0]``: 0 is
optimal. Episodes last ``episode_length`` steps and end *truncated* (never terminated); after
``reset`` each env starts at a random step of its episode, so truncations are spread over steps.
"""

from __future__ import annotations

from typing import Any

import torch

TARGET_LOGIT_SCALE = 2.0
"""Standard deviation of the target's logits: most targets fall within ``sigmoid(+-4)`` of the box."""


def _random_phase(
    generator: torch.Generator, seed: int | None, episode_length: int, num_envs: int
) -> torch.Tensor:
    """``(N,)`` random steps into each env's episode (``generator`` reseeded first when ``seed`` is set)."""
    if seed is not None:
        generator.manual_seed(seed)
    return torch.randint(episode_length, (num_envs,), generator=generator, device=generator.device)


def _tick(elapsed: torch.Tensor, episode_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(elapsed, truncated)`` after one step: episodes that reach ``episode_length`` end truncated and
    restart at 0."""
    elapsed = elapsed + 1
    truncated = elapsed >= episode_length
    return torch.where(truncated, torch.zeros_like(elapsed), elapsed), truncated


class TargetMatchingEnv:
    """Batched contextual target matching; satisfies :class:`podracer.api.TensorVectorEnv`.

    Args:
        num_envs: ``N``, parallel envs.
        obs_dim: ``K``, observation features.
        action_dim: ``A``, action dimensions.
        episode_length: steps per episode (> 0); the last one is truncated.
        action_low: lower bound of every action dimension.
        action_high: upper bound of every action dimension (> ``action_low``).
        task_seed: seeds the hidden matrix ``W`` (the task itself).
        device: where every tensor lives.
    """

    def __init__(
        self,
        num_envs: int,
        obs_dim: int,
        action_dim: int,
        episode_length: int,
        action_low: float,
        action_high: float,
        task_seed: int,
        device: torch.device | str,
    ) -> None:
        if min(num_envs, obs_dim, action_dim, episode_length) < 1:
            raise ValueError(
                "num_envs, obs_dim, action_dim and episode_length must all be >= 1, got "
                f"{num_envs}, {obs_dim}, {action_dim}, {episode_length}"
            )
        if not action_high > action_low:
            raise ValueError(f"action_high must exceed action_low, got [{action_low}, {action_high}]")
        self.num_envs = num_envs
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.episode_length = episode_length
        self.action_low = float(action_low)
        self.action_high = float(action_high)
        self.device = torch.device(device)
        task_generator = torch.Generator().manual_seed(task_seed)
        weights = torch.randn(obs_dim, action_dim, generator=task_generator)
        self.weights = (weights / weights.norm(dim=0, keepdim=True)).to(self.device)
        self._generator = torch.Generator(device=self.device)
        self._obs = torch.zeros(num_envs, obs_dim, device=self.device)
        self._elapsed = torch.zeros(num_envs, dtype=torch.long, device=self.device)

    def _draw_obs(self) -> torch.Tensor:
        return torch.randn(self.num_envs, self.obs_dim, generator=self._generator, device=self.device)

    def optimal_actions(self, obs: torch.Tensor) -> torch.Tensor:
        """The best actions ``(N, A)`` for observations ``(N, K)`` (reward 0)."""
        unit = torch.sigmoid(TARGET_LOGIT_SCALE * obs @ self.weights)
        return self.action_low + (self.action_high - self.action_low) * unit

    def reward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Rewards ``(N,)`` in ``[-1, 0]`` of actions ``(N, A)`` for observations ``(N, K)``."""
        span = self.action_high - self.action_low
        return -(actions - self.optimal_actions(obs)).abs().mean(dim=-1) / span

    def uniform_policy_reward(self, obs: torch.Tensor) -> torch.Tensor:
        """Expected reward ``(N,)`` of actions drawn uniformly from the box, for observations ``(N, K)``.

        For a target at unit position ``t``, ``E|U - t| = (t^2 + (1 - t)^2) / 2`` with ``U ~ U(0, 1)``.
        """
        span = self.action_high - self.action_low
        t = (self.optimal_actions(obs) - self.action_low) / span
        return -((t.square() + (1.0 - t).square()) / 2.0).mean(dim=-1)

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start every env at a random step of its episode; returns observations ``(N, K)`` and ``{}``."""
        self._elapsed = _random_phase(self._generator, seed, self.episode_length, self.num_envs)
        self._obs = self._draw_obs()
        return self._obs, {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Score ``actions`` ``(N, A)`` against the current observations and move every env on one step.

        Returns:
            ``(obs, reward, terminated, truncated, info)`` per :class:`podracer.api.TensorVectorEnv`;
            every step shows fresh features, so ``info["final_obs"]`` is the fresh draw too.
        """
        reward = self.reward(self._obs, actions)
        self._elapsed, truncated = _tick(self._elapsed, self.episode_length)
        terminated = torch.zeros_like(truncated)
        self._obs = self._draw_obs()
        return self._obs, reward, terminated, truncated, {"final_obs": self._obs}


class EntityChoiceEnv:
    """Batched noisy entity choice: spread a unit of weight over ``M`` entities (and a null slot).

    Satisfies :class:`podracer.api.TensorVectorEnv` and reports per-entity outcomes
    (:mod:`podracer.entity_advantage`). Each step every env shows one standard-normal feature
    ``x_i`` per entity (entity-major, then one global column of ones); entity ``i`` then pays
    ``outcome_i = edge * x_i + noise * eps_i`` (``eps`` standard normal), and the reward of weights
    ``w = (w_null, w_1 .. w_M)`` (the action, a point of the simplex) is ``sum_i w_i * outcome_i``.
    The best policy puts all the weight on the largest ``x_i``; the noise makes one step's reward a
    poor guide to which entity earned it, as a market's does. Episodes last ``episode_length``
    steps and end truncated.

    Args:
        num_envs: ``N``.
        num_entities: ``M``.
        edge: how much of an entity's outcome its feature predicts.
        noise: standard deviation of the unpredictable part.
        episode_length: steps per episode.
        device: where every tensor lives.
    """

    def __init__(
        self,
        num_envs: int,
        num_entities: int,
        edge: float,
        noise: float,
        episode_length: int,
        device: torch.device | str,
    ) -> None:
        if min(num_envs, num_entities, episode_length) < 1:
            raise ValueError("num_envs, num_entities and episode_length must all be >= 1")
        self.num_envs = num_envs
        self.num_entities = num_entities
        self.obs_dim = num_entities + 1
        self.action_dim = num_entities + 1
        self.action_low, self.action_high = 0.0, 1.0
        self.edge, self.noise = float(edge), float(noise)
        self.episode_length = episode_length
        self.device = torch.device(device)
        self._generator = torch.Generator(device=self.device)
        self._obs = torch.zeros(num_envs, self.obs_dim, device=self.device)
        self._elapsed = torch.zeros(num_envs, dtype=torch.long, device=self.device)

    def _draw_obs(self) -> torch.Tensor:
        shape = (self.num_envs, self.num_entities)
        features = torch.randn(shape, generator=self._generator, device=self.device)
        return torch.cat([features, torch.ones(self.num_envs, 1, device=self.device)], dim=1)

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start every env at a random step of its episode; observations ``(N, M + 1)`` and ``{}``."""
        self._elapsed = _random_phase(self._generator, seed, self.episode_length, self.num_envs)
        self._obs = self._draw_obs()
        return self._obs, {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Pay ``actions`` ``(N, M + 1)`` (normalised to weights) their entities' outcomes.

        Returns:
            ``(obs, reward, terminated, truncated, info)``; info holds ``final_obs``,
            ``entity_outcomes`` ``(N, M)``, and the pathwise term's (:mod:`podracer.pathwise`)
            ``entity_holdings`` (zeros: a step holds nothing over) and ``entity_cost_rates``
            (zeros: trading is free).
        """
        weights = actions.clamp_min(0.0)
        weights = weights / weights.sum(dim=1, keepdim=True).clamp_min(1e-12)
        eps = torch.randn(self.num_envs, self.num_entities, generator=self._generator, device=self.device)
        outcomes = self.edge * self._obs[:, : self.num_entities] + self.noise * eps
        reward = (weights[:, 1:] * outcomes).sum(dim=1)
        self._elapsed, truncated = _tick(self._elapsed, self.episode_length)
        self._obs = self._draw_obs()
        info = {
            "final_obs": self._obs,
            "entity_outcomes": outcomes,
            "entity_holdings": torch.zeros_like(outcomes),
            "entity_cost_rates": torch.zeros(self.num_envs, 1, device=self.device),
        }
        return self._obs, reward, torch.zeros_like(truncated), truncated, info
