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

The round is split like a single agent's: collecting (:mod:`podracer.population_collect`) and
learning (:mod:`podracer.population_update`); this module checks the population and ties them
together.

What must be equal across the population (:func:`structure_key`): the agent class, network
(``policy``, ``hidden_sizes``, ``activation``, whether it has a forecast head: ``forecast_coef > 0``),
``rollout_steps``, ``update_epochs``,
``num_minibatches``, the normalisation switches and ``obs_clip``, ``clip_value``, the env's shape
and device. A tournament's perturbations move only the per-pod tensors, so all its pods qualify.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from podracer.errors import TournamentError
from podracer.population_collect import PodBatch, collect_population
from podracer.population_update import update_population
from podracer.ppo import PPOAgent, check_round_size
from podracer.protocols import RoundStats
from podracer.stacked import (
    STRUCTURE_FIELDS,
    PopulationPolicy,
    StackedModel,
    check_population,
    structure_key,
)


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
    batch, collect_metrics, rollouts = collect_population(agents, envs, model)
    learn_metrics, extras = update_population(agents, batch, model, rollouts)
    seconds = time.perf_counter() - start
    names = [*collect_metrics, *learn_metrics]
    table = torch.stack(
        [m.to(torch.float32) for m in (*collect_metrics.values(), *learn_metrics.values())], dim=1
    )
    steps = cfg.rollout_steps * envs[0].num_envs
    stats = []
    for agent, row, extra in zip(agents, table.cpu().tolist(), extras, strict=True):
        agent.update_eval_average()
        agent.env_steps += steps
        agent.policy_version += 1
        metrics = dict(zip(names, row, strict=True)) | {name: float(value) for name, value in extra.items()}
        stats.append(RoundStats(env_steps=steps, seconds=seconds, metrics=metrics))
    return stats


__all__ = [
    "STRUCTURE_FIELDS",
    "PodBatch",
    "PopulationPolicy",
    "StackedModel",
    "check_population",
    "structure_key",
    "train_population_round",
]
