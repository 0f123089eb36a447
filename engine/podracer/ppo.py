"""Proximal Policy Optimisation for batched, bounded-action tensor envs: the config and the agent.

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

The pieces live in their own modules and are re-exported here (``from podracer.ppo import
RunningMeanStd, compute_gae, ...`` keeps working): :mod:`podracer.rollout` (buffer, truncation
bootstrap, GAE), :mod:`podracer.normalization` (running statistics), :mod:`podracer.ppo_update`
(the loss and its minibatch epochs).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from podracer.distributions import PolicyDistribution
from podracer.entity import CrossSectionalActorCritic, EntityLayout
from podracer.entity_advantage import entity_terms, with_future
from podracer.errors import SnapshotError
from podracer.frozen import FrozenActorPolicy, RowWisePolicy
from podracer.hterm import TrajectoryBuffer
from podracer.networks import ActorCritic, FrozenMLP
from podracer.normalization import NormalizationConstants, RunningMeanStd
from podracer.ppo_config import (
    MIN_MINIBATCH_SIZE,
    POLICY_KINDS,
    AgentError,
    LrSchedule,
    PolicyKind,
    PPOConfig,
    check_round_size,
    learning_rate_at,
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

STATE_FORMAT = "podracer.ppo/1"
"""Tag stored in every :meth:`PPOAgent.state_dict`, checked on load."""

_SEED_SPACE = 2**31 - 1
"""Env reset seeds are drawn uniformly from ``[0, _SEED_SPACE)`` by the agent's generator."""


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
        self.model = self._new_model().to(self.device)
        self.obs_stats = RunningMeanStd(obs_dim).to(self.device)
        self.optimizer = self._new_optimizer()
        self.env_steps = 0
        self.policy_version = 0
        self._env: TensorVectorEnv | None = None
        self._next_obs: torch.Tensor | None = None
        self.epoch_hook: Callable[[torch.Tensor], torch.Tensor] | None = None
        """Called after every update epoch with its mean approximate KL (0-d); returns the KL to act on
        (:mod:`podracer.fusion` averages the learners there). ``None``: no hook."""
        self._rollout: Rollout | None = None
        self._normalization_cache: NormalizationConstants | None = None
        self._h_term: TrajectoryBuffer | None = None

    def _new_model(self) -> ActorCritic | CrossSectionalActorCritic:
        cfg, layout = self.config, self.layout
        if cfg.policy == "mlp":
            return ActorCritic(self.obs_dim, self.action_dim, cfg.hidden_sizes, cfg.activation, self.seed)
        if layout is None:
            raise AgentError(
                "policy 'cross_sectional' needs an EntityLayout of the observation; pass layout= "
                "or use policy 'mlp'"
            )
        if (layout.obs_dim, layout.action_dim) != (self.obs_dim, self.action_dim):
            raise AgentError(
                f"entity layout describes obs_dim={layout.obs_dim}, action_dim={layout.action_dim}; "
                f"the agent has {self.obs_dim}, {self.action_dim}"
            )
        return CrossSectionalActorCritic(layout, cfg.hidden_sizes, cfg.activation, self.seed)

    def _new_optimizer(self) -> torch.optim.Adam:
        # fused: one kernel per step over all parameters (CPU and CUDA).
        return torch.optim.Adam(
            self.model.parameters(), lr=self.config.learning_rate, eps=self.config.adam_eps, fused=True
        )

    # ------------------------------------------------------------------ acting

    def _normalize(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.config.normalize_observations:
            return obs
        shift, scale = self._normalization(obs.dtype)
        return RunningMeanStd.rescale(obs, shift, scale, self.config.obs_clip)

    def _normalization(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The normalisation constants ``(shift, scale)`` ``(D,)`` of the current statistics.

        Computed once per change of the statistics (every in-place write to a tensor bumps its
        version counter: a merge, a load, a fusion average), not once per step: one batch-1
        evaluation step is a handful of small ops, and these were a third of them.
        """
        stats, cached = self.obs_stats, self._normalization_cache
        if not (
            cached is not None
            and cached.mean is stats.mean
            and cached.var is stats.var
            and (cached.mean_version, cached.var_version) == (stats.mean._version, stats.var._version)
            and cached.shift.dtype == dtype
        ):
            with torch.inference_mode(False):
                mean, var = stats.mean, stats.var
                if isinstance(self.model, CrossSectionalActorCritic):  # every entity normalised alike
                    mean, var = self.model.layout.tie_statistics(mean, var)
                shift, scale = RunningMeanStd.constants(mean, var, dtype)
            cached = self._normalization_cache = NormalizationConstants(
                stats.mean, stats.mean._version, stats.var, stats.var._version, shift, scale
            )
        return cached.shift, cached.scale

    def _scale(self, unit_actions: torch.Tensor) -> torch.Tensor:
        if self.action_low == 0.0 and self.action_high == 1.0:  # the same numbers, two ops fewer
            return unit_actions
        return self.action_low + (self.action_high - self.action_low) * unit_actions

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Actions ``(N, A)`` in ``[action_low, action_high]`` for raw observations ``(N, D)``.

        Deterministic actions are the policy's mean; stochastic ones are drawn from the agent's generator.
        """
        dist: PolicyDistribution = self.model.distribution(self._normalize(obs))
        raw = dist.mode() if deterministic else dist.sample(self.generator)
        return self._scale(dist.squash(raw))

    def evaluation_policy(self) -> Policy:
        """The deterministic policy, frozen at the current weights and statistics, for evaluation loops.

        The flat MLP's policy is a :class:`~podracer.frozen.FrozenActorPolicy` (the actor as a
        :class:`~podracer.networks.FrozenMLP`, weights pre-transposed: about twice as fast at batch 1
        on a CPU, equal to :meth:`act` to float32 rounding; several stack into one pass with
        :class:`~podracer.frozen.StackedActors`); the cross-sectional network runs a copy of itself,
        as a :class:`~podracer.frozen.RowWisePolicy` (it mixes assets within an observation, never
        rows).
        Later learning or loading does not change it.

        Returns:
            Observations ``(N, D)`` -> actions ``(N, A)`` in ``[action_low, action_high]``.
        """
        model = self.model
        normalize, clip = self.config.normalize_observations, self.config.obs_clip
        mean, var = self.obs_stats.mean.clone(), self.obs_stats.var.clone()
        if isinstance(model, ActorCritic):  # data that podracer.frozen.StackedActors can stack
            return FrozenActorPolicy(
                mean if normalize else None,
                var if normalize else None,
                clip,
                FrozenMLP(model.actor),
                model.action_dim,
                self.action_low,
                self.action_high,
            )
        if isinstance(model, CrossSectionalActorCritic):  # every entity normalised alike
            mean, var = model.layout.tie_statistics(mean, var)
        constants: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}
        scale = self._scale
        frozen = copy.deepcopy(model)

        def unit_action(rows: torch.Tensor) -> torch.Tensor:
            dist = frozen.distribution(rows)
            return dist.squash(dist.mode())

        @torch.no_grad()
        def policy(obs: torch.Tensor) -> torch.Tensor:
            rows = obs
            if normalize:
                if obs.dtype not in constants:
                    constants[obs.dtype] = RunningMeanStd.constants(mean, var, obs.dtype)
                rows = RunningMeanStd.rescale(obs, *constants[obs.dtype], clip)
            return scale(unit_action(rows))

        return RowWisePolicy(policy)  # the cross-sectional network mixes assets within a row only

    # ------------------------------------------------------------------ collecting

    def begin_collection(self, env: TensorVectorEnv) -> torch.Tensor:
        """The raw observations ``(N, D)`` a round on ``env`` starts from.

        The first time ``env`` is seen it is reset with a seed from the agent's generator; after
        that a round continues from where the last one left it (:meth:`end_collection`).
        """
        if env is not self._env or self._next_obs is None:
            seed = int(torch.randint(_SEED_SPACE, (), generator=self.generator, device=self.device))
            self._next_obs, _ = env.reset(seed=seed)
            self._env = env
        return self._next_obs

    def end_collection(self, env: TensorVectorEnv, next_obs: torch.Tensor) -> None:
        """Remember where a round on ``env`` ended: raw observations ``(N, D)`` the next one starts from."""
        self._env = env
        self._next_obs = next_obs

    def entity_shape(self) -> tuple[int, int]:
        """``(M, K)`` (entities, global action dimensions) with ``advantages = "entity"``, else ``(0, 0)``."""
        if self.config.advantages != "entity" or not isinstance(self.model, CrossSectionalActorCritic):
            return 0, 0
        layout = self.model.layout
        return layout.num_entities, layout.action_globals

    def normalization_constants(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(shift, scale)`` ``(D,)`` of the current observation statistics (entities tied alike)."""
        return self._normalization(dtype)

    @torch.no_grad()
    def collect(self, env: TensorVectorEnv) -> tuple[Rollout, dict[str, torch.Tensor]]:
        """Run ``rollout_steps`` steps on every env of ``env`` and compute advantages and returns.

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
        ):
            buf = self._rollout = Rollout.allocate(
                steps, num_envs, self.obs_dim, self.action_dim, self.device, entities
            )
        raw_obs = self.begin_collection(env)
        obs_sum = torch.zeros(self.obs_dim, dtype=torch.float64, device=self.device)
        obs_sumsq = torch.zeros_like(obs_sum)
        episode_return = torch.zeros(num_envs, device=self.device)
        finished_return_sum = torch.zeros((), device=self.device)
        finished_count = torch.zeros((), device=self.device)

        for t in range(steps):
            obs_sum += raw_obs.sum(0).double()
            obs_sumsq += raw_obs.square().sum(0).double()
            obs = self._normalize(raw_obs)
            dist: PolicyDistribution = self.model.distribution(obs)
            raw = dist.sample(self.generator)
            buf.obs[t] = obs
            buf.unit_actions[t] = raw
            if buf.entity_log_probs is None:
                buf.log_probs[t] = dist.log_prob(raw)
            else:
                components = dist.log_prob_components(raw)
                buf.log_probs[t] = components.sum(dim=-1)
                buf.entity_log_probs[t] = components[:, action_globals:]
            raw_obs, reward, terminated, truncated, info = env.step(self._scale(dist.squash(raw)))
            if buf.entity_advantages is not None:
                buf.entity_advantages[t] = entity_terms(dist, raw, info, action_globals)
            buf.rewards[t] = reward
            buf.terminated[t] = terminated
            buf.truncated[t] = truncated
            buf.final_obs[t] = self._normalize(info["final_obs"])
            ended = (terminated | truncated).to(reward.dtype)
            episode_return += reward
            finished_return_sum += (episode_return * ended).sum()
            finished_count += ended.sum()
            episode_return *= 1.0 - ended
        self.end_collection(env, raw_obs)

        # Critic values of the whole rollout in a few large matmuls rather than one small one per step.
        rows = buf.obs.flatten(0, 1).tensor_split(cfg.num_minibatches)
        buf.values.copy_(torch.cat([self.model.value(chunk) for chunk in rows]).view(steps, num_envs))

        # Truncated episodes: add gamma * V(final_obs). One host sync finds the (rare) truncated rows.
        mean_env_reward = buf.rewards.mean()
        cut = (buf.truncated & ~buf.terminated).nonzero(as_tuple=True)
        final_values = torch.zeros_like(buf.rewards)
        if cut[0].numel() > 0:
            final_values[cut] = self.model.value(buf.final_obs[cut])
        buf.rewards.copy_(
            bootstrap_truncated(buf.rewards, buf.truncated, buf.terminated, final_values, cfg.gamma)
        )
        last_values = self.model.value(self._normalize(raw_obs))
        advantages, returns = compute_gae(
            buf.rewards, buf.values, buf.terminated | buf.truncated, last_values, cfg.gamma, cfg.gae_lambda
        )
        buf.advantages.copy_(advantages)
        buf.returns.copy_(returns)
        if buf.entity_advantages is not None:
            entity_advantages = with_future(buf.entity_advantages, advantages, buf.rewards, buf.values)
            buf.entity_advantages.copy_(entity_advantages)
        if cfg.normalize_observations:
            self.obs_stats.merge(
                obs_sum, obs_sumsq, torch.tensor(float(steps * num_envs), dtype=torch.float64)
            )
        metrics = {
            "mean_reward": mean_env_reward,
            "episodes_finished": finished_count,
            "mean_episode_return": finished_return_sum / finished_count.clamp_min(1.0),
        }
        return buf, metrics

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
        lr = learning_rate_at(cfg, self.env_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
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
        names = [*collect_metrics, *learn_metrics]
        values = torch.stack(
            [v.to(self.device, torch.float32) for v in (*collect_metrics.values(), *learn_metrics.values())]
        )
        metrics = dict(zip(names, values.tolist(), strict=True))
        steps = rollout.rewards.numel()
        self.env_steps += steps
        self.policy_version += 1
        return RoundStats(env_steps=steps, seconds=time.perf_counter() - start, metrics=metrics)

    # ------------------------------------------------------------------ snapshots

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, as tensors and plain Python values.

        Loads with ``torch.load(path, weights_only=True)``. Keys: ``format``, ``config`` (plain
        dict), ``obs_dim``, ``action_dim``, ``action_low``, ``action_high``, ``seed``, ``layout``
        (plain dict or ``None``), ``model``,
        ``obs_stats``, ``optimizer``, ``env_steps``, ``policy_version``, ``rng_state`` and
        ``rng_device_type`` (the generator's device type: CPU and CUDA generator states differ).
        """
        return {
            "format": STATE_FORMAT,
            "config": self.config.to_dict(),
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "action_low": self.action_low,
            "action_high": self.action_high,
            "seed": self.seed,
            "layout": None if self.layout is None else self.layout.to_dict(),
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "obs_stats": {k: v.detach().clone() for k, v in self.obs_stats.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "env_steps": self.env_steps,
            "policy_version": self.policy_version,
            "rng_state": self.generator.get_state(),
            "rng_device_type": self.device.type,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore networks, statistics, optimiser, counters and RNG from :meth:`state_dict`'s output.

        The snapshot's config must equal this agent's (use :meth:`from_state_dict` to take the
        snapshot's, or :meth:`load_weights_from` to keep this agent's hyper-parameters). The random
        generator's state is restored when the snapshot comes from the same device type; across
        CPU and CUDA it is re-seeded from ``(seed, policy_version)`` instead (still deterministic).
        """
        _check_format(state)
        if PPOConfig.from_dict(state["config"]) != self.config:
            raise SnapshotError(
                "snapshot config differs from this agent's; use load_weights_from or from_state_dict"
            )
        self.load_weights_from(state, keep_optimizer=True)
        self.env_steps = int(state["env_steps"])
        self.policy_version = int(state["policy_version"])
        if state["rng_device_type"] == self.device.type:
            self.generator.set_state(state["rng_state"].cpu())
        else:  # a CUDA generator state means nothing to a CPU generator (and back): reseed reproducibly
            self.generator.manual_seed(self.seed * _SEED_SPACE + self.policy_version)
        self._env = None
        self._next_obs = None

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
        _check_format(state)
        if (int(state["obs_dim"]), int(state["action_dim"])) != (self.obs_dim, self.action_dim):
            raise SnapshotError(
                f"snapshot is for obs_dim={state['obs_dim']}, action_dim={state['action_dim']}; "
                f"this agent has {self.obs_dim}, {self.action_dim}"
            )
        config = state["config"]
        theirs = (tuple(config["hidden_sizes"]), config["activation"], config.get("policy", "mlp"))
        ours = (self.config.hidden_sizes, self.config.activation, self.config.policy)
        if theirs != ours:
            raise SnapshotError(
                f"snapshot network has hidden_sizes={theirs[0]}, activation={theirs[1]!r}, "
                f"policy={theirs[2]!r}; this agent has {ours[0]}, {ours[1]!r}, {ours[2]!r}: "
                "build the agent with the snapshot's"
            )
        self.model.load_state_dict(state["model"])
        self.obs_stats.load_state_dict(state["obs_stats"])
        self.optimizer = self._new_optimizer()
        if keep_optimizer:  # a copy: torch's load keeps same-device tensors, and a donor may be live
            self.optimizer.load_state_dict(copy.deepcopy(state["optimizer"]))
            for group in self.optimizer.param_groups:
                group["lr"] = self.config.learning_rate
                group["eps"] = self.config.adam_eps

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any], device: torch.device | str = "cpu") -> PPOAgent:
        """A new agent with the snapshot's dimensions, config and full state, on ``device``."""
        _check_format(state)
        agent = cls(
            obs_dim=int(state["obs_dim"]),
            action_dim=int(state["action_dim"]),
            action_low=float(state["action_low"]),
            action_high=float(state["action_high"]),
            config=PPOConfig.from_dict(state["config"]),
            device=device,
            seed=int(state["seed"]),
            layout=None if state.get("layout") is None else EntityLayout.from_dict(state["layout"]),
        )
        agent.load_state_dict(state)
        return agent

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


def _check_format(state: Mapping[str, Any]) -> None:
    found = state.get("format") if isinstance(state, Mapping) else None
    if found != STATE_FORMAT:
        raise SnapshotError(f"not a PPO agent snapshot: format is {found!r}, expected {STATE_FORMAT!r}")
