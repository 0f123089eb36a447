"""Collecting one PPO round: ``T`` steps of every env into the preallocated buffer, then the targets.

Shapes: ``T`` rollout steps per round, ``N`` parallel envs, ``D`` observation size, ``A`` action size.

:func:`collect_rollout` samples actions from the policy (on normalised observations, scaled to the
env's box), steps the env ``T`` times and fills a :class:`~podracer.rollout.Rollout` without reading
a tensor back to the host. The critic then values all ``T * N`` observations in a few large batches,
truncated steps get ``gamma * V(final_obs)`` (:func:`~podracer.rollout.bootstrap_truncated`), and GAE
gives advantages and returns (:func:`~podracer.rollout.compute_gae`); with per-entity advantages
(``advantages = "entity"``, a buffer allocated with entities) each step's entity terms and the
scores' own log-densities are kept too (:mod:`podracer.entity_advantage`). :class:`EnvCursor`
remembers where an agent's rounds on an env continue. :meth:`podracer.ppo.PPOAgent.collect` ties
them together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from podracer.distributions import PolicyDistribution
from podracer.entity import CrossSectionalActorCritic
from podracer.entity_advantage import entity_terms, with_future
from podracer.networks import ActorCritic
from podracer.normalization import add_feature_noise
from podracer.pathwise import store_pathwise_inputs
from podracer.ppo_config import PPOConfig
from podracer.protocols import TensorVectorEnv
from podracer.rollout import Rollout, bootstrap_truncated, compute_gae

SEED_SPACE = 2**31 - 1
"""Env reset seeds are drawn uniformly from ``[0, SEED_SPACE)`` by the agent's generator."""


class EnvCursor:
    """Where an agent's rounds on an env continue: the env it last stepped and the raw observations
    ``(N, D)`` that env left."""

    def __init__(self) -> None:
        """No env yet."""
        self.env: TensorVectorEnv | None = None
        self.next_obs: torch.Tensor | None = None

    def begin(self, env: TensorVectorEnv, generator: torch.Generator, device: torch.device) -> torch.Tensor:
        """The raw observations ``(N, D)`` a round on ``env`` starts from.

        The first time ``env`` is seen it is reset with a seed from ``generator``; after that a round
        continues from where the last one left it (:meth:`end`).
        """
        if env is not self.env or self.next_obs is None:
            seed = int(torch.randint(SEED_SPACE, (), generator=generator, device=device))
            self.next_obs, _ = env.reset(seed=seed)
            self.env = env
        return self.next_obs

    def end(self, env: TensorVectorEnv, next_obs: torch.Tensor) -> None:
        """Remember where a round on ``env`` ended: raw observations ``(N, D)`` the next one starts from."""
        self.env = env
        self.next_obs = next_obs

    def forget(self) -> None:
        """Start the next round with a reset (after the agent's state was replaced)."""
        self.env = None
        self.next_obs = None


@dataclass(frozen=True)
class Collected:
    """What a round's collection produced besides the filled buffer.

    Attributes:
        next_obs: ``(N, D)`` raw observations after the last step (where the next round starts).
        obs_sum: ``(D,)`` float64 sum of the raw observations the policy saw.
        obs_sumsq: ``(D,)`` float64 sum of their squares.
        metrics: 0-d tensors: ``mean_reward`` (per env step, before bootstrapping),
            ``episodes_finished``, ``mean_episode_return`` (of the episodes that finished).
    """

    next_obs: torch.Tensor
    obs_sum: torch.Tensor
    obs_sumsq: torch.Tensor
    metrics: dict[str, torch.Tensor]


