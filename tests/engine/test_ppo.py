"""PPO: it learns the toy task, its pieces match hand computations, and its snapshots round-trip."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from podracer.api import Agent, deterministic_policy
from podracer.entity import EntityLayout
from podracer.errors import SnapshotError
from podracer.networks import ActorCritic, BetaPolicyDistribution
from podracer.ppo import (
    AgentError,
    PPOAgent,
    PPOConfig,
    RunningMeanStd,
    bootstrap_truncated,
    compute_gae,
    learning_rate_at,
)
from podracer.toy import TargetMatchingEnv

OBS_DIM, ACTION_DIM = 4, 3
SMALL = PPOConfig(
    rollout_steps=16,
    gamma=0.9,
    gae_lambda=0.95,
    learning_rate=1e-3,
    lr_schedule="constant",
    total_env_steps=1_000_000,
    update_epochs=4,
    num_minibatches=4,
    clip_coef=0.2,
    clip_value=True,
    value_clip_coef=0.2,
    entropy_coef=0.0,
    value_coef=0.5,
    max_grad_norm=0.5,
    normalize_advantages=True,
    normalize_observations=True,
    obs_clip=10.0,
    hidden_sizes=(64, 64),
    activation="tanh",
    adam_eps=1e-5,
    target_kl=None,
)


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """These tensors are tiny: one intra-op thread is faster, and on a busy box several threads
    spin against each other (the learning test runs 10x slower with two threads under load)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def toy_env(num_envs: int = 256, low: float = 0.0, high: float = 1.0) -> TargetMatchingEnv:
    return TargetMatchingEnv(num_envs, OBS_DIM, ACTION_DIM, 16, low, high, task_seed=0, device="cpu")


def toy_agent(config: PPOConfig = SMALL, seed: int = 0, low: float = 0.0, high: float = 1.0) -> PPOAgent:
    return PPOAgent(OBS_DIM, ACTION_DIM, low, high, config, device="cpu", seed=seed)


# ---------------------------------------------------------------- learning


def test_ppo_learns_the_toy_task() -> None:
    """Seed 0, CPU, 60 rounds x 16 steps x 256 envs = 245,760 env steps (a few seconds): the greedy
    policy closes at least 90% of the gap between a uniform-random policy and the optimum (0)."""
    env, agent = toy_env(), toy_agent()
    probe = toy_env(num_envs=4096)
    obs, _ = probe.reset(seed=123)
    random_policy = probe.uniform_policy_reward(obs).mean().item()
    threshold = 0.9 * (0.0 - random_policy) + random_policy
    before = probe.reward(obs, agent.act(obs)).mean().item()
    for _ in range(60):
        agent.train_round(env)
    after = probe.reward(obs, agent.act(obs)).mean().item()
    assert agent.env_steps == 245_760
    assert before < threshold
    assert after >= threshold, f"greedy reward {after:.4f} < {threshold:.4f} (random {random_policy:.4f})"


def test_round_stats_and_counters() -> None:
    env = toy_env(num_envs=32)
    agent: Agent = toy_agent()
    stats = agent.train_round(env)
    assert stats.env_steps == 16 * 32
    assert stats.seconds > 0
    assert agent.env_steps == 16 * 32
    assert isinstance(agent, PPOAgent)
    assert agent.policy_version == 1
    expected = {
        "mean_reward",
        "episodes_finished",
        "mean_episode_return",
        "policy_loss",
        "value_loss",
        "entropy",
        "approx_kl",
        "clip_fraction",
        "explained_variance",
        "learning_rate",
        "epochs_run",
    }
    assert set(stats.metrics) == expected
    assert all(isinstance(v, float) for v in stats.metrics.values())
    assert stats.metrics["episodes_finished"] == 32  # 16 steps per episode, random start: once each
    agent.train_round(env)
    assert agent.policy_version == 2


def test_actions_respect_asymmetric_bounds() -> None:
    agent = toy_agent(low=-2.0, high=3.0)
    obs = torch.randn(512, OBS_DIM, generator=torch.Generator().manual_seed(0)) * 100
    for deterministic in (True, False):
        actions = agent.act(obs, deterministic=deterministic)
        assert actions.shape == (512, ACTION_DIM)
        assert (actions >= -2.0).all()
        assert (actions <= 3.0).all()


