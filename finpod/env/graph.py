"""K env steps captured once in a CUDA graph and replayed (GPU only; untested without a CUDA device).

The env's step is a pure function of tensors with no host sync, so a whole K-step rollout can be
recorded. The graph reads actions from a static buffer and writes rewards, truncations, costs
and the final state into static buffers, which every replay overwrites.
"""

from __future__ import annotations

import torch

from finpod.env.state import EnvState
from finpod.env.trading_env import TradingEnv
from finpod.errors import SpecError


class GraphedRollout:
    """A K-step rollout of ``env`` on a CUDA device, captured with :class:`torch.cuda.CUDAGraph`.

    Fill :attr:`actions` ``(K, N, A)`` then call :meth:`replay`; per step rewards, truncations and
    costs land in :attr:`rewards`, :attr:`truncated` and :attr:`cost_usd` ``(K, N)``, and the env's
    state advances by K steps (autoresets included).

    Args:
        env: a :class:`TradingEnv` on a CUDA device.
        num_steps: ``K`` >= 1, steps per replay.

    Raises:
        SpecError: the env is not on a CUDA device or ``num_steps`` < 1.
    """

    def __init__(self, env: TradingEnv, num_steps: int) -> None:
        if env.device.type != "cuda" or not torch.cuda.is_available():
            raise SpecError(
                f"a CUDA-graph rollout needs an env on a CUDA device, got {env.device}; use env.step()"
            )
        if num_steps < 1:
            raise SpecError(f"a CUDA-graph rollout needs num_steps >= 1, got {num_steps}")
        self._env = env
        shape = (num_steps, env.num_envs)
        self.actions = torch.zeros((*shape, env.action_dim), dtype=torch.float32, device=env.device)
        self.rewards = torch.zeros(shape, dtype=torch.float32, device=env.device)
        self.truncated = torch.zeros(shape, dtype=torch.bool, device=env.device)
        self.cost_usd = torch.zeros(shape, dtype=torch.float64, device=env.device)
        self._state = EnvState(*(tensor.clone() for tensor in env.state))
        saved = EnvState(*(tensor.clone() for tensor in env.state))
        side = torch.cuda.Stream(device=env.device)
        side.wait_stream(torch.cuda.current_stream(env.device))
        with torch.cuda.stream(side):
            self._record()
        torch.cuda.current_stream(env.device).wait_stream(side)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            self._record()
        self._load(saved)
        env.state = self._state

    def _record(self) -> None:
        state = self._state
        for k in range(self.actions.shape[0]):
            state, out = self._env.step_fn(state, self.actions[k])
            self.rewards[k].copy_(out.reward)
            self.truncated[k].copy_(out.truncated)
            self.cost_usd[k].copy_(out.cost_usd)
        self._load(state)

    def _load(self, state: EnvState) -> None:
        for buffer, value in zip(self._state, state, strict=True):
            buffer.copy_(value)

    def replay(self) -> None:
        """Run the captured K steps from the env's current state; the env's state advances."""
        if self._env.state is not self._state:
            self._load(self._env.state)
            self._env.state = self._state
        self._graph.replay()
        self._env.note_steps_taken(self.actions.shape[0])
