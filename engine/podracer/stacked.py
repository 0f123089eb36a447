"""``P`` PPO models of one architecture as one batched function, for populations of pods.

Shapes: ``P`` pods, ``b`` rows per pod, ``D`` observation size, ``A`` action size.

:class:`StackedModel` runs ``P`` models under ``torch.func.vmap`` / ``functional_call`` over their
parameters stacked along a pod axis (``torch.stack`` of each model's own parameters, so gradients
flow back to them): ``P`` small matmuls become one batched matmul. :class:`PopulationPolicy` is the
deterministic policies of ``P`` agents as one call (row ``p`` by agent ``p``), frozen.
:func:`structure_key` and :func:`check_population` say which agents may be stacked.
:mod:`podracer.population` trains with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

from podracer.distributions import BetaPolicyDistribution, LogisticNormalDistribution
from podracer.entity import CrossSectionalActorCritic
from podracer.errors import TournamentError
from podracer.networks import ActorCritic
from podracer.normalization import RunningMeanStd
from podracer.ppo import PPOAgent

STRUCTURE_FIELDS: tuple[str, ...] = (
    "policy",
    "advantages",
    "hidden_sizes",
    "activation",
    "rollout_steps",
    "update_epochs",
    "num_minibatches",
    "normalize_observations",
    "normalize_advantages",
    "obs_clip",
    "clip_value",
    "critic_features",
)
"""PPOConfig fields every pod of one population must share (the others may differ per pod)."""

Distribution = BetaPolicyDistribution | LogisticNormalDistribution
Params = dict[str, torch.Tensor]


def structure_key(agent: Any) -> tuple[Any, ...] | None:
    """What must match for agents to train in one population, or ``None`` if ``agent`` cannot at all.

    ``None`` for anything but a :class:`~podracer.ppo.PPOAgent`, and for one with learner fusion
    (an ``epoch_hook``): those train alone.
    """
    if type(agent) is not PPOAgent or agent.epoch_hook is not None:
        return None
    config = agent.config
    layout = None if agent.layout is None else tuple(sorted(agent.layout.to_dict().items()))
    return (
        *(getattr(config, name) for name in STRUCTURE_FIELDS),
        agent.obs_dim,
        agent.action_dim,
        agent.action_low,
        agent.action_high,
        str(agent.device),
        layout,
        config.forecast_coef > 0.0,  # a forecast head is a parameter the others lack
    )


class _Heads(nn.Module):
    """One model's distribution tensors and/or value in one call: what ``vmap`` maps over pods."""

    def __init__(
        self,
        model: ActorCritic | CrossSectionalActorCritic,
        with_dist: bool,
        with_value: bool,
        with_forecast: bool = False,
    ) -> None:
        super().__init__()
        self.net = model
        self.with_dist = with_dist
        self.with_value = with_value
        self.with_forecast = with_forecast

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not self.with_dist:
            return (self.net.value(obs),)
        if self.with_forecast:
            assert isinstance(self.net, CrossSectionalActorCritic)
            scores, value, forecast = self.net.distribution_value_and_forecast(obs)
            assert forecast is not None
            return (scores.loc, scores.log_std, value, forecast)
        if self.with_value:
            dist, value = self.net.distribution_and_value(obs)
        else:
            dist = self.net.distribution(obs)
        if isinstance(dist, BetaPolicyDistribution):
            out: tuple[torch.Tensor, ...] = (dist.alpha, dist.beta)
        else:
            out = (dist.loc, dist.log_std)
        return (*out, value) if self.with_value else out


