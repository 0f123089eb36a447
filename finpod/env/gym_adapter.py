"""Gymnasium faces of :class:`TradingEnv`: a torch ``VectorEnv`` and a numpy adapter.

Both use gymnasium 1.x same-step autoreset (``metadata["autoreset_mode"] = AutoresetMode.SAME_STEP``):
the observation of a finished env is already its next episode's first, and
``info["final_obs"]`` ``(N, D)`` holds the observation reached, with ``info["_final_obs"]`` ``(N,)``
marking the envs that finished. ``reset(options={"reset_mask": mask})`` restarts only the envs
where the ``(N,)`` bool mask is true.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from finpod.env.trading_env import TradingEnv

RESET_MASK_OPTION = "reset_mask"
"""``reset`` option naming the ``(N,)`` bool mask of envs to restart (the others keep going)."""


class TorchVectorEnv(VectorEnv):
    """Gymnasium ``VectorEnv`` over a :class:`TradingEnv`, torch tensors in and out on its device.

    Args:
        env: the batched env to expose.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, env: TradingEnv) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = spaces.Box(-np.inf, np.inf, shape=(env.obs_dim,), dtype=np.float32)
        self.single_action_space = spaces.Box(
            env.action_low, env.action_high, shape=(env.action_dim,), dtype=np.float32
        )
        self.observation_space = batch_space(self.single_observation_space, env.num_envs)
        self.action_space = batch_space(self.single_action_space, env.num_envs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Restart every env (re-seeded when ``seed`` is given), or the masked ones (see module doc)."""
        super().reset(seed=seed)
        if options and RESET_MASK_OPTION in options:
            mask = torch.as_tensor(options[RESET_MASK_OPTION], dtype=torch.bool, device=self.env.device)
            return self.env.reset_envs(mask), {"bar_index": self.env.bar_index}
        return self.env.reset(seed=seed)

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """One step of every env; actions ``(N, A)`` (any array type torch can read)."""
        obs, reward, terminated, truncated, info = self.env.step(torch.as_tensor(actions))
        info["_final_obs"] = terminated | truncated
        return obs, reward, terminated, truncated, info


class NumpyVectorEnv(VectorWrapper):
    """Numpy adapter: numpy actions in, numpy observations, rewards, flags and info out (float32).

    Args:
        env: the torch vector env to adapt.
    """

    def __init__(self, env: TorchVectorEnv) -> None:
        super().__init__(env)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Restart every env (or the masked ones) and return numpy observations ``(N, D)`` and info."""
        obs, info = self.env.reset(seed=seed, options=options)
        return _to_numpy(obs), {key: _to_numpy(value) for key, value in info.items()}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every env with numpy actions ``(N, A)``."""
        obs, reward, terminated, truncated, info = self.env.step(
            torch.from_numpy(np.asarray(actions, np.float32))
        )
        return (
            _to_numpy(obs),
            _to_numpy(reward),
            _to_numpy(terminated),
            _to_numpy(truncated),
            {key: _to_numpy(value) for key, value in info.items()},
        )


def _to_numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()
