"""The toy task: a batched env with a known optimum, conforming to the engine's env seam."""

from __future__ import annotations

import pytest
import torch

from podracer.api import TensorVectorEnv
from podracer.toy import TargetMatchingEnv


def make_env(
    num_envs: int = 64, episode_length: int = 5, low: float = -2.0, high: float = 3.0
) -> TargetMatchingEnv:
    return TargetMatchingEnv(num_envs, 4, 3, episode_length, low, high, task_seed=7, device="cpu")


def test_satisfies_the_env_protocol() -> None:
    env = make_env()
    assert isinstance(env, TensorVectorEnv)
    obs, info = env.reset(seed=0)
    assert obs.shape == (64, 4)
    assert obs.dtype == torch.float32
    assert info == {}
    obs, reward, terminated, truncated, info = env.step(env.optimal_actions(obs))
    assert obs.shape == (64, 4)
    assert reward.shape == terminated.shape == truncated.shape == (64,)
    assert terminated.dtype == truncated.dtype == torch.bool
    assert info["final_obs"].shape == (64, 4)


def test_optimal_actions_score_zero_and_lie_in_the_box() -> None:
    env = make_env()
    obs, _ = env.reset(seed=1)
    best = env.optimal_actions(obs)
    assert (best >= env.action_low).all()
    assert (best <= env.action_high).all()
    _, reward, *_ = env.step(best)
    torch.testing.assert_close(reward, torch.zeros(64))


def test_any_other_action_scores_below_zero_and_at_least_minus_one() -> None:
    env = make_env()
    env.reset(seed=2)
    corner = torch.full((64, 3), env.action_high)
    _, reward, *_ = env.step(corner)
    assert (reward < 0).all()
    assert (reward >= -1).all()


def test_uniform_policy_reward_matches_monte_carlo() -> None:
    env = make_env(num_envs=8)
    obs, _ = env.reset(seed=3)
    draws = 20_000
    generator = torch.Generator().manual_seed(0)
    unit = torch.rand(draws, 8, 3, generator=generator)
    actions = env.action_low + (env.action_high - env.action_low) * unit
    sampled = torch.stack([env.reward(obs, a) for a in actions]).mean(0)
    torch.testing.assert_close(sampled, env.uniform_policy_reward(obs), atol=5e-3, rtol=0)


def test_every_env_is_truncated_once_per_episode_and_never_terminated() -> None:
    env = make_env(num_envs=32, episode_length=5)
    obs, _ = env.reset(seed=4)
    truncations = torch.zeros(32, dtype=torch.long)
    for _ in range(5 * 4):
        obs, _, terminated, truncated, info = env.step(env.optimal_actions(obs))
        assert not terminated.any()
        assert torch.equal(info["final_obs"], obs)
        truncations += truncated.long()
    assert torch.equal(truncations, torch.full((32,), 4))


def test_reset_starts_envs_at_different_steps() -> None:
    env = make_env(num_envs=64, episode_length=5)
    obs, _ = env.reset(seed=5)
    first_truncation_step = torch.full((64,), -1)
    for step in range(5):
        obs, _, _, truncated, _ = env.step(env.optimal_actions(obs))
        first_truncation_step = torch.where(
            truncated & (first_truncation_step < 0), torch.tensor(step), first_truncation_step
        )
    assert (first_truncation_step >= 0).all()
    assert first_truncation_step.unique().numel() == 5


def test_same_seed_same_observations_other_seed_different() -> None:
    env_a, env_b = make_env(), make_env()
    obs_a, _ = env_a.reset(seed=9)
    obs_b, _ = env_b.reset(seed=9)
    assert torch.equal(obs_a, obs_b)
    assert torch.equal(
        env_a.step(env_a.optimal_actions(obs_a))[0], env_b.step(env_b.optimal_actions(obs_b))[0]
    )
    assert not torch.equal(env_a.reset(seed=10)[0], env_b.reset(seed=9)[0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, "must all be >= 1"),
        ({"episode_length": 0}, "must all be >= 1"),
        ({"action_low": 1.0, "action_high": 1.0}, "action_high must exceed action_low"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, float], message: str) -> None:
    args: dict[str, float] = {"num_envs": 4, "episode_length": 3, "action_low": 0.0, "action_high": 1.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        TargetMatchingEnv(
            int(args["num_envs"]),
            2,
            2,
            int(args["episode_length"]),
            args["action_low"],
            args["action_high"],
            task_seed=0,
            device="cpu",
        )