def test_train_round_continues_the_env_and_resets_a_new_one() -> None:
    class CountingEnv(TargetMatchingEnv):
        resets = 0

        def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
            self.resets += 1
            return super().reset(seed=seed)

    env = CountingEnv(8, OBS_DIM, ACTION_DIM, 16, 0.0, 1.0, task_seed=0, device="cpu")
    agent = toy_agent()
    agent.train_round(env)
    agent.train_round(env)
    assert env.resets == 1
    other = CountingEnv(8, OBS_DIM, ACTION_DIM, 16, 0.0, 1.0, task_seed=0, device="cpu")
    agent.train_round(other)
    assert other.resets == 1


def test_env_with_other_shapes_is_refused() -> None:
    env = TargetMatchingEnv(8, OBS_DIM + 1, ACTION_DIM, 16, 0.0, 1.0, task_seed=0, device="cpu")
    with pytest.raises(AgentError, match="obs_dim=5"):
        toy_agent().train_round(env)


def test_a_round_too_small_for_the_minibatches_is_refused() -> None:
    agent = toy_agent(dataclasses.replace(SMALL, rollout_steps=1, num_minibatches=4))
    with pytest.raises(AgentError, match="a round of 4 transitions cannot fill 4 minibatches of at least 2"):
        agent.train_round(toy_env(num_envs=4))
    assert float(agent.obs_stats.count) == 0.0  # refused before it stepped the env or merged statistics


def test_target_kl_stops_epochs_early() -> None:
    agent = toy_agent(dataclasses.replace(SMALL, target_kl=1e-9, learning_rate=1e-2))
    stats = agent.train_round(toy_env(num_envs=64))
    assert stats.metrics["epochs_run"] == 1
    assert toy_agent().train_round(toy_env(num_envs=64)).metrics["epochs_run"] == SMALL.update_epochs


# ---------------------------------------------------------------- GAE and truncation


def test_gae_matches_a_hand_computation() -> None:
    gamma, lam = 0.9, 0.8
    rewards = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, -1.0]])
    values = torch.tensor([[0.5, 1.0], [1.0, 2.0], [1.5, 0.0]])
    ends = torch.tensor([[False, False], [True, False], [False, False]])
    last = torch.tensor([2.0, 4.0])
    advantages, returns = compute_gae(rewards, values, ends, last, gamma, lam)

    # env 0: the episode ends after step 1, so step 1 neither bootstraps nor carries step 2's advantage.
    d2 = 3.0 + gamma * 2.0 - 1.5
    d1 = 2.0 - 1.0
    d0 = 1.0 + gamma * 1.0 - 0.5
    a2, a1 = d2, d1
    a0 = d0 + gamma * lam * a1
    # env 1: one episode throughout.
    e2 = -1.0 + gamma * 4.0 - 0.0
    e1 = 1.0 + gamma * 0.0 - 2.0
    e0 = 0.0 + gamma * 2.0 - 1.0
    b2 = e2
    b1 = e1 + gamma * lam * b2
    b0 = e0 + gamma * lam * b1
    expected = torch.tensor([[a0, b0], [a1, b1], [a2, b2]])
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + values)


def test_truncation_bootstraps_and_termination_does_not() -> None:
    rewards = torch.tensor([[1.0, 1.0, 1.0, 1.0]])
    truncated = torch.tensor([[True, False, True, False]])
    terminated = torch.tensor([[False, True, True, False]])
    final_values = torch.tensor([[10.0, 20.0, 30.0, 40.0]])
    out = bootstrap_truncated(rewards, truncated, terminated, final_values, gamma=0.5)
    torch.testing.assert_close(out, torch.tensor([[6.0, 1.0, 1.0, 1.0]]))


class ScriptedEnv:
    """Two envs, reward 1 per step; after step 1 env 0 is truncated and env 1 terminated."""

    num_envs, obs_dim, action_dim = 2, OBS_DIM, ACTION_DIM
    action_low, action_high = 0.0, 1.0
    device = torch.device("cpu")

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        self.t = 0
        return torch.zeros(2, OBS_DIM), {}

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        self.t += 1
        ended = self.t == 2
        truncated = torch.tensor([ended, False])
        terminated = torch.tensor([False, ended])
        obs = torch.full((2, OBS_DIM), float(self.t))
        return obs, torch.ones(2), terminated, truncated, {"final_obs": obs + 100.0}


