"""Collecting a population's round: every pod's ``T`` steps from one joined env, then the targets.

Shapes: ``P`` pods, ``T`` rollout steps, ``N`` envs per pod, ``D`` observation size, ``A`` action
size, ``B = T * N`` transitions per pod and round.

:func:`collect_population` is :func:`podracer.ppo_collect.collect_rollout` for ``P`` agents at once
(one env batch of ``P x N``, one stacked network call per step, each pod's own generator); it
returns every pod's transitions as a :class:`PodBatch` for :mod:`podracer.population_update`.
:func:`podracer.population.train_population_round` ties the two together.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

import torch

from podracer.cuda_capture import warm_up_then_record
from podracer.entity_advantage import entity_terms, with_future
from podracer.env_stack import stack_envs
from podracer.normalization import RunningMeanStd, add_feature_noise
from podracer.pathwise import store_pathwise_inputs
from podracer.ppo import PPOAgent
from podracer.protocols import CapturableEnv
from podracer.rollout import Rollout, bootstrap_truncated, compute_gae
from podracer.stacked import StackedModel, hyper_column

COLLECT_BLOCK_STEPS: Final[int] = 16
"""Rollout steps per CUDA-graph replay in a population's collection (see :func:`_collect_in_blocks`)."""
MIN_GRAPHED_COLLECT_STEPS: Final[int] = 3 * COLLECT_BLOCK_STEPS
"""A shorter rollout steps eagerly: the first block and the recording cost about two blocks."""
EnvStep = Callable[
    [torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]
]
"""An env's step (``step`` or ``capturable_step``): actions ``(N, A)`` -> ``(obs, reward, terminated,
truncated, info)``."""

GRAPHED_COLLECT_VARIABLE: Final[str] = "PODRACER_GRAPHED_COLLECT"
"""Environment variable that turns graphed collection off (``0``) where ``graphs`` is not given."""


