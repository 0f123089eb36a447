"""The engine's noisy entity-choice toy (:class:`podracer.toy.EntityChoiceEnv`) and a small
cross-sectional PPO for it, shared by the per-entity advantage and pathwise-term tests."""

from __future__ import annotations

import torch

from podracer.entity import EntityLayout
from podracer.population import train_population_round
from podracer.ppo import PPOAgent, PPOConfig
from podracer.toy import EntityChoiceEnv

ENTITIES = 16
LAYOUT = EntityLayout(
    num_entities=ENTITIES, entity_features=1, entity_extras=0, num_globals=1, action_globals=1
)
CHOICE_PPO = PPOConfig(
    policy="cross_sectional",
    advantages="entity",
    rollout_steps=8,
    learning_rate=3e-3,
    gamma=0.0,
    hidden_sizes=(16,),
    num_minibatches=4,
    update_epochs=4,
)
"""Per-entity advantages, no pathwise term (podracer's default)."""


def choice_agent(config: PPOConfig, seed: int) -> PPOAgent:
    """A cross-sectional agent for :data:`LAYOUT` (weights over a null slot and the entities)."""
    return PPOAgent(LAYOUT.obs_dim, LAYOUT.action_dim, 0.0, 1.0, config, "cpu", seed, layout=LAYOUT)


def choice_env(edge: float = 0.2, noise: float = 1.0) -> EntityChoiceEnv:
    """32 envs of :data:`ENTITIES` entities, 16-step episodes."""
    return EntityChoiceEnv(32, ENTITIES, edge, noise, 16, "cpu")


def trained_alone(config: PPOConfig, seed: int, rounds: int, edge: float = 0.2) -> PPOAgent:
    """A :func:`choice_agent` after ``rounds`` rounds on its own :func:`choice_env`."""
    agent, env = choice_agent(config, seed), choice_env(edge)
    for _ in range(rounds):
        agent.train_round(env)
    return agent


def assert_population_equals_pods_one_by_one(configs: list[PPOConfig], rounds: int = 4) -> None:
    """Pods of ``configs`` (seeds 3, 4, ...) trained as one population end with the parameters of
    the same pods trained one by one (float tolerance)."""
    alone = [choice_agent(config, 3 + index) for index, config in enumerate(configs)]
    population = [choice_agent(config, 3 + index) for index, config in enumerate(configs)]
    envs_alone = [choice_env() for _ in configs]
    envs_pop = [choice_env() for _ in configs]
    for _ in range(rounds):
        for agent, env in zip(alone, envs_alone, strict=True):
            agent.train_round(env)
        train_population_round(population, envs_pop)
    for one, other in zip(alone, population, strict=True):
        for a, b in zip(one.model.parameters(), other.model.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=0.0, atol=1e-5)