def test_collect_bootstraps_truncated_episodes_with_the_critic() -> None:
    config = dataclasses.replace(
        SMALL, rollout_steps=3, gamma=0.5, gae_lambda=1.0, normalize_observations=False
    )
    agent = toy_agent(config)
    head = agent.model.critic[-1]
    assert isinstance(head, torch.nn.Linear)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(4.0)  # V(s) = 4 everywhere
    rollout, _ = agent.collect(ScriptedEnv())
    # Step 1: env 0 truncated -> 1 + 0.5 * V(final_obs) = 3; env 1 terminated -> 1.
    torch.testing.assert_close(rollout.rewards, torch.tensor([[1.0, 1.0], [3.0, 1.0], [1.0, 1.0]]))
    # GAE with lambda = 1: step 2 bootstraps from V(last obs) = 4; the episode boundary cuts after step 1.
    a2 = 1.0 + 0.5 * 4.0 - 4.0
    expected = torch.tensor(
        [[1.0 + 0.5 * 3.0 - 4.0, 1.0 + 0.5 * 1.0 - 4.0], [3.0 - 4.0, 1.0 - 4.0], [a2, a2]]
    )
    torch.testing.assert_close(rollout.advantages, expected)


# ---------------------------------------------------------------- learning-rate schedule


def test_learning_rate_schedules() -> None:
    linear = dataclasses.replace(SMALL, lr_schedule="linear", learning_rate=1e-3, total_env_steps=1000)
    assert learning_rate_at(linear, 0) == pytest.approx(1e-3)
    assert learning_rate_at(linear, 250) == pytest.approx(7.5e-4)
    assert learning_rate_at(linear, 1000) == 0.0
    assert learning_rate_at(linear, 5000) == 0.0
    assert learning_rate_at(SMALL, 10**9) == SMALL.learning_rate


def test_linear_schedule_is_applied_each_round() -> None:
    config = dataclasses.replace(SMALL, lr_schedule="linear", total_env_steps=16 * 32 * 4)
    agent, env = toy_agent(config), toy_env(num_envs=32)
    seen = [agent.train_round(env).metrics["learning_rate"] for _ in range(3)]
    assert seen == pytest.approx([1e-3, 7.5e-4, 5e-4])
    assert agent.optimizer.param_groups[0]["lr"] == pytest.approx(5e-4)


# ---------------------------------------------------------------- determinism and snapshots


def test_same_seed_same_training_other_seed_different() -> None:
    runs = []
    for seed in (3, 3, 4):
        agent = toy_agent(seed=seed)
        metrics = [agent.train_round(toy_env(num_envs=32)).metrics["policy_loss"] for _ in range(2)]
        runs.append((metrics, agent.model.state_dict()))
    (m_a, w_a), (m_b, w_b), (m_c, w_c) = runs
    assert m_a == m_b
    assert all(torch.equal(w_a[k], w_b[k]) for k in w_a)
    assert m_a != m_c
    assert not torch.equal(w_a["actor.0.weight"], w_c["actor.0.weight"])


def test_state_dict_round_trip_through_torch_load_weights_only(tmp_path: Path) -> None:
    agent, env = toy_agent(seed=5), toy_env(num_envs=32)
    agent.train_round(env)
    agent.train_round(env)
    path = tmp_path / "agent.pt"
    torch.save(agent.state_dict(), path)
    restored = PPOAgent.from_state_dict(torch.load(path, weights_only=True), device="cpu")

    obs = torch.randn(64, OBS_DIM, generator=torch.Generator().manual_seed(1))
    assert torch.equal(restored.act(obs), agent.act(obs))
    assert torch.equal(restored.act(obs, deterministic=False), agent.act(obs, deterministic=False))
    assert (restored.env_steps, restored.policy_version) == (agent.env_steps, agent.policy_version)
    assert restored.config == agent.config

    # Resuming continues exactly as the original would (fresh env objects for both).
    after_original = agent.train_round(toy_env(num_envs=32)).metrics
    after_restored = restored.train_round(toy_env(num_envs=32)).metrics
    assert after_original == after_restored


def test_a_snapshot_from_another_device_type_loads_with_a_reproducible_generator() -> None:
    agent = toy_agent(seed=6)
    agent.train_round(toy_env(num_envs=32))
    state = agent.state_dict()
    state["rng_device_type"] = "cuda"  # what a GPU-trained snapshot carries: a 16-byte Philox state
    state["rng_state"] = torch.zeros(16, dtype=torch.uint8)
    first, second = PPOAgent.from_state_dict(state), PPOAgent.from_state_dict(state)
    obs = torch.randn(32, OBS_DIM, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first.act(obs), agent.act(obs))
    assert torch.equal(first.act(obs, deterministic=False), second.act(obs, deterministic=False))


