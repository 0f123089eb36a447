"""A tiny tournament on the toy task, shared by the tournament tests and the kill-test child process.

Real pieces only: :class:`podracer.ppo.PPOAgent` with a small network on
:class:`podracer.toy.TargetMatchingEnv`, scored on a fixed validation batch of the same task.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch

from podracer import Backend, Policy, Tournament, TournamentConfig
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

OBS_DIM = 4
ACTION_DIM = 2
NUM_ENVS = 16
EPISODE_LENGTH = 16
ACTION_LOW, ACTION_HIGH = 0.0, 1.0
TASK_SEED = 7
VALIDATION_SEED = 12345
VALIDATION_ROWS = 256
DEVICE = os.environ.get("PODRACER_TEST_DEVICE", "cpu")
"""Where the toy agents and envs live: ``cpu`` (CI), or ``cuda`` to run the same equality tests on a
GPU (``PODRACER_TEST_DEVICE=cuda pytest tests/engine/test_population.py``)."""

TINY_PPO = PPOConfig(
    rollout_steps=8,
    learning_rate=3e-3,
    update_epochs=2,
    num_minibatches=2,
    hidden_sizes=(16, 16),
    activation="tanh",
)
"""A PPO small and fast enough for many rounds a second: 8 x 16 = 128 env steps a round."""
ROUND_ENV_STEPS = TINY_PPO.rollout_steps * NUM_ENVS


def make_env(seed: int) -> TargetMatchingEnv:
    """A pod's training env (the task is fixed by ``TASK_SEED``; ``seed`` is unused by the toy task)."""
    del seed
    return TargetMatchingEnv(
        NUM_ENVS, OBS_DIM, ACTION_DIM, EPISODE_LENGTH, ACTION_LOW, ACTION_HIGH, TASK_SEED, DEVICE
    )


def make_agent(config: Any, seed: int) -> PPOAgent:
    """A PPO agent for the toy task."""
    return PPOAgent(OBS_DIM, ACTION_DIM, ACTION_LOW, ACTION_HIGH, config, DEVICE, seed)


class Validation:
    """Mean reward of a policy's actions on a fixed batch of the task's observations (higher is better)."""

    def __init__(self) -> None:
        self.env = make_env(0)
        generator = torch.Generator().manual_seed(VALIDATION_SEED)
        self.obs = torch.randn(VALIDATION_ROWS, OBS_DIM, generator=generator).to(DEVICE)

    def __call__(self, policy: Policy) -> float:
        with torch.no_grad():
            return float(self.env.reward(self.obs, policy(self.obs)).mean())


def tournament_config(**changes: Any) -> TournamentConfig:
    """A small tournament: 2 slots, 4 leaderboard entries, 40 rounds of budget."""
    base = TournamentConfig(
        pool_size=2,
        leaderboard_size=4,
        budget_env_steps=40 * ROUND_ENV_STEPS,
        budget_seconds=None,
        fresh_pod_prob=0.2,
        perturb_scale=0.25,
        softmax_temperature=1.0,
        eval_every_rounds=1,
        seed=0,
        lagging_rounds=2,
        max_consecutive_crashes=5,
    )
    return dataclasses.replace(base, **changes)


def new_tournament(run_dir: Path, config: TournamentConfig, backend: Backend | None = None) -> Tournament:
    """A fresh tournament of tiny PPO pods on the toy task."""
    return Tournament(config, run_dir, make_agent, TINY_PPO, make_env, Validation(), backend)


def resume_tournament(run_dir: Path, backend: Backend | None = None) -> Tournament:
    """Reopen a run directory made by :func:`new_tournament`."""
    return Tournament.resume(run_dir, make_agent, TINY_PPO, make_env, Validation(), backend)
