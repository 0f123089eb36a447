"""The registered gymnasium id: next-step autoreset reports every final observation and reward once."""

from __future__ import annotations

import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

import finpod

HORIZON = 5
NUM_ENVS = 3
STEPS = 4 * (HORIZON + 1) + 2


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gym")
    dataset = write_tiny_dataset(folder / "data", tiny_bars(seed=5))
    spec = tiny_spec(dataset).with_(env={"horizon_bars": HORIZON})
    path = folder / "tiny.toml"
    path.write_text(spec.to_toml(), encoding="utf-8")
    return path


def _constant_actions(space: gym.spaces.Box) -> np.ndarray:
    weights = np.full(space.shape, 1.0 / space.shape[-1], dtype=np.float32)
    return weights


def test_next_step_vector_env_reports_each_final_observation_and_reward_exactly_once(spec_file: Path) -> None:
    options = {"spec": str(spec_file), "segment": "validation", "random_start": False}
    reference = finpod.make_env(spec_file, num_envs=NUM_ENVS, array="numpy", **_without_spec(options))
    envs = gym.make_vec(finpod.GYM_ID, num_envs=NUM_ENVS, autoreset_mode="next_step", **options)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert reference.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    actions = _constant_actions(envs.action_space)
    first_obs, _ = envs.reset(seed=0)
    ref_first, _ = reference.reset(seed=0)
    np.testing.assert_array_equal(first_obs, ref_first)

    # What RLlib does: a step right after an env's episode ended is that env's reset step (gymnasium's
    # next-step autoreset); its action is ignored, its reward is 0 and it belongs to no episode.
    ref_rewards, ref_finals, rewards, finals, restarts = [], [], [], [], []
    ended = np.zeros(NUM_ENVS, dtype=bool)
    for _ in range(STEPS):
        obs, reward, terminated, truncated, _ = envs.step(actions)
        _r_obs, r_reward, r_term, r_trunc, r_info = reference.step(actions)
        ref_rewards.append(r_reward)
        ref_finals.extend(r_info["final_obs"][i] for i in np.flatnonzero(r_term | r_trunc))
        assert not terminated.any()
        restarted = ended
        assert not (truncated & restarted).any()
        np.testing.assert_array_equal(reward[restarted], 0.0)
        for i in np.flatnonzero(restarted):
            np.testing.assert_array_equal(obs[i], first_obs[i])  # the new episode's first observation
        restarts.append(restarted)
        rewards.append(reward)
        finals.extend(obs[i] for i in np.flatnonzero(truncated))
        ended = terminated | truncated
    rewards_by_env = np.stack(rewards).T
    restarts_by_env = np.stack(restarts).T
    ref_by_env = np.stack(ref_rewards).T
    for env in range(NUM_ENVS):
        # without the restart steps, the next-step stream is the same-step stream, reward for reward:
        # every reward once, none lost to a reset, none repeated
        kept = rewards_by_env[env][~restarts_by_env[env]]
        np.testing.assert_array_equal(kept, ref_by_env[env][: len(kept)])
        assert restarts_by_env[env].sum() == (STEPS - 1) // (HORIZON + 1)
    # every finished episode's last observation, once, in order, equal to the same-step env's
    # ``final_obs`` (which never sees restart steps, so it has finished at least as many episodes)
    assert len(finals) == NUM_ENVS * (STEPS // (HORIZON + 1))
    assert len(ref_finals) >= len(finals)
    for got, want in zip(finals, ref_finals[: len(finals)], strict=True):
        np.testing.assert_array_equal(got, want)


def test_single_env_gym_make_episode_then_reset(spec_file: Path) -> None:
    env = gym.make(finpod.GYM_ID, spec=str(spec_file), segment="validation", random_start=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*infinity.*")  # features are unbounded by design
        check_env(env.unwrapped)  # gymnasium's own conformance checks (seeding, spaces, step API)
    obs, info = env.reset(seed=1)
    assert obs.shape == env.observation_space.shape
    assert info["bar_index"] >= 0
    action = _constant_actions(env.action_space)
    for step in range(1, HORIZON + 1):
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(reward, float)
        assert not terminated
        assert truncated == (step == HORIZON)
        assert info["equity_usd"] > 0
    again, _ = env.reset()
    assert again.shape == obs.shape


def test_unknown_autoreset_mode_is_one_line(spec_file: Path) -> None:
    with pytest.raises(finpod.SpecError, match=r"autoreset_mode 'disabled'.*same_step"):
        finpod.make_env(spec_file, num_envs=1, autoreset_mode="disabled")


def _without_spec(options: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in options.items() if key != "spec"}