class StackedModel:
    """``P`` models of one architecture as one batched function of their stacked parameters.

    Args:
        models: the pods' models (same class and parameter shapes), each an
            :class:`~podracer.networks.ActorCritic` or a
            :class:`~podracer.entity.CrossSectionalActorCritic`.
    """

    def __init__(self, models: Sequence[ActorCritic | CrossSectionalActorCritic]) -> None:
        self.models = list(models)
        template = self.models[0]
        self._beta = isinstance(template, ActorCritic)
        self._names = [name for name, _ in template.named_parameters()]
        self._calls = {
            (d, v): vmap(self._call(_Heads(template, d, v)))
            for d, v in ((True, False), (True, True), (False, True))
        }
        self._forecast_call = (
            vmap(self._call(_Heads(template, True, True, with_forecast=True)))
            if getattr(template, "forecast_head", None) is not None
            else None
        )

    @staticmethod
    def _call(heads: _Heads) -> Any:
        def call(params: Params, obs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return functional_call(heads, params, (obs,))

        return call

    def parameters(self) -> Params:
        """Every parameter stacked along a new pod axis ``(P, ...)``, differentiable to each model's own."""
        per_model = [dict(model.named_parameters()) for model in self.models]
        return {f"net.{name}": torch.stack([params[name] for params in per_model]) for name in self._names}

    def _distribution(self, tensors: Sequence[torch.Tensor]) -> Distribution:
        if self._beta:
            return BetaPolicyDistribution(tensors[0], tensors[1])
        return LogisticNormalDistribution(tensors[0], tensors[1])

    def distribution(self, params: Params, obs: torch.Tensor) -> Distribution:
        """The pods' action distributions for observations ``(P, b, D)``, batched as ``(P, b, A)``."""
        return self._distribution(self._calls[True, False](params, obs))

    def distribution_and_value(self, params: Params, obs: torch.Tensor) -> tuple[Distribution, torch.Tensor]:
        """Distributions ``(P, b, A)`` and values ``(P, b)`` in one batched call."""
        *tensors, values = self._calls[True, True](params, obs)
        return self._distribution(tensors), values

    def distribution_value_and_forecast(
        self, params: Params, obs: torch.Tensor
    ) -> tuple[Distribution, torch.Tensor, torch.Tensor]:
        """Distributions ``(P, b, A)``, values ``(P, b)`` and the forecast heads' outputs ``(P, b, M)``
        in one batched call (cross-sectional models with a forecast head only).

        Raises:
            TournamentError: the models have no forecast head.
        """
        if self._forecast_call is None:
            raise TournamentError("these models have no forecast head (forecast_coef = 0)")
        loc, log_std, values, forecast = self._forecast_call(params, obs)
        return self._distribution((loc, log_std)), values, forecast

    def value(self, params: Params, obs: torch.Tensor) -> torch.Tensor:
        """Values ``(P, b)`` for observations ``(P, b, D)``."""
        (values,) = self._calls[False, True](params, obs)
        return values

    def sample(self, dist: Distribution, generators: Sequence[torch.Generator]) -> torch.Tensor:
        """Raw actions ``(P, b, A)``: pod ``p``'s rows drawn from ``generators[p]`` as its own round would."""
        if isinstance(dist, BetaPolicyDistribution):
            rows = [
                BetaPolicyDistribution(a, b).sample(g)
                for a, b, g in zip(dist.alpha, dist.beta, generators, strict=True)
            ]
        else:
            rows = [
                LogisticNormalDistribution(loc, log_std).sample(g)
                for loc, log_std, g in zip(dist.loc, dist.log_std, generators, strict=True)
            ]
        return torch.stack(rows)


def check_population(agents: Sequence[PPOAgent]) -> None:
    """Refuse agents that cannot train as one population (see :func:`structure_key`).

    Raises:
        TournamentError: no agents, an agent that cannot join any population, or two that differ in
            a structural setting.
    """
    if not agents:
        raise TournamentError("a population round needs at least one agent")
    keys = {structure_key(agent) for agent in agents}
    if None in keys:
        raise TournamentError(
            "a population trains PPOAgents without learner fusion; train other agents with the local backend"
        )
    if len(keys) > 1:
        raise TournamentError(
            f"agents of one population must share {', '.join(STRUCTURE_FIELDS)}, whether they have a "
            "forecast head (forecast_coef > 0) and their env shape; group them by "
            "podracer.population.structure_key"
        )


class PopulationPolicy:
    """The deterministic policies of ``P`` agents as one batched call: row ``p`` is agent ``p``'s.

    Frozen at the agents' current weights and observation statistics (later learning does not
    change it). Observations ``(P, D)`` -> actions ``(P, A)`` in the agents' action box, each row
    equal to that agent's ``act(obs[p : p + 1], deterministic=True)`` to float32 rounding.

    Args:
        agents: ``P`` agents of one structure (:func:`structure_key`).
    """

    def __init__(self, agents: Sequence[PPOAgent]) -> None:
        check_population(agents)
        self.count = len(agents)
        self._model = StackedModel([agent.evaluation_model for agent in agents])
        with torch.no_grad():
            self._params = {name: value.detach().clone() for name, value in self._model.parameters().items()}
        config = agents[0].config
        self._clip = config.obs_clip if config.normalize_observations else None
        if self._clip is not None:
            constants = [agent.normalization_constants(torch.float32) for agent in agents]
            self._shift = torch.stack([c[0] for c in constants]).unsqueeze(1).clone()
            self._scale = torch.stack([c[1] for c in constants]).unsqueeze(1).clone()
        self._low, self._high = agents[0].action_low, agents[0].action_high

    @torch.no_grad()
    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(P B, A)`` for observations ``(P B, D)``: rows ``p B .. (p + 1) B - 1`` by agent
        ``p`` (``B = 1``: row ``p`` by agent ``p``)."""
        if obs.shape[0] == 0 or obs.shape[0] % self.count:
            raise TournamentError(
                f"a population policy of {self.count} agents needs a multiple of {self.count} rows "
                f"(a block per agent), got {obs.shape[0]}"
            )
        rows = obs.to(torch.float32).reshape(self.count, obs.shape[0] // self.count, obs.shape[-1])
        if self._clip is not None:
            rows = RunningMeanStd.rescale(rows, self._shift, self._scale, self._clip)
        dist = self._model.distribution(self._params, rows)
        unit = dist.squash(dist.mode())
        unit = unit.reshape(obs.shape[0], unit.shape[-1])
        if (self._low, self._high) == (0.0, 1.0):
            return unit
        return self._low + (self._high - self._low) * unit


def hyper_column(
    agents: Sequence[PPOAgent], name: str, device: torch.device, float64: bool = False
) -> torch.Tensor:
    """Hyper-parameter ``name`` of every agent as a ``(P,)`` tensor (float32, or float64): a
    population's per-pod hyper-parameters, as the batched computation reads them."""
    values = [float(getattr(agent.config, name)) for agent in agents]
    return torch.tensor(values, dtype=torch.float64 if float64 else torch.float32, device=device)


__all__ = [
    "STRUCTURE_FIELDS",
    "PopulationPolicy",
    "StackedModel",
    "check_population",
    "hyper_column",
    "structure_key",
]
