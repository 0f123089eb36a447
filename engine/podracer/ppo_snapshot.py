"""A PPO agent's snapshot: what :meth:`podracer.ppo.PPOAgent.state_dict` holds and how it loads back.

A snapshot is tensors and plain Python values only, so it loads with ``torch.load(weights_only=True)``.
Keys: ``format`` (:data:`STATE_FORMAT`), ``config`` (plain dict), ``obs_dim``, ``action_dim``,
``action_low``, ``action_high``, ``seed``, ``layout`` (plain dict or ``None``), ``model``,
``obs_stats``, ``optimizer``, ``env_steps``, ``policy_version``, ``rng_state`` and
``rng_device_type`` (the generator's device type: CPU and CUDA generator states differ); with an
evaluation average (``PPOConfig.eval_average`` > 0), ``eval_average`` (:mod:`podracer.eval_average`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol

import torch

from podracer.adam import FusedAdam
from podracer.entity import CrossSectionalActorCritic, EntityLayout
from podracer.errors import SnapshotError
from podracer.eval_average import EvalAverage, average_state
from podracer.networks import ActorCritic
from podracer.normalization import RunningMeanStd
from podracer.ppo_collect import SEED_SPACE
from podracer.ppo_config import PPOConfig, set_optimizer_hypers

STATE_FORMAT = "podracer.ppo/1"
"""Tag stored in every PPO agent snapshot, checked on load."""


class Snapshotted(Protocol):
    """What a snapshot is taken of (a :class:`~podracer.ppo.PPOAgent`)."""

    config: PPOConfig
    obs_dim: int
    action_dim: int
    action_low: float
    action_high: float
    seed: int
    layout: EntityLayout | None
    model: ActorCritic | CrossSectionalActorCritic
    eval_average: EvalAverage | None
    obs_stats: RunningMeanStd
    optimizer: FusedAdam
    env_steps: int
    policy_version: int
    generator: torch.Generator
    device: torch.device


def snapshot_of(agent: Snapshotted) -> dict[str, Any]:
    """Everything needed to resume ``agent``, as tensors and plain values (see the module docstring)."""
    state = {
        "format": STATE_FORMAT,
        "config": agent.config.to_dict(),
        "obs_dim": agent.obs_dim,
        "action_dim": agent.action_dim,
        "action_low": agent.action_low,
        "action_high": agent.action_high,
        "seed": agent.seed,
        "layout": None if agent.layout is None else agent.layout.to_dict(),
        "model": {k: v.detach().clone() for k, v in agent.model.state_dict().items()},
        "obs_stats": {k: v.detach().clone() for k, v in agent.obs_stats.state_dict().items()},
        "optimizer": agent.optimizer.state_dict(),
        "env_steps": agent.env_steps,
        "policy_version": agent.policy_version,
        "rng_state": agent.generator.get_state(),
        "rng_device_type": agent.device.type,
    }
    average = average_state(agent.eval_average)
    if average is not None:
        state["eval_average"] = average
    return state


def check_format(state: Mapping[str, Any]) -> None:
    """Refuse anything but a PPO agent snapshot.

    Raises:
        SnapshotError: ``state`` is not a mapping tagged :data:`STATE_FORMAT`.
    """
    found = state.get("format") if isinstance(state, Mapping) else None
    if found != STATE_FORMAT:
        raise SnapshotError(f"not a PPO agent snapshot: format is {found!r}, expected {STATE_FORMAT!r}")


def check_same_config(state: Mapping[str, Any], config: PPOConfig) -> None:
    """Refuse a snapshot whose hyper-parameters are not ``config`` (a full restore needs the same).

    Raises:
        SnapshotError: they differ.
    """
    if PPOConfig.from_dict(state["config"]) != config:
        raise SnapshotError(
            "snapshot config differs from this agent's; use load_weights_from or from_state_dict"
        )


def check_same_network(state: Mapping[str, Any], obs_dim: int, action_dim: int, config: PPOConfig) -> None:
    """Refuse a snapshot whose networks do not fit an agent of these sizes and ``config``.

    Raises:
        SnapshotError: another ``obs_dim``/``action_dim``, ``hidden_sizes``, ``activation``,
            ``policy`` or ``critic_features``.
    """
    check_format(state)
    if (int(state["obs_dim"]), int(state["action_dim"])) != (obs_dim, action_dim):
        raise SnapshotError(
            f"snapshot is for obs_dim={state['obs_dim']}, action_dim={state['action_dim']}; "
            f"this agent has {obs_dim}, {action_dim}"
        )
    theirs_config = state["config"]
    theirs = (
        tuple(theirs_config["hidden_sizes"]),
        theirs_config["activation"],
        theirs_config.get("policy", "mlp"),
        theirs_config.get("critic_features", "own"),
        float(theirs_config.get("forecast_coef", 0.0)) > 0.0,
    )
    ours = (
        config.hidden_sizes,
        config.activation,
        config.policy,
        config.critic_features,
        config.forecast_coef > 0.0,
    )
    if theirs != ours:
        raise SnapshotError(
            f"snapshot network has hidden_sizes={theirs[0]}, activation={theirs[1]!r}, "
            f"policy={theirs[2]!r}, critic_features={theirs[3]!r}, forecast head={theirs[4]}; this agent "
            f"has {ours[0]}, {ours[1]!r}, {ours[2]!r}, {ours[3]!r}, {ours[4]}: build the agent with the "
            "snapshot's"
        )


def load_optimizer_state(optimizer: FusedAdam, state: Mapping[str, Any], config: PPOConfig) -> None:
    """Load a snapshot's Adam moments into a fresh ``optimizer``, at ``config``'s learning rate and eps.

    A copy is loaded: torch's load keeps same-device tensors, and the donor of the snapshot may be live.
    """
    optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
    set_optimizer_hypers(optimizer, config, config.learning_rate)


def restore_generator(
    generator: torch.Generator, state: Mapping[str, Any], device: torch.device, seed: int, policy_version: int
) -> None:
    """Set ``generator`` to the snapshot's state when it comes from the same device type; across CPU
    and CUDA (whose generator states mean nothing to each other) re-seed it from
    ``(seed, policy_version)`` instead, still deterministically."""
    if state["rng_device_type"] == device.type:
        generator.set_state(state["rng_state"].cpu())
    else:
        generator.manual_seed(seed * SEED_SPACE + policy_version)


def agent_arguments(state: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor arguments of an agent like the snapshot's: sizes, action range, config, seed, layout."""
    check_format(state)
    return {
        "obs_dim": int(state["obs_dim"]),
        "action_dim": int(state["action_dim"]),
        "action_low": float(state["action_low"]),
        "action_high": float(state["action_high"]),
        "config": PPOConfig.from_dict(state["config"]),
        "seed": int(state["seed"]),
        "layout": None if state.get("layout") is None else EntityLayout.from_dict(state["layout"]),
    }
