"""The gymnasium faces: VectorEnv API, same-step autoreset, spaces, numpy adapter, podracer protocol."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium.utils.env_match import data_equivalence
from gymnasium.vector import AutoresetMode, VectorEnv

from env.panels import random_panel
from finpod.env import EnvConfig, NumpyVectorEnv, TorchVectorEnv, TradingEnv
from finpod.env.shape import EnvShape
from podracer.api import TensorVectorEnv

PANEL = random_panel(num_bars=120, num_assets=4, num_features=2, seed=2)
NUM_ENVS = 5


def _numpy_env(config: EnvConfig) -> NumpyVectorEnv:
    return NumpyVectorEnv(TorchVectorEnv(TradingEnv(PANEL, "train", config, num_envs=NUM_ENVS, seed=9)))


def test_trading_env_satisfies_the_podracer_protocol() -> None:
    env = TradingEnv(PANEL, "train", EnvConfig(), num_envs=NUM_ENVS, seed=0)
    assert isinstance(env, TensorVectorEnv)
    assert (env.action_dim, env.action_low, env.action_high) == (PANEL.num_assets + 1, 0.0, 1.0)
    delta = TradingEnv(PANEL, "train", EnvConfig(action_mode="share_delta"), num_envs=NUM_ENVS, seed=0)
    assert (delta.action_dim, delta.action_low, delta.action_high) == (PANEL.num_assets, -1.0, 1.0)
    for built in (env, delta):  # the sizes an agent is built for are known without building an env
        shape = EnvShape.of(PANEL.num_assets, PANEL.num_features, built.config.action_mode)
        assert built.shape == shape
        assert (built.obs_dim, built.action_dim, built.layout) == (
            shape.obs_dim,
            shape.action_dim,
            shape.layout,
        )


def test_vector_env_api_and_same_step_autoreset() -> None:
    horizon = 4
    env = _numpy_env(EnvConfig(horizon_bars=horizon))
    assert isinstance(env.unwrapped, VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.num_envs == NUM_ENVS
    assert env.single_action_space.shape == (PANEL.num_assets + 1,)
    assert env.action_space.shape == (NUM_ENVS, PANEL.num_assets + 1)
    assert env.observation_space.shape == (NUM_ENVS, env.single_observation_space.shape[0])
    env.action_space.seed(0)
    obs, info = env.reset(seed=3)
    assert isinstance(obs, np.ndarray)
    assert obs.dtype == np.float32
    assert env.observation_space.contains(obs)
    for step in range(1, 2 * horizon + 1):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert reward.shape == terminated.shape == truncated.shape == (NUM_ENVS,)
        assert reward.dtype == np.float32
        assert terminated.dtype == truncated.dtype == np.bool_
        assert truncated.all() == (step % horizon == 0)
        np.testing.assert_array_equal(info["_final_obs"], terminated | truncated)
        finished = info["_final_obs"]
        np.testing.assert_array_equal(info["final_obs"][~finished], obs[~finished])
        assert (obs[finished, -2] == 1.0).all()  # a reset env holds only cash


def test_numpy_rollouts_are_reproducible_from_the_seed() -> None:
    def run() -> list[object]:
        env = _numpy_env(EnvConfig(horizon_bars=6))
        env.action_space.seed(1)
        out: list[object] = [env.reset(seed=4)]
        out += [env.step(env.action_space.sample()) for _ in range(15)]
        return out

    assert data_equivalence(run(), run(), exact=True)


def test_reset_mask_option_restarts_only_masked_envs() -> None:
    env = TorchVectorEnv(TradingEnv(PANEL, "train", EnvConfig(horizon_bars=30), num_envs=NUM_ENVS, seed=1))
    env.reset(seed=0)
    for _ in range(3):
        env.step(torch.rand(NUM_ENVS, PANEL.num_assets + 1))
    before = env.env.state
    mask = torch.tensor([False, True, False, False, True])
    obs, _ = env.reset(options={"reset_mask": mask})
    after = env.env.state
    assert torch.equal(after.t[~mask], before.t[~mask])
    assert torch.equal(after.shares[~mask], before.shares[~mask])
    assert not after.shares[mask].any()
    assert (obs[mask, -2] == 1.0).all()  # restarted envs hold only cash
