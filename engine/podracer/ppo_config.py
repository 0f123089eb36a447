"""PPO's hyper-parameters: :class:`PPOConfig`, its checks, and what follows from it alone.

:class:`podracer.ppo.PPOAgent` learns with them; :func:`podracer.ppo_update.ppo_update` and
:mod:`podracer.population` read them. ``from podracer.ppo import PPOConfig`` keeps working.
What follows from them: the learning rate at a step (:func:`learning_rate_at`), whether a round
fills its minibatches (:func:`check_round_size`), and the networks and optimiser an agent of given
sizes builds (:func:`build_model`, :func:`build_optimizer`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

import torch

from podracer.adam import FusedAdam
from podracer.entity import CrossSectionalActorCritic, EntityLayout
from podracer.errors import PodracerError
from podracer.networks import Activation, ActorCritic

LrSchedule = Literal["constant", "linear", "budget"]
"""``constant``: always ``learning_rate``; ``linear``: decays to 0 at ``total_env_steps`` (the agent's
own env steps, a lineage's in a tournament); ``budget``: decays to 0 as a tournament's budget is
spent (the share of it spent when each round starts; :func:`learning_rate_at`)."""
LR_SCHEDULES: tuple[str, ...] = get_args(LrSchedule)

PolicyKind = Literal["mlp", "cross_sectional"]
"""``mlp``: flat actor and critic MLPs over the whole observation, a Beta per action dimension
(:class:`podracer.networks.ActorCritic`); ``cross_sectional``: shared per-entity encoders, pooled
context, softmax-of-Gaussian-scores weights (:class:`podracer.entity.CrossSectionalActorCritic`);
needs an :class:`podracer.entity.EntityLayout`."""
POLICY_KINDS: tuple[str, ...] = ("mlp", "cross_sectional")

AdvantageKind = Literal["joint", "entity"]
"""``joint``: one GAE advantage per transition for the whole action; ``entity``: one per entity score
of a ``cross_sectional`` policy, from the per-entity outcomes the env reports
(:mod:`podracer.entity_advantage`)."""
ADVANTAGE_KINDS: tuple[str, ...] = ("joint", "entity")

CriticFeatures = Literal["own", "actor"]
"""What a ``cross_sectional`` critic reads: ``own``: its own per-entity encoder, pooled (as the actor
is built); ``actor``: the actor's pooled context, with the actor's gradient stopped (the value loss
trains the critic's head only), so the critic costs a head per row instead of a second encoder over
every entity: about a third of a round's work at ``M = 100`` (:mod:`podracer.entity`)."""
CRITIC_FEATURES: tuple[str, ...] = ("own", "actor")

MIN_MINIBATCH_SIZE = 2
"""Transitions a minibatch needs at least (advantage normalisation takes a standard deviation)."""


class AgentError(PodracerError, ValueError):
    """A PPO agent was configured or used wrongly: an invalid hyper-parameter, or an env of another shape."""


@dataclass(frozen=True)
class PPOConfig:
    """Every hyper-parameter of :class:`PPOAgent`, with its unit or meaning.

    Attributes:
        rollout_steps: env steps collected per env per round (``T``); a round yields ``T * N``
            transitions.
        gamma: discount factor per env step, in ``(0, 1]``.
        gae_lambda: GAE bias/variance trade-off, in ``[0, 1]`` (1 = Monte Carlo returns).
        learning_rate: Adam step size at the start of training.
        lr_schedule: ``"constant"``, ``"linear"`` (decays to 0 at ``total_env_steps``) or
            ``"budget"`` (decays to 0 as the tournament's budget is spent; :data:`LrSchedule`).
        total_env_steps: env steps over which the ``linear`` schedule decays (unused by ``constant``).
        update_epochs: passes over each round's transitions.
        num_minibatches: minibatches per pass (minibatch size is ``T * N / num_minibatches``).
        clip_coef: PPO ratio clip range ``epsilon`` (the ratio is kept within ``1 +- epsilon``).
        clip_value: whether the value loss is clipped around the rollout's value estimates.
        value_clip_coef: half-width of that value clip, in units of discounted reward.
        entropy_coef: weight of the entropy bonus in the loss (nats to loss units).
        value_coef: weight of the value loss in the loss.
        max_grad_norm: global L2 norm the gradient is clipped to before each step.
        normalize_advantages: standardise advantages per minibatch (zero mean, unit variance).
        normalize_observations: normalise observations with running per-feature mean and variance.
        obs_clip: normalised observations are clipped to ``[-obs_clip, obs_clip]`` (standard deviations).
        hidden_sizes: hidden-layer widths of the actor and of the critic MLPs (``cross_sectional``:
            of the shared per-entity encoders; the last width is also the heads' hidden width).
        activation: hidden-layer nonlinearity (``tanh``, ``relu`` or ``elu``).
        adam_eps: Adam's denominator epsilon.
        target_kl: stop a round's remaining epochs once the mean approximate KL of an epoch exceeds
            this (nats); ``None`` never stops early.
        policy: the network and action distribution (:data:`PolicyKind`).
        h_term_coef: weight ``lambda`` of the H-term, one extra policy step per update epoch over
            the best recent whole trajectories (:mod:`podracer.hterm`); 0 turns it off.
        h_term_trajectories: trajectories (each ``rollout_steps`` long) the H-term keeps and
            steps on; its extra work per round is about ``h_term_trajectories / N`` of PPO's.
        advantages: how the policy loss credits the action (:data:`AdvantageKind`); ``entity``
            needs ``policy = "cross_sectional"`` and an env that reports per-entity outcomes.
        eval_average: decay per round of an exponential moving average of the network's parameters
            (Polyak averaging), in ``[0, 1)``: the deterministic policy that evaluation scores,
            snapshots and trades uses the average, while training keeps the current weights
            (:mod:`podracer.eval_average`). 0 evaluates the current weights.
        pathwise_coef: weight of the pathwise term, the step reward's own gradient through the
            mode's entity weights (:mod:`podracer.pathwise`; needs ``advantages = "entity"`` and
            an env that reports holdings and cost rates); 0 turns it off.
        pathwise_risk: the pathwise term's tracking-error aversion (dimensionless, >= 0): the
            optimal tilt over the uniform weight, in units of that weight, is the predicted
            outcome in standard deviations over ``pathwise_risk``.
        pathwise_cost: the pathwise term's aversion to rotating the book (dimensionless, >= 0):
            trades that move weight between entities count ``pathwise_cost`` times the cost the
            env reports, trades that only change how much is invested their cost; 1 is the cost
            the env charges, above 1 the policy rotates less than the step's own reward would have
            it (a guard against trading on forecast noise; :mod:`podracer.pathwise`).
        critic_features: what the critic reads (:data:`CriticFeatures`); ``actor`` needs policy
            ``cross_sectional``.
        forecast_coef: weight of an auxiliary forecast loss (:mod:`podracer.forecast`): a linear
            head on the actor's per-entity encodings regresses each entity's outcome this step,
            cross-sectionally demeaned and in minibatch standard deviations, so the shared encoder
            learns what predicts the outcomes from every entity of every row (needs
            ``advantages = "entity"``); 0 turns it off (and the network has no forecast head).
        weight_decay: decoupled weight decay (AdamW, Loshchilov and Hutter 2019) per optimiser step,
            relative to the step size: each step first multiplies every parameter by
            ``1 - learning_rate * weight_decay``; 0 is plain Adam. It keeps a network that sees the
            same train rows for many epochs from fitting their noise.
        obs_noise: standard deviation of Gaussian noise added to the normalised entity features
            of every observation a round collects (:func:`podracer.normalization.add_feature_noise`;
            ``cross_sectional``: the ``M * F`` feature columns, not the extras or globals; ``mlp``:
            every column), drawn from the agent's generator and kept in the rollout, so the update
            learns from the observations the actions were taken on. A validation or backtest pass
            never adds it. Like input-noise training in supervised learning (Bishop 1995), it keeps
            a network that sees the same train rows for many epochs from fitting their noise;
            0 turns it off.
    """

    rollout_steps: int = 64
    gamma: float = 0.99
    gae_lambda: float = 0.95
    learning_rate: float = 3e-4
    lr_schedule: LrSchedule = "constant"
    total_env_steps: int = 10_000_000
    update_epochs: int = 4
    num_minibatches: int = 16
    clip_coef: float = 0.2
    clip_value: bool = True
    value_clip_coef: float = 0.2
    entropy_coef: float = 0.0
    value_coef: float = 0.5
    max_grad_norm: float = 0.5
    normalize_advantages: bool = True
    normalize_observations: bool = True
    obs_clip: float = 10.0
    hidden_sizes: tuple[int, ...] = (512, 512)
    activation: Activation = "relu"
    adam_eps: float = 1e-5
    target_kl: float | None = None
    policy: PolicyKind = "mlp"
    h_term_coef: float = 0.0
    h_term_trajectories: int = 32
    advantages: AdvantageKind = "joint"
    eval_average: float = 0.0
    pathwise_coef: float = 0.0
    pathwise_risk: float = 0.01
    pathwise_cost: float = 1.0
    critic_features: CriticFeatures = "own"
    forecast_coef: float = 0.0
    weight_decay: float = 0.0
    obs_noise: float = 0.0

    PERTURBABLE: ClassVar[dict[str, tuple[float, float]]] = {
        "learning_rate": (1e-5, 3e-3),
        "entropy_coef": (0.0, 0.05),
        "clip_coef": (0.05, 0.4),
        "gae_lambda": (0.8, 1.0),
        "gamma": (0.9, 0.9999),
        "value_coef": (0.1, 1.0),
        "h_term_coef": (0.0, 0.0),
        "pathwise_risk": (0.01, 0.01),
        "pathwise_cost": (1.0, 1.0),
        "weight_decay": (0.0, 0.0),
    }
    """Float fields a tournament may perturb, with their allowed ``(min, max)``. ``h_term_coef`` is
    pinned at its start value by default (measured: no narrower seed spread, x1.4 wall time a round;
    BENCHMARKS "H-term"): a spec searches it with ``perturb_bounds = {h_term_coef = [0.0, 0.25]}``.
    ``pathwise_risk`` is pinned too (a domain's choice: how concentrated the optimum of the pathwise
    term is); a spec searches it with e.g. ``perturb_bounds = {pathwise_risk = [0.002, 0.02]}``, and
    so is ``pathwise_cost`` (searched with e.g. ``{pathwise_cost = [1.0, 8.0]}``).
    ``weight_decay`` is pinned as well (searched with e.g. ``{weight_decay = [0.3, 3.0]}``)."""
    PERTURB_SPACES: ClassVar[dict[str, str]] = {
        "gamma": "log1m",
        "gae_lambda": "log1m",
        "entropy_coef": "linear",
        "h_term_coef": "linear",
        "weight_decay": "linear",
    }
    """Spaces of the perturbation steps (others: ``log``): the horizon ``1 / (1 - gamma)`` moves by a
    factor, and an entropy or H-term weight or a weight decay of 0 can move (see
    :mod:`podracer.generator`)."""

    def __post_init__(self) -> None:
        """Reject values PPO cannot run with; each message names the field and the allowed range."""
        positive_ints = (
            "rollout_steps",
            "total_env_steps",
            "update_epochs",
            "num_minibatches",
            "h_term_trajectories",
        )
        for name in positive_ints:
            if int(getattr(self, name)) < 1:
                raise AgentError(f"PPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        ranges = {
            "gamma": (0.0, 1.0),
            "gae_lambda": (0.0, 1.0),
            "clip_coef": (0.0, None),
            "value_clip_coef": (0.0, None),
            "entropy_coef": (0.0, None),
            "value_coef": (0.0, None),
            "learning_rate": (0.0, None),
            "max_grad_norm": (0.0, None),
            "obs_clip": (0.0, None),
            "adam_eps": (0.0, None),
            "h_term_coef": (0.0, None),
            "pathwise_coef": (0.0, None),
            "pathwise_risk": (0.0, None),
            "pathwise_cost": (0.0, None),
            "forecast_coef": (0.0, None),
            "weight_decay": (0.0, None),
            "obs_noise": (0.0, None),
        }
        for name, (low, high) in ranges.items():
            value = float(getattr(self, name))
            if value < low or (high is not None and value > high) or value != value:
                bound = f"[{low}, {high}]" if high is not None else f">= {low}"
                raise AgentError(f"PPOConfig.{name} must be in {bound}, got {value}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise AgentError(
                f"PPOConfig.lr_schedule must be 'constant', 'linear' or 'budget', got {self.lr_schedule!r}"
            )
        if self.policy not in POLICY_KINDS:
            raise AgentError(f"PPOConfig.policy must be 'mlp' or 'cross_sectional', got {self.policy!r}")
        if self.advantages not in ADVANTAGE_KINDS:
            raise AgentError(f"PPOConfig.advantages must be 'joint' or 'entity', got {self.advantages!r}")
        if self.advantages == "entity" and self.policy != "cross_sectional":
            raise AgentError(
                f"PPOConfig.advantages 'entity' needs policy 'cross_sectional', got policy {self.policy!r}"
            )
        if self.pathwise_coef > 0.0 and self.advantages != "entity":
            raise AgentError(
                f"PPOConfig.pathwise_coef > 0 needs advantages 'entity', got advantages {self.advantages!r}"
            )
        if self.forecast_coef > 0.0 and self.advantages != "entity":
            raise AgentError(
                f"PPOConfig.forecast_coef > 0 needs advantages 'entity', got advantages {self.advantages!r}"
            )
        if self.critic_features not in CRITIC_FEATURES:
            raise AgentError(
                f"PPOConfig.critic_features must be 'own' or 'actor', got {self.critic_features!r}"
            )
        if self.critic_features == "actor" and self.policy != "cross_sectional":
            raise AgentError(
                "PPOConfig.critic_features 'actor' needs policy 'cross_sectional', "
                f"got policy {self.policy!r}"
            )
        if self.activation not in ("tanh", "relu", "elu"):
            raise AgentError(f"PPOConfig.activation must be 'tanh', 'relu' or 'elu', got {self.activation!r}")
        if not self.hidden_sizes or any(int(h) < 1 for h in self.hidden_sizes):
            raise AgentError(
                f"PPOConfig.hidden_sizes must be non-empty positive widths, got {self.hidden_sizes}"
            )
        if not 0.0 <= float(self.eval_average) < 1.0:
            raise AgentError(f"PPOConfig.eval_average must be in [0, 1), got {self.eval_average}")
        if self.target_kl is not None and not self.target_kl > 0.0:
            raise AgentError(f"PPOConfig.target_kl must be > 0 or None, got {self.target_kl}")

    @property
    def uses_step_outcomes(self) -> bool:
        """Whether a round keeps the env's per-entity outcomes, holdings and cost rates (the pathwise
        term's inputs; the forecast loss's target)."""
        return self.pathwise_coef > 0.0 or self.forecast_coef > 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (``hidden_sizes`` as a list) for snapshots and logs."""
        plain = dataclasses.asdict(self)
        plain["hidden_sizes"] = list(self.hidden_sizes)
        return plain

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> PPOConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error (a snapshot from another version)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise AgentError(f"PPOConfig has no field(s) {unknown}; known: {sorted(known)}")
        plain = dict(values)
        if "hidden_sizes" in plain:
            plain["hidden_sizes"] = tuple(int(h) for h in plain["hidden_sizes"])
        return cls(**plain)


PPOConfig.__module__ = "podracer.ppo"
"""Its public home: stored run and leaderboard records name it ``podracer.ppo:PPOConfig``, as they did
before it moved here, so runs written earlier still resume."""


def learning_rate_at(config: PPOConfig, env_steps: int, budget_spent: float = 0.0) -> float:
    """Learning rate for a round that starts after ``env_steps`` env steps of training, when a share
    ``budget_spent`` in ``[0, 1]`` of the tournament's budget is spent (0 outside a tournament).

    ``constant``: ``learning_rate``. ``linear``: ``learning_rate * max(0, 1 - env_steps / total_env_steps)``.
    ``budget``: ``learning_rate * max(0, 1 - budget_spent)``.
    """
    if config.lr_schedule == "constant":
        return config.learning_rate
    if config.lr_schedule == "budget":
        return config.learning_rate * max(0.0, 1.0 - budget_spent)
    remaining = max(0.0, 1.0 - env_steps / config.total_env_steps)
    return config.learning_rate * remaining


def check_round_size(batch: int, num_minibatches: int) -> None:
    """Refuse a round of ``batch`` transitions too small for ``num_minibatches`` minibatches.

    Raises:
        AgentError: fewer than :data:`MIN_MINIBATCH_SIZE` transitions per minibatch.
    """
    if batch < MIN_MINIBATCH_SIZE * num_minibatches:
        raise AgentError(
            f"a round of {batch} transitions cannot fill {num_minibatches} minibatches of at least "
            f"{MIN_MINIBATCH_SIZE}; raise rollout_steps or num_envs, or lower num_minibatches"
        )


def build_model(
    config: PPOConfig, obs_dim: int, action_dim: int, layout: EntityLayout | None, seed: int
) -> ActorCritic | CrossSectionalActorCritic:
    """The actor-critic ``config.policy`` names, initialised from ``seed`` (on the CPU).

    Raises:
        AgentError: ``cross_sectional`` without a ``layout``, or with one of other sizes.
    """
    if config.policy == "mlp":
        return ActorCritic(obs_dim, action_dim, config.hidden_sizes, config.activation, seed)
    if layout is None:
        raise AgentError(
            "policy 'cross_sectional' needs an EntityLayout of the observation; pass layout= "
            "or use policy 'mlp'"
        )
    if (layout.obs_dim, layout.action_dim) != (obs_dim, action_dim):
        raise AgentError(
            f"entity layout describes obs_dim={layout.obs_dim}, action_dim={layout.action_dim}; "
            f"the agent has {obs_dim}, {action_dim}"
        )
    return CrossSectionalActorCritic(
        layout,
        config.hidden_sizes,
        config.activation,
        seed,
        critic_features=config.critic_features,
        forecast_head=config.forecast_coef > 0.0,
    )


def build_optimizer(model: torch.nn.Module, config: PPOConfig) -> FusedAdam:
    """A fresh Adam over ``model``'s parameters at ``config``'s learning rate, eps and decoupled weight
    decay: :class:`~podracer.adam.FusedAdam`, torch's fused kernel (one call per step over all
    parameters, on the CPU and CUDA) with ``torch.optim.Adam``'s state dict; with
    ``weight_decay = 0`` it is plain Adam."""
    return FusedAdam(
        model.parameters(),
        lr=config.learning_rate,
        eps=config.adam_eps,
        weight_decay=config.weight_decay,
        decoupled_weight_decay=True,
    )


def set_optimizer_hypers(
    optimizer: FusedAdam | torch.optim.Optimizer, config: PPOConfig, learning_rate: float
) -> None:
    """Write ``learning_rate`` and ``config``'s eps and weight decay into every parameter group (a
    round's scheduled rate, or a perturbed config's values; the moments are kept)."""
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
        group["eps"] = config.adam_eps
        group["weight_decay"] = config.weight_decay
        group["decoupled_weight_decay"] = True


__all__ = [
    "ADVANTAGE_KINDS",
    "CRITIC_FEATURES",
    "MIN_MINIBATCH_SIZE",
    "POLICY_KINDS",
    "AdvantageKind",
    "AgentError",
    "CriticFeatures",
    "LrSchedule",
    "PPOConfig",
    "PolicyKind",
    "build_model",
    "build_optimizer",
    "check_round_size",
    "learning_rate_at",
    "set_optimizer_hypers",
]