@torch.no_grad()
def collect_rollout(
    model: ActorCritic | CrossSectionalActorCritic,
    env: TensorVectorEnv,
    raw_obs: torch.Tensor,
    buf: Rollout,
    cfg: PPOConfig,
    generator: torch.Generator,
    normalize: Callable[[torch.Tensor], torch.Tensor],
    to_env_actions: Callable[[torch.Tensor], torch.Tensor],
    action_globals: int = 0,
    noise_columns: int = 0,
) -> Collected:
    """Fill ``buf`` with ``T`` steps of ``env`` from ``raw_obs``, then its values, advantages and returns.

    Args:
        model: the policy and critic.
        env: ``N`` envs.
        raw_obs: ``(N, D)`` raw observations to start from.
        buf: the ``(T, N, ...)`` buffers to fill.
        cfg: ``gamma``, ``gae_lambda``, ``num_minibatches`` (the critic's batches).
        generator: draws the actions.
        normalize: raw observations ``(B, D)`` -> what the networks see (the statistics are frozen
            for the round).
        to_env_actions: unit actions ``(B, A)`` -> actions in the env's box.
        action_globals: ``K``, the global action dimensions before the entities' (per-entity
            advantages only: a buffer with ``entity_advantages``).
        noise_columns: the leading observation columns ``cfg.obs_noise`` perturbs (drawn from
            ``generator`` before each step's actions; :func:`~podracer.normalization.add_feature_noise`).
    """
    steps, num_envs = buf.rewards.shape
    device = buf.rewards.device
    obs_dim = raw_obs.shape[1]
    obs_sum = torch.zeros(obs_dim, dtype=torch.float64, device=device)
    obs_sumsq = torch.zeros_like(obs_sum)
    episode_return = torch.zeros(num_envs, device=device)
    finished_return_sum = torch.zeros((), device=device)
    finished_count = torch.zeros((), device=device)
    with_policy = model.value_with_policy

    for t in range(steps):
        obs_sum += raw_obs.sum(0).double()
        obs_sumsq += raw_obs.square().sum(0).double()
        obs = add_feature_noise(normalize(raw_obs), cfg.obs_noise, noise_columns, generator)
        dist: PolicyDistribution
        if with_policy:
            dist, buf.values[t] = model.distribution_and_value(obs)
        else:
            dist = model.distribution(obs)
        raw = dist.sample(generator)
        buf.obs[t] = obs
        buf.unit_actions[t] = raw
        if buf.entity_log_probs is None:
            buf.log_probs[t] = dist.log_prob(raw)
        else:
            components = dist.log_prob_components(raw)
            buf.log_probs[t] = components.sum(dim=-1)
            buf.entity_log_probs[t] = components[:, action_globals:]
        raw_obs, reward, terminated, truncated, info = env.step(to_env_actions(dist.squash(raw)))
        if buf.entity_advantages is not None:
            buf.entity_advantages[t] = entity_terms(dist, raw, info, action_globals)
        store_pathwise_inputs(buf, t, info)
        buf.rewards[t] = reward
        buf.terminated[t] = terminated
        buf.truncated[t] = truncated
        buf.final_obs[t] = normalize(info["final_obs"])
        ended = (terminated | truncated).to(reward.dtype)
        episode_return += reward
        finished_return_sum += (episode_return * ended).sum()
        finished_count += ended.sum()
        episode_return *= 1.0 - ended

    if not with_policy:  # a critic of its own: its values in a few large matmuls, not one per step
        rows = buf.obs.flatten(0, 1).tensor_split(cfg.num_minibatches)
        buf.values.copy_(torch.cat([model.value(chunk) for chunk in rows]).view(steps, num_envs))

    # Truncated episodes: add gamma * V(final_obs). One host sync finds the (rare) truncated rows.
    mean_env_reward = buf.rewards.mean()
    cut = (buf.truncated & ~buf.terminated).nonzero(as_tuple=True)
    final_values = torch.zeros_like(buf.rewards)
    if cut[0].numel() > 0:
        final_values[cut] = model.value(buf.final_obs[cut])
    buf.rewards.copy_(
        bootstrap_truncated(buf.rewards, buf.truncated, buf.terminated, final_values, cfg.gamma)
    )
    last_values = model.value(normalize(raw_obs))
    advantages, returns = compute_gae(
        buf.rewards, buf.values, buf.terminated | buf.truncated, last_values, cfg.gamma, cfg.gae_lambda
    )
    buf.advantages.copy_(advantages)
    buf.returns.copy_(returns)
    if buf.entity_advantages is not None:
        entity_advantages = with_future(buf.entity_advantages, advantages, buf.rewards, buf.values)
        buf.entity_advantages.copy_(entity_advantages)
    metrics = {
        "mean_reward": mean_env_reward,
        "episodes_finished": finished_count,
        "mean_episode_return": finished_return_sum / finished_count.clamp_min(1.0),
    }
    return Collected(raw_obs, obs_sum, obs_sumsq, metrics)
