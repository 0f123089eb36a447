"""Proximal Policy Optimisation for batched, bounded-action tensor envs: the agent.

Shapes: ``T`` rollout steps per round, ``N`` parallel envs, ``D`` observation size, ``A`` action
size, ``B = T * N`` transitions per round.

One training round (:meth:`PPOAgent.train_round`):

1. **Collect** ``T`` steps from all ``N`` envs into preallocated ``(T, N, ...)`` buffers on the env's
   device (:class:`~podracer.rollout.Rollout`), sampling actions from the policy (:data:`PolicyKind`)
   scaled to ``[action_low, action_high]``. Nothing in this loop reads a tensor back to the host.
   The critic then values all ``B`` observations in a few large batches.
2. **Bootstrap truncations**: where an episode was *truncated* (time limit, end of data), the reward
   of that step gets ``gamma * V(final_obs)``; where it *terminated*, it does not
   (:func:`~podracer.rollout.bootstrap_truncated`).
3. **GAE**: advantages and returns by generalised advantage estimation (:func:`compute_gae`).
4. **Learn**: ``update_epochs`` passes over the ``B`` transitions in ``num_minibatches`` shuffled
   minibatches, minimising the clipped policy loss, the (optionally clipped) value loss and the
   negative entropy bonus, with advantage normalisation, gradient-norm clipping and an optional
   KL early stop (:func:`podracer.ppo_update.ppo_update`).
5. **Report**: every metric is a tensor until the single host sync at the end of the round.

Observation normalisation (optional, :attr:`PPOConfig.normalize_observations`;
:class:`~podracer.normalization.RunningMeanStd`) keeps a running mean and variance per observation
feature. The statistics are frozen within a round (the rollout and the learning steps see the same
normalisation) and merged with the round's observations at its end; they travel with the weights in
:meth:`PPOAgent.state_dict` and :meth:`PPOAgent.load_weights_from`.

The agent is split along stable-baselines3's seams, each piece in its own module: the settings and
the networks they build (:mod:`podracer.ppo_config`), collecting a round
(:mod:`podracer.ppo_collect`; the buffer, truncation bootstrap and GAE in :mod:`podracer.rollout`),
learning from it (:mod:`podracer.ppo_update`), snapshots (:mod:`podracer.ppo_snapshot`), the frozen
evaluation policy (:func:`podracer.frozen.freeze_policy`), and the normalisation and its cache
(:mod:`podracer.normalization`). :class:`PPOAgent` holds the state and ties the pieces together; the
names this module always offered are re-exported here (``from podracer.ppo import RunningMeanStd,
compute_gae, ...`` keeps working).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from podracer.distributions import PolicyDistribution, to_action_range
from podracer.entity import CrossSectionalActorCritic, EntityLayout
from podracer.eval_average import eval_average, evaluated_model, load_average, update_average
from podracer.frozen import freeze_policy
from podracer.hterm import TrajectoryBuffer
from podracer.networks import ActorCritic
from podracer.normalization import NormalizationCache, RunningMeanStd
from podracer.ppo_collect import EnvCursor, collect_rollout
from podracer.ppo_config import (
    MIN_MINIBATCH_SIZE,
    POLICY_KINDS,
    AgentError,
    LrSchedule,
    PolicyKind,
    PPOConfig,
    build_model,
    build_optimizer,
    check_round_size,
    learning_rate_at,
    set_optimizer_hypers,
)
from podracer.ppo_snapshot import (
    STATE_FORMAT,
    agent_arguments,
    check_format,
    check_same_config,
    check_same_network,
    load_optimizer_state,
    restore_generator,
    snapshot_of,
)
from podracer.ppo_update import ppo_update
from podracer.protocols import Policy, RoundStats, TensorVectorEnv
from podracer.rollout import Rollout, bootstrap_truncated, compute_gae

__all__ = [
    "MIN_MINIBATCH_SIZE",
    "POLICY_KINDS",
    "STATE_FORMAT",
    "AgentError",
    "LrSchedule",
    "PPOAgent",
    "PPOConfig",
    "PolicyKind",
    "Rollout",
    "RunningMeanStd",
    "bootstrap_truncated",
    "check_round_size",
    "compute_gae",
    "learning_rate_at",
    "ppo_update",
]


class PPOAgent:
    """A PPO learner over a box ``[action_low, action_high]^A`` (Beta or logistic-normal policy).

    Satisfies :class:`podracer.api.Agent`.

    Args:
        obs_dim: ``D``, observation width.
        action_dim: ``A``, action width.
        action_low: lower bound of every action dimension.
        action_high: upper bound of every action dimension (> ``action_low``).
        config: hyper-parameters.
        device: where the networks, buffers and random generator live (must be the env's device).
        seed: seeds the network initialisation and every random draw of the agent (action sampling,
            minibatch shuffling, env reset seeds).
        layout: how observations and actions split into entities and globals; required by
            ``policy = "cross_sectional"`` (its ``obs_dim`` and ``action_dim`` must match), ignored
            by ``mlp``.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        action_low: float,
        action_high: float,
        config: PPOConfig,
        device: torch.device | str = "cpu",
        seed: int = 0,
        layout: EntityLayout | None = None,
    ) -> None:
        if obs_dim < 1 or action_dim < 1:
            raise AgentError(f"obs_dim and action_dim must be >= 1, got {obs_dim} and {action_dim}")
        if not action_high > action_low:
            raise AgentError(f"action_high must exceed action_low, got [{action_low}, {action_high}]")
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.action_low = float(action_low)
        self.action_high = float(action_high)
        self.config = config
        self.device = torch.device(device)
        self.seed = seed
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.layout = layout
        self.model = build_model(config, obs_dim, action_dim, layout, seed).to(self.device)
        self.obs_stats = RunningMeanStd(obs_dim).to(self.device)
        self.optimizer = build_optimizer(self.model, config)
        self.eval_average = eval_average(self.model, config.eval_average)
        """The EMA of the weights that evaluation uses (``config.eval_average`` > 0), else ``None``."""
        self.env_steps = 0
        self.policy_version = 0
        self.budget_spent = 0.0
        """The tournament's budget spent at this round's start (``lr_schedule = "budget"``); not saved."""
        self.epoch_hook: Callable[[torch.Tensor], torch.Tensor] | None = None
        """Called after every update epoch with its mean approximate KL (0-d); returns the KL to act on
        (:mod:`podracer.fusion` averages the learners there). ``None``: no hook."""
        model = self.model
        tie = model.layout.tie_statistics if isinstance(model, CrossSectionalActorCritic) else None
        self._normalization = NormalizationCache(self.obs_stats, tie)  # every entity normalised alike
        self._cursor = EnvCursor()
        self._rollout: Rollout | None = None
        self._h_term: TrajectoryBuffer | None = None

    # ------------------------------------------------------------------ acting

    def _normalize(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.config.normalize_observations:
            return obs
        return self._normalization.normalize(obs, self.config.obs_clip)

    def _scale(self, unit_actions: torch.Tensor) -> torch.Tensor:
        return to_action_range(unit_actions, self.action_low, self.action_high)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions ``(N, A)`` in ``[action_low, action_high]`` for raw observations ``(N, D)``.

        Deterministic actions are the policy's mean, by the evaluated network (:attr:`evaluation_model`);
        stochastic ones are drawn from the current network's distribution with the agent's generator.
        """
        model = self.evaluation_model if deterministic else self.model
        dist: PolicyDistribution = model.distribution(self._normalize(obs))
        raw = dist.mode() if deterministic else dist.sample(self.generator)
        return self._scale(dist.squash(raw))

    @property
    def evaluation_model(self) -> ActorCritic | CrossSectionalActorCritic:
        """The network evaluation uses: the average of the weights with ``config.eval_average`` > 0
        (:mod:`podracer.eval_average`, once a round has been learned), else the current one."""
        model = evaluated_model(self.eval_average, self.model)
        assert isinstance(model, ActorCritic | CrossSectionalActorCritic)
        return model

    def update_eval_average(self) -> None:
        """Fold the current weights into the evaluation average (after each learned round)."""
        update_average(self.eval_average, self.model)

    def evaluation_policy(self) -> Policy:
        """The deterministic policy, frozen at the current weights and statistics, for evaluation loops
        (:func:`~podracer.frozen.freeze_policy`: equal to :meth:`act` to float32 rounding; later
        learning or loading does not change it).

        Returns:
            Observations ``(N, D)`` -> actions ``(N, A)`` in ``[action_low, action_high]``.
        """
        cfg = self.config
        return freeze_policy(
            self.evaluation_model,
            self.obs_stats,
            cfg.normalize_observations,
            cfg.obs_clip,
            self.action_low,
            self.action_high,
        )

    # ------------------------------------------------------------------ collecting

    def begin_collection(self, env: TensorVectorEnv) -> torch.Tensor:
        """The raw observations ``(N, D)`` a round on ``env`` starts from.

        The first time ``env`` is seen it is reset with a seed from the agent's generator; after
        that a round continues from where the last one left it (:meth:`end_collection`).
        """
        return self._cursor.begin(env, self.generator, self.device)

    def end_collection(self, env: TensorVectorEnv, next_obs: torch.Tensor) -> None:
        """Remember where a round on ``env`` ended: raw observations ``(N, D)`` the next one starts from."""
        self._cursor.end(env, next_obs)

    def entity_shape(self) -> tuple[int, int]:
        """``(M, K)`` (entities, global action dimensions) with ``advantages = "entity"``, else ``(0, 0)``."""
        if self.config.advantages != "entity" or not isinstance(self.model, CrossSectionalActorCritic):
            return 0, 0
        layout = self.model.layout
        return layout.num_entities, layout.action_globals

    def noise_columns(self) -> int:
        """Observation columns ``obs_noise`` perturbs: the entity features of a cross-sectional
        policy (:attr:`~podracer.entity.EntityLayout.feature_columns`), else all ``D``."""
        if isinstance(self.model, CrossSectionalActorCritic):
            return self.model.layout.feature_columns
        return self.obs_dim

    def normalization_constants(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(shift, scale)`` ``(D,)`` of the current observation statistics (entities tied alike)."""
        return self._normalization.constants(dtype)

    @torch.no_grad()
    def collect(self, env: TensorVectorEnv) -> tuple[Rollout, dict[str, torch.Tensor]]:
        """Run ``rollout_steps`` steps on every env of ``env`` and compute advantages and returns
        (:func:`~podracer.ppo_collect.collect_rollout`).

        Resets ``env`` the first time it is seen and continues from its last observation afterwards.
        Updates the observation statistics with the round's observations at the end.

        Returns:
            ``(rollout, metrics)``; the metrics are 0-d tensors (no host sync here).
        """
        cfg = self.config
        steps, num_envs = cfg.rollout_steps, env.num_envs
        if env.obs_dim != self.obs_dim or env.action_dim != self.action_dim:
            raise AgentError(
                f"env has obs_dim={env.obs_dim}, action_dim={env.action_dim}; "
                f"agent expects {self.obs_dim}, {self.action_dim}"
            )
        entities, action_globals = self.entity_shape()
        buf = self._rollout
        if (
            buf is None
            or buf.obs.shape[:2] != (steps, num_envs)
            or (buf.entity_advantages is None) != (entities == 0)
            or (buf.entity_outcomes is None) == (entities > 0 and cfg.uses_step_outcomes)
        ):
            buf = self._rollout = Rollout.allocate(
                steps, num_envs, self.obs_dim, self.action_dim, self.device, entities, cfg.uses_step_outcomes
            )
        first_obs = self.begin_collection(env)
        collected = collect_rollout(
            self.model,
            env,
            first_obs,
            buf,
            cfg,
            self.generator,
            self._normalize,
            self._scale,
            action_globals,
            noise_columns=self.noise_columns(),
        )
        self.end_collection(env, collected.next_obs)
        if cfg.normalize_observations:
            self.obs_stats.merge(
                collected.obs_sum,
                collected.obs_sumsq,
                torch.tensor(float(steps * num_envs), dtype=torch.float64),
            )
        return buf, collected.metrics

    # ------------------------------------------------------------------ learning

    def learn(self, rollout: Rollout) -> dict[str, torch.Tensor]:
        """``update_epochs`` passes of clipped-PPO minibatch updates over ``rollout`` (:func:`ppo_update`).

        Returns:
            Metrics as 0-d tensors: losses, approximate KL and clip fraction are means over the
            minibatches run; ``entropy`` is the updated policy's mean entropy (nats) over the
            round's first minibatch-size transitions; ``explained_variance`` is the rollout
            critic's against the returns; with the H-term on, ``h_term_loss`` is its last step's loss.
        """
        cfg = self.config
        lr = learning_rate_at(cfg, self.env_steps, self.budget_spent)
        set_optimizer_hypers(self.optimizer, cfg, lr)
        check_round_size(rollout.obs.shape[0] * rollout.obs.shape[1], cfg.num_minibatches)
        hook, h_term = self.epoch_hooks(rollout)
        metrics = ppo_update(self.model, self.optimizer, rollout, cfg, lr, self.generator, self.device, hook)
        if h_term is not None and h_term.last_loss is not None:
            metrics["h_term_loss"] = h_term.last_loss
        return metrics

    def epoch_hooks(
        self, rollout: Rollout
    ) -> tuple[Callable[[torch.Tensor], torch.Tensor] | None, TrajectoryBuffer | None]:
        """What runs after every update epoch of a round on ``rollout``, and the H-term's buffer.

        With ``h_term_coef > 0`` the round's trajectories enter the H-term buffer and the hook takes
        one H-term step (:mod:`podracer.hterm`), then runs :attr:`epoch_hook` (learner fusion), so
        fused learners stay averaged; otherwise it is :attr:`epoch_hook` itself.
        """
        cfg = self.config
        if cfg.h_term_coef <= 0.0:
            return self.epoch_hook, None
        h_term = self._h_term = TrajectoryBuffer.for_rollout(self._h_term, rollout, cfg.h_term_trajectories)
        h_term.push(rollout)
        return h_term.epoch_hook(self.model, self.optimizer, cfg, self.epoch_hook), h_term

    def train_round(self, env: TensorVectorEnv) -> RoundStats:
        """Collect ``rollout_steps x env.num_envs`` transitions from ``env``, then learn from them.

        Returns:
            The round's env steps, wall seconds and metrics (one host sync, at the end).
        """
        start = time.perf_counter()
        # Refused before any env step or statistics update, not after a wasted collection.
        check_round_size(self.config.rollout_steps * env.num_envs, self.config.num_minibatches)
        rollout, collect_metrics = self.collect(env)
        learn_metrics = self.learn(rollout)
        self.update_eval_average()
        names = [*collect_metrics, *learn_metrics]
        values = torch.stack(
            [v.to(self.device, torch.float32) for v in (*collect_metrics.values(), *learn_metrics.values())]
        )
        metrics = dict(zip(names, values.tolist(), strict=True))
        steps = rollout.rewards.numel()
        self.env_steps += steps
        self.policy_version += 1
        return RoundStats(env_steps=steps, seconds=time.perf_counter() - start, metrics=metrics)

    def learner_flops_per_round(self, num_envs: int) -> int:
        """Matmul FLOPs of one round's network work (rollout inference plus all update epochs).

        Rollout: one actor and one critic forward per transition (``2 * weights``). Learning, per
        transition and epoch: forward (``2 * weights``), weight gradients (``2 * weights``) and input
        gradients of every layer but the two first (``2 * (weights - first_layers)``). Bootstrap
        evaluations of truncated states and elementwise work are not counted. Assumes every epoch runs.
        """
        per_row, first = self.model.matmul_flops_per_row()
        transitions = self.config.rollout_steps * num_envs
        rollout = per_row * transitions
        learning = (3 * per_row - first) * transitions * self.config.update_epochs
        return rollout + learning

    # ------------------------------------------------------------------ snapshots

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, as tensors and plain Python values
        (:func:`~podracer.ppo_snapshot.snapshot_of`; loads with ``torch.load(weights_only=True)``)."""
        return snapshot_of(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore networks, statistics, optimiser, counters and RNG from :meth:`state_dict`'s output.

        The snapshot's config must equal this agent's (use :meth:`from_state_dict` to take the
        snapshot's, or :meth:`load_weights_from` to keep this agent's hyper-parameters). The random
        generator's state is restored when the snapshot comes from the same device type; across
        CPU and CUDA it is re-seeded from ``(seed, policy_version)`` instead (still deterministic).
        """
        check_format(state)
        check_same_config(state, self.config)
        self.load_weights_from(state, keep_optimizer=True)
        self.env_steps = int(state["env_steps"])
        self.policy_version = int(state["policy_version"])
        restore_generator(self.generator, state, self.device, self.seed, self.policy_version)
        self._cursor.forget()

    def load_weights_from(self, state: Mapping[str, Any], keep_optimizer: bool) -> None:
        """Copy a snapshot's networks and observation statistics into this agent.

        This agent keeps its own config, counters and generator: the tournament's generator uses it
        to start a pod with perturbed hyper-parameters from a leader's weights. The learning rate
        comes from this agent's config at the next round.

        Args:
            state: a :meth:`state_dict` with the same ``obs_dim``, ``action_dim``, ``hidden_sizes``
                and ``activation``.
            keep_optimizer: also copy the snapshot's Adam moments (else the optimiser starts fresh).
        """
        check_same_network(state, self.obs_dim, self.action_dim, self.config)
        self.model.load_state_dict(state["model"])
        load_average(self.eval_average, state.get("eval_average"))
        self.obs_stats.load_state_dict(state["obs_stats"])
        self.optimizer = build_optimizer(self.model, self.config)
        if keep_optimizer:
            load_optimizer_state(self.optimizer, state, self.config)

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any], device: torch.device | str = "cpu") -> PPOAgent:
        """A new agent with the snapshot's dimensions, config and full state, on ``device``."""
        agent = cls(**agent_arguments(state), device=device)
        agent.load_state_dict(state)
        return agent
