"""A deterministic policy driving an env for many steps, K steps per CUDA-graph replay on a GPU.

A validation score or a backtest is sequential: each observation holds the portfolio the previous
fill left, so a year of minute bars is about 98,000 steps of a small batch (1 to a few hundred
envs). On a GPU each eager step is some hundred small kernel launches (policy and env), and the
launches, not the GPU, set the pace: about 1-2 ms a bar, minutes per pass with the GPU idle. On a
CUDA device :func:`drive` therefore records ``K`` steps (policy forward + env step + the copy of the
outputs a caller keeps) once in a :class:`torch.cuda.CUDAGraph` and replays it; the steps left over
(the last, where the episode ends, and any tail shorter than ``K``) run eagerly. The replayed
kernels are the eager ones, so the outputs equal the eager loop's bit for bit. Elsewhere (a CPU),
or where a policy cannot be captured (a host sync inside it), the loop is the plain eager one.

Shapes: ``N`` envs, ``D`` observation size, ``A`` action size, ``S`` steps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Final

import torch

from finpod.env.dynamics import StepOutput
from finpod.env.state import EnvState
from finpod.env.trading_env import TradingEnv
from podracer.api import CAPTURE_LOCK, Policy

BLOCK_STEPS: Final[int] = 16
"""Steps per CUDA-graph replay (and per stacked block of outputs in the eager loop).

