"""A cross-sectional critic that reads the actor's pooled context (``critic_features = "actor"``).

The value loss must train the critic's head only (the actor learns as it would with its own
critic), the combined call must equal the separate ones, snapshots must carry the choice, the
population backend must train such pods as they would train alone, and a wrong value gets a
one-line error with the fix.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from podracer.entity import CrossSectionalActorCritic, EntityLayout, LayoutError
from podracer.population import structure_key, train_population_round
from podracer.ppo import AgentError, PPOAgent, PPOConfig
from podracer.toy import TargetMatchingEnv

LAYOUT = EntityLayout(num_entities=4, entity_features=3, entity_extras=1, num_globals=2, action_globals=1)
CONFIG = PPOConfig(
    policy="cross_sectional",
    rollout_steps=8,
    learning_rate=1e-2,
    update_epochs=2,
    num_minibatches=2,
    hidden_sizes=(8, 8),
    critic_features="actor",
)


def _agent(config: PPOConfig, seed: int) -> PPOAgent:
    return PPOAgent(LAYOUT.obs_dim, LAYOUT.action_dim, 0.0, 1.0, config, "cpu", seed, layout=LAYOUT)


def _env() -> TargetMatchingEnv:
    return TargetMatchingEnv(8, LAYOUT.obs_dim, LAYOUT.action_dim, 5, 0.0, 1.0, 3, "cpu")


def _obs(rows: int = 5) -> torch.Tensor:
    return torch.randn(rows, LAYOUT.obs_dim, generator=torch.Generator().manual_seed(7))


def test_the_critic_has_no_encoder_and_its_loss_never_reaches_the_actor() -> None:
    net = CrossSectionalActorCritic(LAYOUT, (8, 8), "relu", 0, critic_features="actor")
    own = CrossSectionalActorCritic(LAYOUT, (8, 8), "relu", 0)
    assert net.critic_encoder is None
    assert not any(name.startswith("critic_encoder") for name, _ in net.named_parameters())
    assert sum(p.numel() for p in net.parameters()) < sum(p.numel() for p in own.parameters())
    _dist, value = net.distribution_and_value(_obs())
    value.square().sum().backward()
    for name, parameter in net.named_parameters():
        reached = parameter.grad is not None and bool(parameter.grad.abs().sum() > 0)
        assert reached == name.startswith("critic_head"), name
    assert net.matmul_flops_per_row()[0] < own.matmul_flops_per_row()[0]


def test_the_combined_call_equals_the_separate_ones() -> None:
    for features in ("own", "actor"):
        net = CrossSectionalActorCritic(LAYOUT, (8, 8), "relu", 3, critic_features=features)
        obs = _obs()
        dist, value = net.distribution_and_value(obs)
        torch.testing.assert_close(dist.loc, net.distribution(obs).loc)
        torch.testing.assert_close(value, net.value(obs))


def test_an_agent_learns_and_its_snapshot_carries_the_choice(tmp_path: Path) -> None:
    agent = _agent(CONFIG, 0)
    env = _env()
    before = agent.model.critic_head[-1].weight.detach().clone()
    for _ in range(3):
        stats = agent.train_round(env)
    assert torch.isfinite(torch.as_tensor(stats.metrics["value_loss"]))
    assert not torch.equal(before, agent.model.critic_head[-1].weight)
    restored = PPOAgent.from_state_dict(agent.state_dict())
    assert restored.config.critic_features == "actor"
    assert restored.model.critic_encoder is None
    obs = _obs()
    torch.testing.assert_close(restored.act(obs), agent.act(obs))


def test_a_population_of_such_pods_trains_as_they_would_alone() -> None:
    configs = [CONFIG, dataclasses.replace(CONFIG, learning_rate=3e-3, gamma=0.9)]
    alone = [_agent(config, index) for index, config in enumerate(configs)]
    population = [_agent(config, index) for index, config in enumerate(configs)]
    envs_alone, envs_pop = [_env(), _env()], [_env(), _env()]
    for _ in range(4):
        for agent, env in zip(alone, envs_alone, strict=True):
            agent.train_round(env)
        train_population_round(population, envs_pop)
    for one, other in zip(alone, population, strict=True):
        pairs = zip(one.model.parameters(), other.model.parameters(), strict=True)
        assert max(float((a - b).abs().max().detach()) for a, b in pairs) < 1e-5


def test_pods_with_either_critic_cannot_share_a_population() -> None:
    assert structure_key(_agent(CONFIG, 0)) != structure_key(
        _agent(dataclasses.replace(CONFIG, critic_features="own"), 0)
    )


def test_bad_values_are_refused_with_the_fix() -> None:
    with pytest.raises(AgentError, match="critic_features must be 'own' or 'actor'"):
        PPOConfig(policy="cross_sectional", critic_features="shared")  # type: ignore[arg-type]
    with pytest.raises(AgentError, match="'actor' needs policy 'cross_sectional'"):
        PPOConfig(policy="mlp", critic_features="actor")
    with pytest.raises(LayoutError, match="critic_features"):
        CrossSectionalActorCritic(LAYOUT, (8,), "relu", 0, critic_features="both")


def test_weights_of_the_other_critic_kind_are_refused_with_a_snapshot_error() -> None:
    from podracer.errors import SnapshotError

    own = _agent(dataclasses.replace(CONFIG, critic_features="own"), 0)
    with pytest.raises(SnapshotError, match="critic_features='actor'"):
        own.load_weights_from(_agent(CONFIG, 1).state_dict(), keep_optimizer=False)


def test_layouts_without_extras_or_globals_and_the_frozen_policy_agree() -> None:
    from podracer.frozen_entity import FrozenCrossSectionalPolicy

    for extras, globals_, k in ((0, 0, 0), (0, 2, 1), (1, 0, 0)):
        layout = EntityLayout(
            num_entities=3, entity_features=2, entity_extras=extras, num_globals=globals_, action_globals=k
        )
        for features in ("own", "actor"):
            net = CrossSectionalActorCritic(layout, (8,), "relu", 0, critic_features=features)
            obs = torch.randn(4, layout.obs_dim, generator=torch.Generator().manual_seed(2))
            dist, value = net.distribution_and_value(obs)
            assert value.shape == (4,)
            frozen = FrozenCrossSectionalPolicy(net, None, None, 10.0, 0.0, 1.0)
            torch.testing.assert_close(frozen(obs), dist.squash(dist.mode()))


def test_a_rollout_takes_its_values_from_the_policy_calls_not_a_second_encoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the actor's context the values come with each step's policy call (``value`` is never
    called for the rollout's rows, only for the bootstrap rows after it), and equal the critic's
    values of the stored observations."""
    agent = _agent(CONFIG, 0)
    assert agent.model.value_with_policy
    assert not _agent(dataclasses.replace(CONFIG, critic_features="own"), 0).model.value_with_policy
    rows_valued: list[int] = []
    real_value = CrossSectionalActorCritic.value

    def counting_value(self: CrossSectionalActorCritic, obs: torch.Tensor) -> torch.Tensor:
        rows_valued.append(obs.shape[0])
        return real_value(self, obs)

    monkeypatch.setattr(CrossSectionalActorCritic, "value", counting_value)
    env = _env()
    rollout, _ = agent.collect(env)
    assert sum(rows_valued) < CONFIG.rollout_steps * env.num_envs  # the bootstrap rows only
    with torch.no_grad():
        expected = real_value(agent.model, rollout.obs.flatten(0, 1)).view_as(rollout.values)
    torch.testing.assert_close(rollout.values, expected)