def graphed_collect_enabled() -> bool:
    """Whether a population's collection on a CUDA device is graphed when the caller does not say:
    yes unless ``PODRACER_GRAPHED_COLLECT=0``. On an H200 the replays equalled the eager loop bit
    for bit (``tests/app/test_graphed_collect.py``, MLP and cross-sectional policies) and a round's
    collection took 0.28-0.29 s instead of 0.54-0.55 s at the paper's minute shape."""
    return os.environ.get(GRAPHED_COLLECT_VARIABLE, "") != "0"


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
        entity_outcomes: ``(P, B, M)`` the pathwise term's and the forecast loss's outcomes
            (``pathwise_coef > 0`` or ``forecast_coef > 0`` in some pod), else ``None``.
        entity_holdings: ``(P, B, M)`` its holdings, else ``None``.
        entity_cost_rates: ``(P, B, M)`` its cost rates, else ``None``.
    """

    obs: torch.Tensor
    unit_actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    entity_log_probs: torch.Tensor | None = None
    entity_advantages: torch.Tensor | None = None
    entity_outcomes: torch.Tensor | None = None
    entity_holdings: torch.Tensor | None = None
    entity_cost_rates: torch.Tensor | None = None


@torch.no_grad()
def collect_population(
    agents: Sequence[PPOAgent], envs: Sequence[Any], model: StackedModel, *, graphs: bool | None = None
) -> tuple[PodBatch, dict[str, torch.Tensor], list[Rollout | None]]:
    """Every agent's ``T`` rollout steps from one joined env, with advantages and returns.

    With graphs, on a CUDA device, when the joined env is a :class:`~podracer.protocols.CapturableEnv`
    and the rollout has at least :data:`MIN_GRAPHED_COLLECT_STEPS` steps, the steps run as CUDA-graph
    replays of :data:`COLLECT_BLOCK_STEPS` steps each (:func:`_collect_in_blocks`): the same kernels
    as the eager loop, so the same numbers, without a Python pass per step. ``graphs``: ``None``
    follows :func:`graphed_collect_enabled` on a CUDA device (on unless
    ``PODRACER_GRAPHED_COLLECT=0``); ``True`` graphs (off CUDA
    it runs the same blocks eagerly, what the CPU tests compare with the plain loop); ``False``
    steps eagerly. A capture that fails raises (a ``RuntimeError`` naming the fix).

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
    pathwise = any(agent.config.uses_step_outcomes for agent in agents)
    buf = Rollout.allocate(steps, pods * n, obs_dim, action_dim, device, entities, pathwise)
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
    noisy = any(agent.config.obs_noise > 0.0 for agent in agents)
    columns = agents[0].noise_columns()
    low, high = agents[0].action_low, agents[0].action_high

    with_policy = agents[0].model.value_with_policy

    def one_step(target: Rollout, row: int, raw_obs: torch.Tensor, step: EnvStep) -> torch.Tensor:
        """Step ``row`` of ``target`` from raw observations ``(P * N, D)``; the next raw observations."""
        grouped_raw = raw_obs.view(pods, n, obs_dim)
        obs_sum.add_(grouped_raw.sum(1).double())
        obs_sumsq.add_(grouped_raw.square().sum(1).double())
        obs = normalized(raw_obs)
        if noisy:  # each pod's noise from its own generator, before its actions, as alone
            obs = torch.stack(
                [
                    add_feature_noise(rows, agent.config.obs_noise, columns, generator)
                    for rows, agent, generator in zip(obs, agents, generators, strict=True)
                ]
            )
        if with_policy:
            dist, step_values = model.distribution_and_value(params, obs)
            target.values[row] = step_values.reshape(pods * n)
        else:
            dist = model.distribution(params, obs)
        raw = model.sample(dist, generators)
        target.obs[row] = obs.reshape(pods * n, obs_dim)
        target.unit_actions[row] = raw.reshape(pods * n, action_dim)
        if target.entity_log_probs is None:
            target.log_probs[row] = dist.log_prob(raw).reshape(pods * n)
        else:
            components = dist.log_prob_components(raw)
            target.log_probs[row] = components.sum(dim=-1).reshape(pods * n)
            target.entity_log_probs[row] = components[..., action_globals:].reshape(pods * n, entities)
        unit = dist.squash(raw).reshape(pods * n, action_dim)
        actions = unit if (low, high) == (0.0, 1.0) else low + (high - low) * unit
        next_raw_obs, reward, terminated, truncated, info = step(actions)
        if target.entity_advantages is not None:
            terms = entity_terms(dist, raw, info, action_globals)
            target.entity_advantages[row] = terms.reshape(pods * n, entities)
        store_pathwise_inputs(target, row, info)
        target.rewards[row] = reward
        target.terminated[row] = terminated
        target.truncated[row] = truncated
        target.final_obs[row] = normalized(info["final_obs"]).reshape(pods * n, obs_dim)
        ended = (terminated | truncated).to(reward.dtype).view(pods, n)
        episode_return.add_(reward.view(pods, n))
        finished_return_sum.add_((episode_return * ended).sum(1))
        finished_count.add_(ended.sum(1))
        episode_return.mul_(1.0 - ended)
        return next_raw_obs

    use_graphs = graphs if graphs is not None else device.type == "cuda" and graphed_collect_enabled()
    if use_graphs and isinstance(env, CapturableEnv) and steps >= MIN_GRAPHED_COLLECT_STEPS:
        raw_obs = _collect_in_blocks(env, buf, raw_obs, one_step, generators)
    else:
        for t in range(steps):
            raw_obs = one_step(buf, t, raw_obs, env.step)
    stack.scatter()
    for agent, env_p, rows in zip(agents, envs, raw_obs.view(pods, n, obs_dim), strict=True):
        agent.end_collection(env_p, rows)

    def per_pod(x: torch.Tensor) -> torch.Tensor:
        """``(T, P * N, ...)`` -> ``(P, T * N, ...)``: each pod's rows in its own round's order."""
        return x.view(steps, pods, n, *x.shape[2:]).transpose(0, 1).reshape(pods, steps * n, *x.shape[2:])

    def per_step(x: torch.Tensor) -> torch.Tensor:
        """``(P, T * N)`` -> ``(T, P * N)``."""
        return x.view(pods, steps, n).transpose(0, 1).reshape(steps, pods * n)

    if (
        not with_policy
    ):  # critic values of the whole rollout in a few large batched calls, as each pod's round does
        chunks = per_pod(buf.obs).tensor_split(cfg.num_minibatches, dim=1)
        buf.values.copy_(per_step(torch.cat([model.value(params, chunk) for chunk in chunks], dim=1)))
    mean_reward = buf.rewards.view(steps, pods, n).mean(dim=(0, 2))
    gamma = hyper_column(agents, "gamma", device).repeat_interleave(n)  # (P * N,)
    lam = hyper_column(agents, "gae_lambda", device).repeat_interleave(n)
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
        rollouts.append(pod_rollout(buf, advantages, returns, cols) if wanted else None)
    batch = PodBatch(
        obs=per_pod(buf.obs),
        unit_actions=per_pod(buf.unit_actions),
        log_probs=per_pod(buf.log_probs),
        values=per_pod(buf.values),
        advantages=per_pod(advantages),
        returns=per_pod(returns),
        entity_log_probs=None if buf.entity_log_probs is None else per_pod(buf.entity_log_probs),
        entity_advantages=None if entity_advantages is None else per_pod(entity_advantages),
        entity_outcomes=None if buf.entity_outcomes is None else per_pod(buf.entity_outcomes),
        entity_holdings=None if buf.entity_holdings is None else per_pod(buf.entity_holdings),
        entity_cost_rates=None if buf.entity_cost_rates is None else per_pod(buf.entity_cost_rates),
    )
    return batch, metrics, rollouts


