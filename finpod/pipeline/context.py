"""What one run reads from its spec and market again and again, built once: the run context."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.shape import EnvShape
from finpod.env.trading_env import TradingEnv
from finpod.pipeline.training import TRAIN_SEGMENT, agent_factory
from finpod.spec import Spec
from podracer.api import AgentFactory


@dataclass(frozen=True)
class RunContext:
    """A run's env settings, sizes and agent factory, for every phase that trains, loads or scores
    its agents (the tournament, selection, the backtest, a rerun, paper trading, a benchmark).

    Attributes:
        spec: the run's spec.
        device: where envs and agents run.
        shape: the env's sizes (observation, action, entity layout), from the panel's assets and
            features: the same for the selection and the backtest panel.
        train_config: env settings of training episodes (random starts, ``horizon_bars`` long).
        eval_config: env settings of one pass over a segment (validation, backtest, paper trading).
        agent_factory: ``(PPOConfig, seed) -> PPOAgent`` sized for :attr:`shape`, on :attr:`device`.
        entity_info: whether training envs report per-asset outcomes and costs (the agent's
            advantages are per asset; a structure field, the same for every pod).
    """

    spec: Spec
    device: torch.device
    shape: EnvShape
    train_config: EnvConfig
    eval_config: EnvConfig
    agent_factory: AgentFactory
    entity_info: bool

    @classmethod
    def of(cls, spec: Spec, panel: Panel, device: torch.device) -> RunContext:
        """The context of a run of ``spec`` on ``panel``'s assets and features, on ``device``."""
        shape = EnvShape.of(panel.num_assets, panel.num_features, spec.env.action_mode)
        return cls(
            spec=spec,
            device=device,
            shape=shape,
            train_config=spec.env_config(random_start=True),
            eval_config=spec.env_config(random_start=False),
            agent_factory=agent_factory(shape, device),
            entity_info=spec.agent_config().advantages == "entity",
        )

    def train_env(self, panel: Panel, seed: int) -> TradingEnv:
        """A pod's training envs: ``env.num_envs`` episodes with random starts in ``panel``'s train
        segment, their start bars drawn from ``seed``."""
        return TradingEnv(
            panel,
            TRAIN_SEGMENT,
            self.train_config,
            self.spec.env.num_envs,
            seed,
            self.device,
            entity_info=self.entity_info,
        )