def test_load_weights_into_an_agent_with_other_hyper_parameters() -> None:
    leader = toy_agent(seed=1)
    leader.train_round(toy_env(num_envs=32))
    perturbed = dataclasses.replace(SMALL, learning_rate=2e-4, entropy_coef=0.01)
    child = toy_agent(perturbed, seed=2)
    child.load_weights_from(leader.state_dict(), keep_optimizer=True)
    obs = torch.randn(16, OBS_DIM, generator=torch.Generator().manual_seed(2))
    assert torch.equal(child.act(obs), leader.act(obs))
    assert child.config.learning_rate == 2e-4
    assert child.optimizer.param_groups[0]["lr"] == 2e-4
    assert (
        child.optimizer.state_dict()["state"][0]["step"] == leader.optimizer.state_dict()["state"][0]["step"]
    )
    fresh = toy_agent(perturbed, seed=2)
    fresh.load_weights_from(leader.state_dict(), keep_optimizer=False)
    assert fresh.optimizer.state_dict()["state"] == {}
    assert fresh.env_steps == 0


def test_incompatible_or_foreign_snapshots_are_refused() -> None:
    state = toy_agent().state_dict()
    wider = toy_agent(dataclasses.replace(SMALL, hidden_sizes=(32, 32)))
    with pytest.raises(SnapshotError, match=r"hidden_sizes=\(64, 64\)"):
        wider.load_weights_from(state, keep_optimizer=False)
    other_activation = toy_agent(dataclasses.replace(SMALL, activation="relu"))
    with pytest.raises(SnapshotError, match="activation='tanh'"):
        other_activation.load_weights_from(state, keep_optimizer=False)
    with pytest.raises(SnapshotError, match="config differs"):
        toy_agent(dataclasses.replace(SMALL, learning_rate=1e-4)).load_state_dict(state)
    with pytest.raises(SnapshotError, match="not a PPO agent snapshot"):
        toy_agent().load_state_dict({"weights": torch.zeros(3)})


# ---------------------------------------------------------------- config


def test_config_round_trips_as_plain_values() -> None:
    plain = SMALL.to_dict()
    assert plain["hidden_sizes"] == [64, 64]
    assert PPOConfig.from_dict(plain) == SMALL
    with pytest.raises(AgentError, match="no field"):
        PPOConfig.from_dict({**plain, "lr": 1.0})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gamma", 1.5, r"gamma must be in \[0.0, 1.0\]"),
        ("learning_rate", -1.0, "learning_rate must be in >= 0.0"),
        ("rollout_steps", 0, "rollout_steps must be >= 1"),
        ("lr_schedule", "cosine", "lr_schedule must be 'constant', 'linear' or 'budget'"),
        ("activation", "gelu", "activation must be"),
        ("hidden_sizes", (), "hidden_sizes must be non-empty"),
        ("target_kl", 0.0, "target_kl must be > 0 or None"),
    ],
)
def test_bad_config_values_are_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(AgentError, match=message):
        dataclasses.replace(SMALL, **{field: value})


def test_perturbable_fields_are_float_fields_with_sane_ranges() -> None:
    floats = {f.name for f in dataclasses.fields(PPOConfig) if f.type in ("float", float)}
    # searched only when a spec's perturb_bounds open them (h_term_coef's default [0, 0])
    pinned = {"h_term_coef", "pathwise_risk", "pathwise_cost", "weight_decay"}
    for name, (low, high) in PPOConfig.PERTURBABLE.items():
        assert name in floats
        assert low < high or (name in pinned and low == high)
        dataclasses.replace(SMALL, **{name: low})
        dataclasses.replace(SMALL, **{name: high})


# ---------------------------------------------------------------- networks


def test_beta_distribution_matches_torch() -> None:
    generator = torch.Generator().manual_seed(0)
    alpha = 1.0 + 3.0 * torch.rand(5, 3, generator=generator)
    beta = 1.0 + 3.0 * torch.rand(5, 3, generator=generator)
    ours = BetaPolicyDistribution(alpha, beta)
    reference = torch.distributions.Beta(alpha, beta)
    unit = ours.sample(generator)
    assert ((unit > 0) & (unit < 1)).all()
    torch.testing.assert_close(ours.log_prob(unit), reference.log_prob(unit).sum(-1))
    torch.testing.assert_close(ours.entropy(), reference.entropy().sum(-1))
    torch.testing.assert_close(ours.mean(), reference.mean)