StepInto = Callable[[Rollout, int, torch.Tensor, EnvStep], torch.Tensor]
"""One collection step: ``(buffer, row, raw observations, env step) -> next raw observations``."""


def _collect_in_blocks(
    env: CapturableEnv,
    buf: Rollout,
    raw_obs: torch.Tensor,
    one_step: StepInto,
    generators: Sequence[torch.Generator],
) -> torch.Tensor:
    """Every row of ``buf`` (``T`` steps), :data:`COLLECT_BLOCK_STEPS` (``K``) at a time.

    The first ``K`` steps run eagerly with the env's ``capturable_step`` (on a GPU on a side
    stream: the warm-up of what the capture must not initialise). Then ``K`` steps are recorded once
    as a CUDA graph over static buffers (the env's state, the raw observations, a ``K``-row staging
    rollout; the pods' generators registered, so each replay draws what the eager steps would;
    :func:`podracer.cuda_capture.warm_up_then_record`) and replayed for each further whole block,
    each replay's rows copied into ``buf``. A tail shorter than ``K`` steps eagerly. Off CUDA the
    blocks run eagerly on the same static buffers (what the tests compare with the plain loop).

    Returns:
        The raw observations ``(P * N, D)`` after the last step.

    Raises:
        RuntimeError: the capture failed (a host sync in a policy, say); nothing falls back, since a
            failed capture leaves the generators unusable: collect without graphs instead.
    """
    steps, block = buf.obs.shape[0], COLLECT_BLOCK_STEPS
    stage = Rollout.allocate(
        block,
        buf.obs.shape[1],
        buf.obs.shape[2],
        buf.unit_actions.shape[2],
        buf.obs.device,
        0 if buf.entity_log_probs is None else buf.entity_log_probs.shape[2],
        buf.entity_outcomes is not None,
    )
    static_obs = torch.empty_like(raw_obs)
    static_state = type(env.state)(*(torch.empty_like(part) for part in env.state))
    first_obs = raw_obs

    def keep(obs: torch.Tensor) -> None:
        """The block's last observations and env state into the static buffers."""
        static_obs.copy_(obs)
        for kept, value in zip(static_state, env.state, strict=True):
            kept.copy_(value)
        env.state = static_state

    def first_block() -> None:
        obs = first_obs
        for t in range(block):
            obs = one_step(buf, t, obs, env.capturable_step)
        keep(obs)

    def later_block() -> None:
        obs = static_obs
        for k in range(block):
            obs = one_step(stage, k, obs, env.capturable_step)
        keep(obs)

    graph = None
    if static_obs.device.type == "cuda":
        try:
            graph = warm_up_then_record(first_block, later_block, generators, static_obs.device)
        except RuntimeError as error:
            raise RuntimeError(
                f"the population's collection could not be recorded as a CUDA graph ({error}); "
                f"fix: set {GRAPHED_COLLECT_VARIABLE}=0 to collect eagerly"
            ) from error
    else:
        first_block()
    env.note_steps_taken(block)
    env.state = static_state
    unwritten = {"advantages", "returns"}  # filled after the collection, never by a step
    kept = [f.name for f in fields(Rollout) if f.name not in unwritten and getattr(stage, f.name) is not None]
    t = block
    while t + block <= steps:
        if graph is None:
            later_block()
        else:
            graph.replay()
        env.note_steps_taken(block)
        for name in kept:
            getattr(buf, name)[t : t + block].copy_(getattr(stage, name))
        t += block
    raw_obs = static_obs.clone()
    for row in range(t, steps):
        raw_obs = one_step(buf, row, raw_obs, env.step)
    return raw_obs


def pod_rollout(buf: Rollout, advantages: torch.Tensor, returns: torch.Tensor, cols: slice) -> Rollout:
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