Recording a block costs about two blocks of eager steps (a warm-up and the capture), paid by every
pass (a round's validation score records its own), while a replay's GPU time is the same per step
at any block length (each step's kernels run in turn). 64 steps a block spent 0.34 s recording on
an H200 at the paper's shape, about 70 % of a round's validation score; 16 spend a quarter of it."""
MIN_GRAPHED_STEPS: Final[int] = 4 * BLOCK_STEPS
"""A pass shorter than this runs eagerly: recording a graph costs about as much as this many eager steps."""

_log = logging.getLogger(__name__)


def equity_curve(env: TradingEnv, policy: Policy, obs: torch.Tensor, num_steps: int) -> torch.Tensor:
    """Equity ``(S + 1, N)`` USD of ``env``'s accounts: now (row 0), then after each of ``num_steps``
    steps of ``policy`` (:func:`drive_blocks`; all a score needs, no ledger)."""
    rows = [env.equity_usd.clone().unsqueeze(0)]
    rows += [block["equity_usd"] for block in drive_blocks(env, policy, obs, num_steps, ("equity_usd",))]
    return torch.cat(rows)


def drive_blocks(
    env: TradingEnv,
    policy: Policy,
    obs: torch.Tensor,
    num_steps: int,
    fields: Sequence[str],
    *,
    graphs: bool | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Step ``env`` ``num_steps`` times with ``policy``'s actions, yielding the outputs block by block.

    Args:
        env: the envs, in the state ``obs`` was observed in; they advance ``num_steps`` steps.
        policy: deterministic, observations ``(N, D)`` -> actions ``(N, A)``; on a GPU it must be a
            pure tensor function (no host sync, the same kernels every call) to be graphed.
        obs: ``(N, D)`` the env's current observations.
        num_steps: ``S`` >= 0 steps to take.
        fields: names of :class:`~finpod.env.dynamics.StepOutput` fields to keep (e.g.
            ``"equity_usd"``, ``"shares"``): each step's value before any autoreset, as ``info`` has it.
        graphs: record and replay CUDA graphs; ``None``: on a CUDA device, for a pass of at least
            :data:`MIN_GRAPHED_STEPS` steps, stepping eagerly (with a logged warning) where the
            policy cannot be captured. ``True`` raises there instead; off a CUDA device it runs the
            same blocks eagerly (what the tests check against the plain loop on a CPU).

    Yields:
        Consecutive blocks of at most :data:`BLOCK_STEPS` steps: each field ``(k, N, ...)`` on the
        env's device (fresh tensors), ``S`` rows in all.
    """
    use_graphs = (
        graphs if graphs is not None else env.device.type == "cuda" and num_steps >= MIN_GRAPHED_STEPS
    )
    block: _Block | None = None
    taken = 0
    while taken < num_steps:
        if use_graphs and num_steps - taken >= BLOCK_STEPS and not env.episode_ends_within(BLOCK_STEPS):
            if block is None:
                block = _Block.record(env, policy, obs, fields, strict=graphs is True)
                if block is None:  # the policy cannot be captured: eager from here on
                    use_graphs = False
                    continue
            obs = block.replay(env, obs)
            taken += BLOCK_STEPS
            yield {name: block.outputs[name].clone() for name in fields}
            continue
        stop = min(num_steps, taken + BLOCK_STEPS)
        steps: dict[str, list[torch.Tensor]] = {name: [] for name in fields}
        while taken < stop:
            obs, _, _, _, info = env.step(policy(obs))
            for name in fields:
                steps[name].append(info[name])
            taken += 1
        yield {name: torch.stack(values) for name, values in steps.items()}


class _Block:
    """``BLOCK_STEPS`` steps of ``policy`` on ``env`` as one CUDA graph (or, off CUDA, the same
    steps run eagerly on the same static buffers). Its state, observation and output buffers are
    static: a replay reads the observation in :attr:`obs`, advances :attr:`state` and overwrites
    :attr:`outputs` ``(K, N, ...)``."""

    def __init__(self, env: TradingEnv, policy: Policy, obs: torch.Tensor, fields: Sequence[str]) -> None:
        self.policy, self.fields = policy, tuple(fields)
        self.state = EnvState(*(tensor.clone() for tensor in env.state))
        self.obs = obs.clone()
        self._advance = env.advance_fn
        probe_state = EnvState(*(tensor.clone() for tensor in env.state))
        _, out = self._advance(probe_state, self._actions(obs))
        self.outputs = {
            name: torch.empty(
                (BLOCK_STEPS, *getattr(out, name).shape), dtype=getattr(out, name).dtype, device=env.device
            )
            for name in self.fields
        }
        self.graph: torch.cuda.CUDAGraph | None = None

    def _actions(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy(obs).to(torch.float32)

    def _steps(self) -> None:
        """The block's body: K steps from the static state and observation, into the static buffers."""
        state, obs = self.state, self.obs
        for k in range(BLOCK_STEPS):
            state, out = self._advance(state, self._actions(obs))
            _keep(self.outputs, self.fields, k, out)
            obs = out.obs
        for buffer, value in zip(self.state, state, strict=True):
            buffer.copy_(value)
        self.obs.copy_(obs)

    @classmethod
    def record(
        cls, env: TradingEnv, policy: Policy, obs: torch.Tensor, fields: Sequence[str], strict: bool
    ) -> _Block | None:
        """The block, its graph recorded on a CUDA device; None when the policy cannot be captured
        (``strict``: the capture's error is raised instead)."""
        block = cls(env, policy, obs, fields)
        if env.device.type != "cuda":
            return block
        saved_state = EnvState(*(tensor.clone() for tensor in block.state))
        saved_obs = block.obs.clone()
        try:
            side = torch.cuda.Stream(device=env.device)
            side.wait_stream(torch.cuda.current_stream(env.device))
            with torch.cuda.stream(side):
                block._steps()  # warm-up: lazy initialisation happens outside the capture
            torch.cuda.current_stream(env.device).wait_stream(side)
            block._load(saved_state, saved_obs)
            graph = torch.cuda.CUDAGraph()
            with CAPTURE_LOCK, torch.cuda.graph(graph, capture_error_mode="thread_local"):
                block._steps()  # one capture at a time: pods in threads may record beside it
        except RuntimeError as error:  # a host sync or a changing kernel in the policy
            if strict:
                raise
            _log.warning("policy pass not graphed (%s); stepping eagerly", str(error).splitlines()[0])
            torch.cuda.synchronize(env.device)
            return None
        block._load(saved_state, saved_obs)
        block.graph = graph
        return block

    def _load(self, state: EnvState, obs: torch.Tensor) -> None:
        for buffer, value in zip(self.state, state, strict=True):
            buffer.copy_(value)
        self.obs.copy_(obs)

    def replay(self, env: TradingEnv, obs: torch.Tensor) -> torch.Tensor:
        """K steps from ``env``'s state and ``obs``; the env now holds the static state. Returns the
        observation after the K-th step (the static buffer: read it before the next replay)."""
        if env.state is not self.state:
            self._load(env.state, obs)
            env.state = self.state
        elif obs is not self.obs:
            self.obs.copy_(obs)
        if self.graph is not None:
            self.graph.replay()
        else:
            self._steps()
        env.note_steps_taken(BLOCK_STEPS)
        return self.obs


def _keep(outputs: dict[str, torch.Tensor], fields: Sequence[str], k: int, out: StepOutput) -> None:
    for name in fields:
        outputs[name][k].copy_(getattr(out, name))
