"""K env steps captured once in CUDA graphs and replayed (GPU only; untested without a CUDA device).

The env's step is a pure function of tensors with no host sync, so a whole K-step rollout can be
recorded. A graph reads actions from a static buffer and writes rewards, truncations, costs and
the final state into static buffers, which every replay overwrites.

Two graphs are captured: K general steps (:func:`~finpod.env.dynamics.step`, autoreset on every
step) and K advance-only steps (:func:`~finpod.env.dynamics.advance`: no second template row, no
separate ``final_obs``; about 40 % fewer bytes a step at M = 100). Every episode lasts exactly the
horizon, so the env's host-side clock knows whether an episode ends within the next K steps
(:func:`~finpod.env.trading_env.episode_ends_within`); a replay runs the advance-only graph when
none does, else the general one. ``advance`` equals ``step`` bit for bit when no env truncates, so
the results do not depend on which graph ran.
"""

from __future__ import annotations

from typing import Literal

import torch

from finpod.env.state import EnvState
from finpod.env.trading_env import StepFn, TradingEnv
from finpod.errors import SpecError

GraphKind = Literal["step", "advance"]
"""Which graph a replay ran: ``"step"`` (autoreset on every step) or ``"advance"`` (none)."""


class GraphedRollout:
    """A K-step rollout of ``env`` on a CUDA device, captured with :class:`torch.cuda.CUDAGraph`.

    Fill :attr:`actions` ``(K, N, A)`` then call :meth:`replay`; per step rewards, truncations and
    costs land in :attr:`rewards`, :attr:`truncated` and :attr:`cost_usd` ``(K, N)``, and the env's
    state advances by K steps (autoresets included). :attr:`replays` counts the replays of each
    graph.

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
        self.num_steps = num_steps
        shape = (num_steps, env.num_envs)
        self.actions = torch.zeros((*shape, env.action_dim), dtype=torch.float32, device=env.device)
        self.rewards = torch.zeros(shape, dtype=torch.float32, device=env.device)
        self.truncated = torch.zeros(shape, dtype=torch.bool, device=env.device)
        self.cost_usd = torch.zeros(shape, dtype=torch.float64, device=env.device)
        self.replays: dict[GraphKind, int] = {"step": 0, "advance": 0}
        self._state = EnvState(*(tensor.clone() for tensor in env.state))
        saved = EnvState(*(tensor.clone() for tensor in env.state))
        step_fns: dict[GraphKind, StepFn] = {"step": env.step_fn, "advance": env.advance_fn}
        side = torch.cuda.Stream(device=env.device)
        side.wait_stream(torch.cuda.current_stream(env.device))
        with torch.cuda.stream(side):
            for step_fn in step_fns.values():
                self._record(step_fn)
        torch.cuda.current_stream(env.device).wait_stream(side)
        self._graphs: dict[GraphKind, torch.cuda.CUDAGraph] = {}
        for kind, step_fn in step_fns.items():
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._record(step_fn)
            self._graphs[kind] = graph
        self._load(saved)
        env.state = self._state

    def _record(self, step_fn: StepFn) -> None:
        state = self._state
        for k in range(self.num_steps):
            state, out = step_fn(state, self.actions[k])
            self.rewards[k].copy_(out.reward)
            self.truncated[k].copy_(out.truncated)
            self.cost_usd[k].copy_(out.cost_usd)
        self._load(state)

    def _load(self, state: EnvState) -> None:
        for buffer, value in zip(self._state, state, strict=True):
            buffer.copy_(value)

    def next_kind(self) -> GraphKind:
        """The graph the next :meth:`replay` runs: ``"advance"`` when no episode ends within K steps."""
        return "step" if self._env.episode_ends_within(self.num_steps) else "advance"

    def replay(self) -> GraphKind:
        """Run K steps from the env's current state (the env's state advances); returns the graph run."""
        if self._env.state is not self._state:
            self._load(self._env.state)
            self._env.state = self._state
        kind = self.next_kind()
        self._graphs[kind].replay()
        self._env.note_steps_taken(self.num_steps)
        self.replays[kind] += 1
        return kind
