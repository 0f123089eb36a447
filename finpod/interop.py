"""A spec's trading env for other code: ``finpod.make_env`` and the registered gymnasium ids.

Registered when ``finpod`` is imported:

- ``finpod/Trading-v0``: ``gym.make(...)`` gives :class:`TradingGymEnv`, one portfolio as a
  ``gymnasium.Env`` (numpy in and out); ``gym.make_vec(..., num_envs=N)`` gives the batched env as
  a gymnasium ``VectorEnv`` (numpy by default, ``array="torch"`` for tensors on the device).

Both take the keyword arguments of :func:`make_env` (``spec`` is required), e.g.::

    import finpod, gymnasium as gym
    envs = gym.make_vec("finpod/Trading-v0", num_envs=16, spec="strategies/demo.toml",
                        autoreset_mode="next_step")   # gymnasium's default mode, as RLlib expects
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from finpod.env.gym_adapter import NumpyVectorEnv, TorchVectorEnv
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError
from finpod.paths import default_data_root
from finpod.pipeline.inputs import backtest_panel, dataset_for, load_bars, selection_panel, universe_symbols
from finpod.rundir import load_spec_file
from finpod.spec import Spec

SEGMENTS = ("train", "validation", "backtest")
Segment = Literal["train", "validation", "backtest"]


def make_env(
    spec: Spec | str | Path,
    *,
    segment: Segment = "train",
    num_envs: int | None = None,
    device: str | None = None,
    seed: int = 0,
    random_start: bool | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
    array: Literal["torch", "numpy"] = "torch",
    data_root: str | Path | None = None,
) -> VectorEnv:
    """The spec's batched trading env on one segment, as a gymnasium ``VectorEnv``.

    The observations are the ones a run's agents see (features normalised on the spec's train
    segment); ``env.unwrapped.env`` is the underlying :class:`~finpod.env.TradingEnv`.

    Args:
        spec: a :class:`Spec` or a spec file.
        segment: ``"train"`` or ``"validation"`` (built without any backtest bar), or
            ``"backtest"`` (the full panel: trading it is looking at the held-out period).
        num_envs: ``N`` parallel portfolios (default: the spec's ``env.num_envs``).
        device: ``"cpu"`` or ``"cuda"`` (default: the spec's device).
        seed: seeds the random episode starts.
        random_start: random start bars within the segment (default: only on ``train``); else
            every episode starts at the segment's first bar and runs ``horizon_bars``. Episodes on
            ``train`` start with the spec's ``env.start_portfolio``; on the other segments in cash.
        autoreset_mode: ``"same_step"`` (finpod's) or ``"next_step"`` (gymnasium's default).
        array: ``"torch"`` (tensors on ``device``) or ``"numpy"`` (numpy arrays, float32).
        data_root: where a synthetic spec's market is cached (default ``./data``).

    Raises:
        SpecError: a bad segment, array type or autoreset mode; DataError: bad data.
    """
    resolved = spec if isinstance(spec, Spec) else load_spec_file(spec)  # a run's spec: as it trained
    if segment not in SEGMENTS:
        raise SpecError(f"segment {segment!r}: unknown; fix: use one of {', '.join(SEGMENTS)}")
    if array not in ("torch", "numpy"):
        raise SpecError(f"array {array!r}: unknown; fix: use 'torch' or 'numpy'")
    where = torch.device(device or resolved.resolve_device())
    bars = load_bars(dataset_for(resolved, Path(data_root) if data_root else default_data_root()))
    symbols = universe_symbols(resolved, bars)
    build = backtest_panel if segment == "backtest" else selection_panel
    panel = build(resolved, bars, symbols, str(where))
    config = dataclasses.replace(  # env.start_portfolio is for the train segment's episodes only
        resolved.env_config(random_start=True),
        random_start=segment == "train" if random_start is None else random_start,
        start_portfolio=resolved.env.start_portfolio if segment == "train" else "cash",
    )
    batch = resolved.env.num_envs if num_envs is None else num_envs
    vector = TorchVectorEnv(TradingEnv(panel, segment, config, batch, seed, where), autoreset_mode)
    return NumpyVectorEnv(vector) if array == "numpy" else vector


def make_vector_env(num_envs: int = 1, **kwargs: Any) -> VectorEnv:
    """The ``vector_entry_point`` of ``finpod/Trading-v0``: :func:`make_env`, numpy arrays by default."""
    kwargs.setdefault("array", "numpy")
    kwargs.pop("max_episode_steps", None)
    return make_env(num_envs=num_envs, **kwargs)


class TradingGymEnv(gym.Env[np.ndarray, np.ndarray]):
    """One portfolio of a spec's trading env as a ``gymnasium.Env`` (numpy float32 in and out).

    ``step`` returns the episode's last observation when it ends (``truncated`` true: the horizon
    or the segment's end); call ``reset`` then. Keyword arguments: those of :func:`make_env`.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("num_envs", None)
        vector = make_env(num_envs=1, array="torch", **kwargs)
        if not isinstance(vector, TorchVectorEnv):  # make_env(array="torch") returns one
            raise SpecError("internal: expected the torch vector env")
        self._env: TradingEnv = vector.env
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(self._env.obs_dim,), dtype=np.float32)
        self.action_space = spaces.Box(
            self._env.action_low, self._env.action_high, shape=(self._env.action_dim,), dtype=np.float32
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode; returns the observation ``(D,)`` and ``{"bar_index": int}``."""
        super().reset(seed=seed)
        obs, info = self._env.reset(seed=seed)
        return obs[0].cpu().numpy(), {"bar_index": int(info["bar_index"][0])}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One bar: action ``(A,)``; info has ``equity_usd``, ``cash_usd``, ``cost_usd``, ``bar_index``."""
        batch = torch.as_tensor(np.asarray(action, dtype=np.float32)).reshape(1, -1)
        _, reward, terminated, truncated, info = self._env.step(batch)
        obs = info["final_obs"][0].cpu().numpy()
        facts = {key: float(info[key][0]) for key in ("equity_usd", "cash_usd", "cost_usd")}
        facts["bar_index"] = int(info["bar_index"][0])
        return obs, float(reward[0]), bool(terminated[0]), bool(truncated[0]), facts