def test_matmul_flop_count() -> None:
    net = ActorCritic(obs_dim=10, action_dim=3, hidden_sizes=(8, 4), activation="relu", seed=0)
    total, first = net.matmul_flops_per_row()
    actor = 2 * (10 * 8 + 8 * 4 + 4 * 6)
    critic = 2 * (10 * 8 + 8 * 4 + 4 * 1)
    assert total == actor + critic
    assert first == 2 * (2 * 10 * 8)
    agent = toy_agent()
    per_row, first_layers = agent.model.matmul_flops_per_row()
    transitions = SMALL.rollout_steps * 100
    expected = per_row * transitions + (3 * per_row - first_layers) * transitions * SMALL.update_epochs
    assert agent.learner_flops_per_round(num_envs=100) == expected


def _uncached_act(agent: PPOAgent, obs: torch.Tensor) -> torch.Tensor:
    """``act`` as it was before the normalisation constants were cached (recomputed per call)."""
    normalized = RunningMeanStd.standardize(
        obs, agent.obs_stats.mean, agent.obs_stats.var, agent.config.obs_clip
    )
    with torch.no_grad():
        dist = agent.model.distribution(normalized)
        return agent.action_low + (agent.action_high - agent.action_low) * dist.squash(dist.mode())


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-2.0, 3.0)])
def test_cached_normalisation_follows_every_change_of_the_statistics(bounds: tuple[float, float]) -> None:
    low, high = bounds
    agent, other = toy_agent(low=low, high=high), toy_agent(seed=1, low=low, high=high)
    obs = torch.randn(5, OBS_DIM, generator=torch.Generator().manual_seed(0))
    assert torch.equal(agent.act(obs), _uncached_act(agent, obs))
    agent.train_round(toy_env(32, low, high))  # merges the round's observations into the statistics
    with torch.inference_mode():  # as the evaluation loops run it
        assert torch.equal(agent.act(obs), _uncached_act(agent, obs))
    other.obs_stats.merge(
        obs.sum(0).double() * 7, obs.square().sum(0).double() * 9, torch.tensor(5.0).double()
    )
    agent.load_state_dict(other.state_dict())
    assert torch.equal(agent.act(obs), other.act(obs))
    assert torch.equal(agent.act(obs), _uncached_act(other, obs))


def test_evaluation_policy_is_act_frozen_at_the_weights_it_was_made_from() -> None:
    agent = toy_agent(dataclasses.replace(SMALL, hidden_sizes=(512, 512)))
    env = toy_env(32)
    agent.train_round(env)
    obs = torch.randn(7, OBS_DIM, generator=torch.Generator().manual_seed(0))
    policy = deterministic_policy(agent)
    frozen = policy(obs)
    torch.testing.assert_close(frozen, agent.act(obs), rtol=1e-5, atol=1e-6)  # float32 rounding apart
    for row in range(obs.shape[0]):  # a row alone gives what it gives in a batch... to rounding
        torch.testing.assert_close(policy(obs[row : row + 1]), frozen[row : row + 1], rtol=1e-5, atol=1e-6)
    assert torch.equal(policy(obs), frozen)  # deterministic
    agent.train_round(env)
    assert torch.equal(policy(obs), frozen)  # a snapshot: learning does not reach it
    assert not torch.equal(deterministic_policy(agent)(obs), frozen)


def test_evaluation_policy_of_the_cross_sectional_network_is_act_bit_for_bit() -> None:
    layout = EntityLayout(num_entities=3, entity_features=2, entity_extras=1, num_globals=2, action_globals=1)
    config = dataclasses.replace(SMALL, policy="cross_sectional", hidden_sizes=(16,))
    agent = PPOAgent(layout.obs_dim, layout.action_dim, 0.0, 1.0, config, device="cpu", seed=0, layout=layout)
    agent.obs_stats.merge(
        torch.arange(11.0).double(), torch.arange(11.0).double() ** 2 + 3, torch.tensor(2.0).double()
    )
    obs = torch.randn(4, layout.obs_dim, generator=torch.Generator().manual_seed(1))
    assert torch.equal(deterministic_policy(agent)(obs), agent.act(obs))
