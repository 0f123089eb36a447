"""Gymnasium faces of :class:`TradingEnv`: a torch ``VectorEnv`` and a numpy adapter.

Two gymnasium 1.x autoreset modes (``metadata["autoreset_mode"]``, gymnasium's ``AutoresetMode``):

- ``SAME_STEP`` (finpod's native mode): the observation of a finished env is already its next
  episode's first; ``info["final_obs"]`` ``(N, D)`` holds the observation reached, with
  ``info["_final_obs"]`` ``(N,)`` marking the envs that finished.
- ``NEXT_STEP`` (gymnasium's default, what RLlib and most libraries assume): the step that ends an
  episode returns that episode's last observation, reward and flags; the NEXT step of that env
  ignores its action and returns the new episode's first observation with reward 0 and both
  flags false. Every final observation and reward is reported exactly once.

``reset(options={"reset_mask": mask})`` restarts only the envs where the ``(N,)`` bool mask is true.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError

RESET_MASK_OPTION = "reset_mask"
"""``reset`` option naming the ``(N,)`` bool mask of envs to restart (the others keep going)."""


class TorchVectorEnv(VectorEnv):
    """Gymnasium ``VectorEnv`` over a :class:`TradingEnv`, torch tensors in and out on its device.

    Args:
        env: the batched env to expose.
        autoreset_mode: ``AutoresetMode.SAME_STEP`` (default) or ``AutoresetMode.NEXT_STEP``
            (see the module doc); the strings ``"same_step"`` / ``"next_step"`` work too.
    """

    def __init__(
        self, env: TradingEnv, autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP
    ) -> None:
        self.autoreset_mode = autoreset_mode_of(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode}
        self._restart_next: torch.Tensor | None = None
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
            if self._restart_next is not None:
                self._restart_next = self._restart_next & ~mask
            return self.env.reset_envs(mask), {"bar_index": self.env.bar_index}
        self._restart_next = None
        return self.env.reset(seed=seed)

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """One step of every env; actions ``(N, A)`` (any array type torch can read)."""
        obs, reward, terminated, truncated, info = self.env.step(torch.as_tensor(actions))
        done = terminated | truncated
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            info["_final_obs"] = done
            return obs, reward, terminated, truncated, info
        restart = self._restart_next
        if restart is not None and bool(restart.any()):
            # These envs ended their episode on the previous step: this step opens the next one.
            # TradingEnv had already restarted them and stepped them with an action gymnasium says
            # to ignore, so restart them once more and report the new episode's first observation.
            first = self.env.reset_envs(restart)
            keep = ~restart
            obs = torch.where(restart[:, None], first, info["final_obs"])
            reward = torch.where(restart, torch.zeros_like(reward), reward)
            terminated, truncated = terminated & keep, truncated & keep
            done = done & keep
        else:
            obs = info["final_obs"]
        del info["final_obs"]  # next-step mode reports the final observation as ``obs`` itself
        self._restart_next = done
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


def autoreset_mode_of(mode: AutoresetMode | str) -> AutoresetMode:
    """``AutoresetMode.SAME_STEP`` / ``NEXT_STEP`` from the enum, its value or ``same_step``/``next_step``.

    Raises:
        SpecError: any other mode (``DISABLED`` is not offered: the env always restarts itself).
    """
    names = {"same_step": AutoresetMode.SAME_STEP, "next_step": AutoresetMode.NEXT_STEP}
    if isinstance(mode, AutoresetMode) and mode in names.values():
        return mode
    key = str(mode).lower().replace("-", "_")
    by_value = {m.value.lower(): m for m in names.values()}
    chosen = names.get(key) or by_value.get(key.replace("_", ""))
    if chosen is None:
        raise SpecError(f"autoreset_mode {mode!r}: unknown; fix: use 'same_step' or 'next_step'")
    return chosen


def _to_numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()
