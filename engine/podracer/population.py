"""A population of PPO pods trained in lockstep as one batched computation (Anakin-style).

Shapes: ``P`` pods, ``T`` rollout steps, ``N`` envs per pod, ``D`` observation size, ``A`` action
size, ``B = T * N`` transitions per pod and round, ``b`` rows per minibatch.

:func:`train_population_round` runs one PPO round for ``P`` :class:`~podracer.ppo.PPOAgent` of the
same architecture at once, and leaves each agent as its own :meth:`~podracer.ppo.PPOAgent.train_round`
would have, to float32 rounding:

* **one env batch of** ``P x N``: the pods' own envs joined by :func:`podracer.env_stack.stack_envs`
  and written back after the round, so a pod can leave the population and continue alone;
* **one network call per step** (:class:`podracer.stacked.StackedModel`): the pods' parameters
  are stacked along a pod axis (``torch.stack`` of each agent's own parameters, so gradients flow
  back to them) and the model runs under ``torch.func.vmap`` / ``functional_call``: ``P`` small
  matmuls become one batched matmul;
* **per-pod hyper-parameters as tensors** ``(P, 1)``: discount, GAE lambda, clip ranges, loss
  weights; the learning rate is each agent's own optimiser's. Exploit/explore changes an agent's
  config or weights between rounds; nothing here is rebuilt for it;
* **each pod's own randomness**: action noise, minibatch shuffles and env reset seeds come from each
  agent's own generator, in the order its own round draws them, so a population's pods equal the same
  pods trained one by one (``tests/engine/test_population.py``);
* each agent keeps its own fused Adam and its own gradient clipping: ``P`` optimiser steps of a few
  kernels each per minibatch, against one batched forward and backward pass.

What must be equal across the population (:func:`structure_key`): the agent class, network
(``policy``, ``hidden_sizes``, ``activation``), ``rollout_steps``, ``update_epochs``,
``num_minibatches``, the normalisation switches and ``obs_clip``, ``clip_value``, the env's shape
and device. A tournament's perturbations move only the per-pod tensors, so all its pods qualify.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from podracer.entity_advantage import entity_policy_loss, entity_terms, with_future
from podracer.env_stack import stack_envs
from podracer.errors import TournamentError
from podracer.normalization import RunningMeanStd
from podracer.ppo import PPOAgent, check_round_size, learning_rate_at
from podracer.protocols import RoundStats
from podracer.rollout import Rollout, bootstrap_truncated, compute_gae
from podracer.stacked import (
    STRUCTURE_FIELDS,
    PopulationPolicy,
    StackedModel,
    check_population,
    structure_key,
)


def _column(
    agents: Sequence[PPOAgent], name: str, device: torch.device, float64: bool = False
) -> torch.Tensor:
    """Hyper-parameter ``name`` of every agent as a ``(P,)`` tensor (float32, or float64)."""
    values = [float(getattr(agent.config, name)) for agent in agents]
    return torch.tensor(values, dtype=torch.float64 if float64 else torch.float32, device=device)


def train_population_round(agents: Sequence[PPOAgent], envs: Sequence[Any]) -> list[RoundStats]:
    """One PPO round of every agent on its own env, as one batched computation.

    Args:
        agents: ``P`` agents of one structure (:func:`structure_key`); each is updated in place.
        envs: each agent's own env (``TensorVectorEnv``), in the same order.

    Returns:
        Each agent's round statistics, as :meth:`~podracer.ppo.PPOAgent.train_round` reports them
        (``seconds`` is the population round's wall time).

    Raises:
        TournamentError: agents that cannot train together, or envs of different shapes.
    """
    start = time.perf_counter()
    check_population(agents)
    if len(envs) != len(agents):
        raise TournamentError(f"{len(agents)} agents but {len(envs)} envs; give each agent its own env")
    cfg = agents[0].config
    for env in envs:
        check_round_size(cfg.rollout_steps * env.num_envs, cfg.num_minibatches)
    if len({env.num_envs for env in envs}) > 1:
        raise TournamentError(
            "a population's envs must have the same num_envs; build them with one env_factory"
        )
    model = StackedModel([agent.model for agent in agents])
    batch, collect_metrics, rollouts = _collect(agents, envs, model)
    learn_metrics, extras = _learn(agents, batch, model, rollouts)
    seconds = time.perf_counter() - start
    names = [*collect_metrics, *learn_metrics]
    table = torch.stack(
        [m.to(torch.float32) for m in (*collect_metrics.values(), *learn_metrics.values())], dim=1
    )
    steps = cfg.rollout_steps * envs[0].num_envs
    stats = []
    for agent, row, extra in zip(agents, table.cpu().tolist(), extras, strict=True):
        agent.env_steps += steps
        agent.policy_version += 1
        metrics = dict(zip(names, row, strict=True)) | {name: float(value) for name, value in extra.items()}
        stats.append(RoundStats(env_steps=steps, seconds=seconds, metrics=metrics))
    return stats


@torch.no_grad()
def _collect(
    agents: Sequence[PPOAgent], envs: Sequence[Any], model: StackedModel
) -> tuple[PodBatch, dict[str, torch.Tensor], list[Rollout | None]]:
    """Every agent's ``T`` rollout steps from one joined env, with advantages and returns.

    Returns:
        ``(batch, metrics, rollouts)``: each pod's transitions ``(P, B, ...)`` in its own round's
        order, per-pod metrics ``(P,)``, and each pod's own ``(T, N, ...)`` rollout (views) where
        its agent needs one after the round (the H-term's buffer), else ``None``.
    """
    cfg = agents[0].config
    pods, device = len(agents), agents[0].device
    steps, n = cfg.rollout_steps, envs[0].num_envs
    first_obs = [agent.begin_collection(env) for agent, env in zip(agents, envs, strict=True)]
    stack = stack_envs(envs)
    env = stack.env
    obs_dim, action_dim = agents[0].obs_dim, agents[0].action_dim
    entities, action_globals = agents[0].entity_shape()
    buf = Rollout.allocate(steps, pods * n, obs_dim, action_dim, device, entities)
    params = model.parameters()
    generators = [agent.generator for agent in agents]
    normalize, clip = cfg.normalize_observations, cfg.obs_clip
    if normalize:
        constants = [agent.normalization_constants(torch.float32) for agent in agents]
        shift = torch.stack([c[0] for c in constants]).unsqueeze(1)
        scale = torch.stack([c[1] for c in constants]).unsqueeze(1)

    def normalized(rows: torch.Tensor) -> torch.Tensor:
        grouped = rows.view(pods, n, obs_dim)
        return RunningMeanStd.rescale(grouped, shift, scale, clip) if normalize else grouped

    raw_obs = torch.cat(first_obs)
    obs_sum = torch.zeros(pods, obs_dim, dtype=torch.float64, device=device)
    obs_sumsq = torch.zeros_like(obs_sum)
    episode_return = torch.zeros(pods, n, device=device)
    finished_return_sum = torch.zeros(pods, device=device)
    finished_count = torch.zeros(pods, device=device)
    low, high = agents[0].action_low, agents[0].action_high
    for t in range(steps):
        grouped_raw = raw_obs.view(pods, n, obs_dim)
        obs_sum += grouped_raw.sum(1).double()
        obs_sumsq += grouped_raw.square().sum(1).double()
        obs = normalized(raw_obs)
        dist = model.distribution(params, obs)
        raw = model.sample(dist, generators)
        buf.obs[t] = obs.reshape(pods * n, obs_dim)
        buf.unit_actions[t] = raw.reshape(pods * n, action_dim)
        if buf.entity_log_probs is None:
            buf.log_probs[t] = dist.log_prob(raw).reshape(pods * n)
        else:
            components = dist.log_prob_components(raw)
            buf.log_probs[t] = components.sum(dim=-1).reshape(pods * n)
            buf.entity_log_probs[t] = components[..., action_globals:].reshape(pods * n, entities)
        unit = dist.squash(raw).reshape(pods * n, action_dim)
        actions = unit if (low, high) == (0.0, 1.0) else low + (high - low) * unit
        raw_obs, reward, terminated, truncated, info = env.step(actions)
        if buf.entity_advantages is not None:
            terms = entity_terms(dist, raw, info, action_globals)
            buf.entity_advantages[t] = terms.reshape(pods * n, entities)
        buf.rewards[t] = reward
        buf.terminated[t] = terminated
        buf.truncated[t] = truncated
        buf.final_obs[t] = normalized(info["final_obs"]).reshape(pods * n, obs_dim)
        ended = (terminated | truncated).to(reward.dtype).view(pods, n)
        episode_return += reward.view(pods, n)
        finished_return_sum += (episode_return * ended).sum(1)
        finished_count += ended.sum(1)
        episode_return *= 1.0 - ended
    stack.scatter()
    for agent, env_p, rows in zip(agents, envs, raw_obs.view(pods, n, obs_dim), strict=True):
        agent.end_collection(env_p, rows)

    def per_pod(x: torch.Tensor) -> torch.Tensor:
        """``(T, P * N, ...)`` -> ``(P, T * N, ...)``: each pod's rows in its own round's order."""
        return x.view(steps, pods, n, *x.shape[2:]).transpose(0, 1).reshape(pods, steps * n, *x.shape[2:])

    def per_step(x: torch.Tensor) -> torch.Tensor:
        """``(P, T * N)`` -> ``(T, P * N)``."""
        return x.view(pods, steps, n).transpose(0, 1).reshape(steps, pods * n)

    # Critic values of the whole rollout in a few large batched calls, as each pod's round does.
    chunks = per_pod(buf.obs).tensor_split(cfg.num_minibatches, dim=1)
    buf.values.copy_(per_step(torch.cat([model.value(params, chunk) for chunk in chunks], dim=1)))
    mean_reward = buf.rewards.view(steps, pods, n).mean(dim=(0, 2))
    gamma = _column(agents, "gamma", device).repeat_interleave(n)  # (P * N,)
    lam = _column(agents, "gae_lambda", device).repeat_interleave(n)
    cut = buf.truncated & ~buf.terminated
    final_values = torch.zeros_like(buf.rewards)
    for t in cut.any(dim=1).nonzero().flatten().tolist():  # one host sync: the (rare) truncating steps
        values_t = model.value(params, buf.final_obs[t].view(pods, n, obs_dim)).reshape(pods * n)
        final_values[t] = torch.where(cut[t], values_t, final_values[t])
    buf.rewards.copy_(bootstrap_truncated(buf.rewards, buf.truncated, buf.terminated, final_values, gamma))
    last_values = model.value(params, normalized(raw_obs)).reshape(pods * n)
    advantages, returns = compute_gae(
        buf.rewards, buf.values, buf.terminated | buf.truncated, last_values, gamma, lam
    )
    entity_advantages = None
    if buf.entity_advantages is not None:
        entity_advantages = with_future(buf.entity_advantages, advantages, buf.rewards, buf.values)
    if normalize:
        count = torch.tensor(float(steps * n), dtype=torch.float64, device=device)
        for agent, total, total_sq in zip(agents, obs_sum, obs_sumsq, strict=True):
            agent.obs_stats.merge(total, total_sq, count)
    metrics = {
        "mean_reward": mean_reward,
        "episodes_finished": finished_count,
        "mean_episode_return": finished_return_sum / finished_count.clamp_min(1.0),
    }
    rollouts: list[Rollout | None] = []
    for index, agent in enumerate(agents):
        cols = slice(index * n, (index + 1) * n)
        wanted = agent.config.h_term_coef > 0.0
        rollouts.append(_pod_rollout(buf, advantages, returns, cols) if wanted else None)
    batch = PodBatch(
        obs=per_pod(buf.obs),
        unit_actions=per_pod(buf.unit_actions),
        log_probs=per_pod(buf.log_probs),
        values=per_pod(buf.values),
        advantages=per_pod(advantages),
        returns=per_pod(returns),
        entity_log_probs=None if buf.entity_log_probs is None else per_pod(buf.entity_log_probs),
        entity_advantages=None if entity_advantages is None else per_pod(entity_advantages),
    )
    return batch, metrics, rollouts


def _pod_rollout(buf: Rollout, advantages: torch.Tensor, returns: torch.Tensor, cols: slice) -> Rollout:
    """One pod's ``(T, N, ...)`` rollout: columns ``cols`` of the population's (views, no copy)."""
    return Rollout(
        obs=buf.obs[:, cols],
        unit_actions=buf.unit_actions[:, cols],
        log_probs=buf.log_probs[:, cols],
        values=buf.values[:, cols],
        rewards=buf.rewards[:, cols],
        terminated=buf.terminated[:, cols],
        truncated=buf.truncated[:, cols],
        final_obs=buf.final_obs[:, cols],
        advantages=advantages[:, cols],
        returns=returns[:, cols],
    )


@dataclass(frozen=True)
class PodBatch:
    """Every pod's round of transitions, ``(P, B, ...)``, row ``t * N + n`` of pod ``p`` its own
    round's row (what :func:`~podracer.ppo_update.ppo_update` flattens a rollout to).

    Attributes:
        obs: ``(P, B, D)`` normalised observations.
        unit_actions: ``(P, B, A)`` raw actions drawn.
        log_probs: ``(P, B)`` their log-densities under the rollout policy.
        values: ``(P, B)`` rollout critic values.
        advantages: ``(P, B)`` GAE advantages.
        returns: ``(P, B)`` value targets.
        entity_log_probs: ``(P, B, M)`` the entity scores' own log-densities (``advantages =
            "entity"``), else ``None``.
        entity_advantages: ``(P, B, M)`` per-entity advantages, else ``None``.
    """

    obs: torch.Tensor
    unit_actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    entity_log_probs: torch.Tensor | None = None
    entity_advantages: torch.Tensor | None = None


def _learn(
    agents: Sequence[PPOAgent], batch: PodBatch, model: StackedModel, rollouts: Sequence[Rollout | None]
) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]]]:
    """``update_epochs`` passes of clipped-PPO minibatch updates of every pod, as one batched loss.

    The loss is the sum of the pods' own losses, so each pod's gradient is its own; then every
    agent clips its gradient and steps its own Adam. After each pass a pod with the H-term on takes
    its own H-term step (:meth:`~podracer.ppo.PPOAgent.epoch_hooks`, on its rollout in
    ``rollouts``). A pod whose epoch KL passes its ``target_kl`` stops updating (and drawing
    shuffles) while the others go on.

    Returns:
        Per-pod metrics ``(P,)``, as :func:`~podracer.ppo_update.ppo_update` reports them, and each
        pod's extra metrics (``h_term_loss`` where the H-term ran).
    """
    cfg = agents[0].config
    pods, rows = batch.obs.shape[:2]
    device = batch.obs.device
    _, action_globals = agents[0].entity_shape()
    lrs = []
    for agent in agents:
        lr = learning_rate_at(agent.config, agent.env_steps)
        for group in agent.optimizer.param_groups:
            group["lr"] = lr
        lrs.append(lr)
    low = (1.0 - _column(agents, "clip_coef", device, float64=True)).float().unsqueeze(1)
    high = (1.0 + _column(agents, "clip_coef", device, float64=True)).float().unsqueeze(1)
    clip_coef = _column(agents, "clip_coef", device).unsqueeze(1)
    value_clip = _column(agents, "value_clip_coef", device).unsqueeze(1)
    value_coef = _column(agents, "value_coef", device)
    entropy_coef = _column(agents, "entropy_coef", device)
    use_entropy = any(agent.config.entropy_coef > 0.0 for agent in agents)
    parameters = [list(agent.model.parameters()) for agent in agents]
    hooks = [
        None if rollout is None else agent.epoch_hooks(rollout)
        for agent, rollout in zip(agents, rollouts, strict=True)
    ]
    active = [True] * pods
    pod_rows = torch.arange(pods, device=device).unsqueeze(1)
    sums = torch.zeros(pods, 5, device=device)  # policy loss, value loss, approx_kl, clip_frac, count
    epochs_run = torch.zeros(pods, device=device)
    minibatch_count = cfg.num_minibatches
    for _ in range(cfg.update_epochs):
        if not any(active):
            break
        mask = torch.tensor(active, dtype=torch.float32, device=device)
        order = torch.stack(
            [
                torch.randperm(rows, generator=agent.generator, device=device)
                if on
                else torch.arange(rows, device=device)
                for agent, on in zip(agents, active, strict=True)
            ]
        )
        minibatches = order.tensor_split(minibatch_count, dim=1)
        epoch_kl = torch.zeros(pods, device=device)
        for idx in minibatches:
            dist, new_values = model.distribution_and_value(model.parameters(), batch.obs[pod_rows, idx])
            adv = batch.advantages[pod_rows, idx]
            if cfg.normalize_advantages:
                adv = (adv - adv.mean(dim=1, keepdim=True)) / (adv.std(dim=1, keepdim=True) + 1e-8)
            if batch.entity_log_probs is None or batch.entity_advantages is None:
                log_ratio = dist.log_prob(batch.unit_actions[pod_rows, idx]) - batch.log_probs[pod_rows, idx]
                ratio = log_ratio.exp()
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(low, high)).mean(dim=1)
            else:
                components = dist.log_prob_components(batch.unit_actions[pod_rows, idx])
                log_ratio = components.sum(dim=-1) - batch.log_probs[pod_rows, idx]
                ratio = log_ratio.exp()
                policy_loss = entity_policy_loss(
                    components,
                    batch.entity_log_probs[pod_rows, idx],
                    batch.log_probs[pod_rows, idx],
                    batch.entity_advantages[pod_rows, idx],
                    adv,
                    low,
                    high,
                    action_globals,
                    cfg.normalize_advantages,
                )
            old_values, returns = batch.values[pod_rows, idx], batch.returns[pod_rows, idx]
            value_error = (new_values - returns).square()
            if cfg.clip_value:
                clipped = old_values + (new_values - old_values).clamp(-value_clip, value_clip)
                value_error = torch.max(value_error, (clipped - returns).square())
            value_loss = 0.5 * value_error.mean(dim=1)
            loss = policy_loss + value_coef * value_loss
            if use_entropy:  # a pod with weight 0 gets exactly 0 from it
                loss = loss - entropy_coef * dist.entropy().mean(dim=1)
            for agent in agents:
                agent.optimizer.zero_grad(set_to_none=True)
            loss.sum().backward()
            for agent, params, on in zip(agents, parameters, active, strict=True):
                if on:
                    nn.utils.clip_grad_norm_(params, agent.config.max_grad_norm)
                    agent.optimizer.step()
            with torch.no_grad():
                approx_kl = ((ratio - 1.0) - log_ratio).mean(dim=1)
                clip_frac = ((ratio - 1.0).abs() > clip_coef).float().mean(dim=1)
                epoch_kl += approx_kl / len(minibatches)
                step = torch.stack(
                    (
                        policy_loss.detach(),
                        value_loss.detach(),
                        approx_kl,
                        clip_frac,
                        torch.ones_like(approx_kl),
                    ),
                    dim=1,
                )
                sums += step * mask.unsqueeze(1)
        epochs_run += mask
        for index, hook in enumerate(hooks):
            if hook is not None and hook[0] is not None and active[index]:
                epoch_kl[index] = hook[0](epoch_kl[index])
        targets = [agent.config.target_kl for agent in agents]
        if any(target is not None for target in targets):
            kls = epoch_kl.tolist()
            active = [
                on and (target is None or kl <= target)
                for on, target, kl in zip(active, targets, kls, strict=True)
            ]

    with torch.no_grad():
        count = sums[:, 4]
        returns, old_values = batch.returns, batch.values
        explained_variance = 1.0 - (returns - old_values).var(dim=1) / returns.var(dim=1).clamp_min(1e-8)
        first = batch.obs[:, : minibatches[0].shape[1]]
        entropy = model.distribution(model.parameters(), first).entropy().mean(dim=1)
    extras = [
        {"h_term_loss": hook[1].last_loss}
        if hook is not None and hook[1] is not None and hook[1].last_loss is not None
        else {}
        for hook in hooks
    ]
    return {
        "policy_loss": sums[:, 0] / count,
        "value_loss": sums[:, 1] / count,
        "entropy": entropy,
        "approx_kl": sums[:, 2] / count,
        "clip_fraction": sums[:, 3] / count,
        "explained_variance": explained_variance,
        "learning_rate": torch.tensor(lrs, device=device),
        "epochs_run": epochs_run,
    }, extras


__all__ = [
    "STRUCTURE_FIELDS",
    "PodBatch",
    "PopulationPolicy",
    "StackedModel",
    "check_population",
    "structure_key",
    "train_population_round",
]
