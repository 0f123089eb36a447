"""One PPO round's transitions and what is computed from them: the buffer, truncation bootstrap, GAE.

Shapes: ``T`` rollout steps per round, ``N`` parallel envs, ``D`` observation size, ``A`` action size.
:class:`podracer.ppo.PPOAgent` fills a :class:`Rollout` in its collect loop, then bootstraps the
truncated steps (:func:`bootstrap_truncated`) and computes advantages and returns (:func:`compute_gae`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def bootstrap_truncated(
    rewards: torch.Tensor,
    truncated: torch.Tensor,
    terminated: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float | torch.Tensor,
) -> torch.Tensor:
    """Rewards with the value of the state reached added where an episode was truncated.

    Args:
        rewards: ``(T, N)`` rewards.
        truncated: ``(T, N)`` bool, the episode was cut off after this step (time limit).
        terminated: ``(T, N)`` bool, the episode really ended after this step (no future value).
        final_values: ``(T, N)`` ``V(final_obs)``, the value of the observation each step reached
            before any reset (only read where truncated).
        gamma: discount per step, one for all envs or ``(N,)`` per env (a population's pods).

    Returns:
        ``(T, N)``: ``rewards + gamma * final_values`` where truncated and not terminated, else ``rewards``.
    """
    bootstrap = truncated & ~terminated
    return rewards + gamma * final_values * bootstrap.to(rewards.dtype)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    episode_ends: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float | torch.Tensor,
    gae_lambda: float | torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates over a rollout.

    ``delta_t = r_t + gamma * V_{t+1} * (1 - end_t) - V_t`` and
    ``A_t = delta_t + gamma * lambda * (1 - end_t) * A_{t+1}``, where ``V_T`` is ``last_values``.
    Truncated steps count as episode ends here: their future value is already in ``r_t``
    (:func:`bootstrap_truncated`).

    Args:
        rewards: ``(T, N)`` rewards (bootstrapped on truncation).
        values: ``(T, N)`` ``V(obs_t)`` from the rollout.
        episode_ends: ``(T, N)`` bool, the episode ended (terminated or truncated) after step ``t``.
        last_values: ``(N,)`` value of the observation after the last step.
        gamma: discount per step, one for all envs or ``(N,)`` per env (a population's pods).
        gae_lambda: GAE lambda, likewise.

    Returns:
        ``(advantages, returns)``, both ``(T, N)``; ``returns = advantages + values``.
    """
    steps = rewards.shape[0]
    continues = (~episode_ends).to(rewards.dtype)
    advantages = torch.empty_like(rewards)
    next_advantage = torch.zeros_like(last_values)
    next_value = last_values
    for t in reversed(range(steps)):
        delta = rewards[t] + gamma * next_value * continues[t] - values[t]
        next_advantage = delta + gamma * gae_lambda * continues[t] * next_advantage
        advantages[t] = next_advantage
        next_value = values[t]
    return advantages, advantages + values


@dataclass
class Rollout:
    """One round's transitions, all ``(T, N, ...)`` on the env's device.

    Attributes:
        obs: ``(T, N, D)`` observations the policy saw (normalised when enabled).
        unit_actions: ``(T, N, A)`` sampled raw actions (the distribution's space: unit-interval
            Beta draws, or Gaussian scores), before squashing and scaling.
        log_probs: ``(T, N)`` log-density of ``unit_actions`` under the rollout policy.
        values: ``(T, N)`` critic values of ``obs``.
        rewards: ``(T, N)`` env rewards, then bootstrapped on truncation.
        terminated: ``(T, N)`` bool.
        truncated: ``(T, N)`` bool.
        final_obs: ``(T, N, D)`` observation each step reached before any reset (normalised when enabled).
        advantages: ``(T, N)`` GAE advantages (filled after collection).
        returns: ``(T, N)`` value targets (filled after collection).
        entity_log_probs: ``(T, N, M)`` the entity scores' own log-densities (``advantages =
            "entity"``; else ``None``).
        entity_advantages: ``(T, N, M)`` per-entity advantages (:mod:`podracer.entity_advantage`;
            entity terms during collection), or ``None``.
        entity_outcomes: ``(T, N, M)`` the env's per-entity outcomes (``pathwise_coef > 0`` or
            ``forecast_coef > 0``), or ``None``.
        entity_holdings: ``(T, N, M)`` the unit actions that traded nothing, or ``None``.
        entity_cost_rates: ``(T, N, M)`` reward lost per unit traded, or ``None``.
    """

    obs: torch.Tensor
    unit_actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    entity_log_probs: torch.Tensor | None = None
    entity_advantages: torch.Tensor | None = None
    entity_outcomes: torch.Tensor | None = None
    entity_holdings: torch.Tensor | None = None
    entity_cost_rates: torch.Tensor | None = None

    @classmethod
    def allocate(
        cls,
        steps: int,
        num_envs: int,
        obs_dim: int,
        action_dim: int,
        device: torch.device,
        entities: int = 0,
        pathwise: bool = False,
    ) -> Rollout:
        """Zeroed buffers for ``steps`` x ``num_envs`` transitions on ``device`` (with the per-entity
        ones when ``entities > 0``, and the pathwise term's inputs too when ``pathwise``)."""

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(
            obs=zeros(steps, num_envs, obs_dim),
            unit_actions=zeros(steps, num_envs, action_dim),
            log_probs=zeros(steps, num_envs),
            values=zeros(steps, num_envs),
            rewards=zeros(steps, num_envs),
            terminated=zeros(steps, num_envs, dtype=torch.bool),
            truncated=zeros(steps, num_envs, dtype=torch.bool),
            final_obs=zeros(steps, num_envs, obs_dim),
            advantages=zeros(steps, num_envs),
            returns=zeros(steps, num_envs),
            entity_log_probs=zeros(steps, num_envs, entities) if entities else None,
            entity_advantages=zeros(steps, num_envs, entities) if entities else None,
            entity_outcomes=zeros(steps, num_envs, entities) if entities and pathwise else None,
            entity_holdings=zeros(steps, num_envs, entities) if entities and pathwise else None,
            entity_cost_rates=zeros(steps, num_envs, entities) if entities and pathwise else None,
        )
