"""``TradingEnv``: N portfolios over one panel segment, a thin stateful wrapper of the pure step.

Implements podracer's :class:`~podracer.api.TensorVectorEnv` (torch tensors in and out, same-step
autoreset, ``info["final_obs"]``). Shapes: ``N`` envs, ``M`` assets, ``F`` features, ``D`` obs size.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from finpod.data.panel import Panel
from finpod.env import dynamics
from finpod.env.config import EnvConfig
from finpod.env.entity_outcomes import entity_outcomes
from finpod.env.market import NUM_TABLES, Market, build_market
from finpod.env.shape import EnvShape
from finpod.env.state import KEY_BITS, EnvState, initial_state, restart_where, state_at
from finpod.errors import SpecError
from podracer.api import TensorVectorEnv

StepFn = Callable[[EnvState, torch.Tensor], tuple[EnvState, dynamics.StepOutput]]
"""``(state, actions) -> (next state, outputs)`` with the env's config and market bound."""


def episode_ends_within(steps_left: np.ndarray, num_steps: int) -> bool:
    """Whether some env's episode ends within the next ``num_steps`` steps, by the host-side clock.

    Args:
        steps_left: int64 ``(N,)`` steps each env's episode has left, ``1 .. horizon`` (1: the next
            step truncates it).
        num_steps: the steps about to be taken, >= 1.
    """
    return bool((steps_left <= num_steps).any())


class TradingEnv:
    """A batch of ``num_envs`` long-only portfolios trading ``M`` assets of one panel segment.

    Each env has its own episode: a start bar (random in the segment when ``config.random_start``,
    else the segment's first bar) and a truncation bar ``min(start + horizon_bars, last bar)``.
    ``terminated`` is always false (no ruin is possible); ``truncated`` marks the episode end and the
    learner bootstraps there. Actions: see :class:`EnvConfig` (``weights``: ``(N, M + 1)`` over
    ``[cash, asset_1 .. asset_M]``; ``share_delta``: ``(N, M)``). Observations: see
    :mod:`finpod.env.observation`. The sizes are :attr:`shape` (:class:`~finpod.env.shape.EnvShape`),
    also given as ``obs_dim``, ``action_dim``, ``action_low``, ``action_high`` and ``layout``.

    After a step, :attr:`cash_usd`, :attr:`shares` and :attr:`equity_usd` are the CURRENT state, i.e.
    already reset for the envs that finished on that step; the step's own outcome (before any reset)
    is in ``info`` (``equity_usd``, ``cash_usd``, ``shares``, ``cost_usd``, ``traded_usd``,
    ``bar_index``). Returned tensors are fresh each step (not overwritten by later steps); on a
    step where no episode ends, ``obs`` and ``info["final_obs"]`` are the same tensor.

    Every episode lasts exactly ``min(horizon_bars, segment bars - 1)`` steps, so a host-side clock
    knows which steps end episodes; the other steps skip the autoreset work (no device sync).

    Args:
        panel: the market (its tables are copied to ``device`` once and shared by its envs).
        segment: the panel segment to trade (``"train"``, ``"validation"``, ``"backtest"``).
        config: costs, limits, action/reward modes, horizon.
        num_envs: ``N`` >= 1.
        seed: seeds the per-env keys that draw the start bars (same seed, same rollouts).
        device: where the env runs; ``None`` = the panel's device.
        compile_step: fuse the step's elementwise core (:func:`~finpod.env.dynamics.settle`: orders,
            limits, fills, costs, valuation, reward) with ``torch.compile`` (inductor's C++ on CPU,
            Triton on GPU); the row gathers stay eager, which inductor does not speed up. The first
            step pays the compile time (seconds).
        entity_info: in ``weights`` mode, report each asset's outcome and trade cost in the step's
            info (``entity_outcomes``, ``entity_costs``: :mod:`finpod.env.entity_outcomes`), for an
            agent with per-asset advantages. Off by default: they cost about a tenth of a step at
            ``N = 1024, M = 100`` on a CPU, and a validation or backtest pass never reads them.
    """

    def __init__(
        self,
        panel: Panel,
        segment: str,
        config: EnvConfig,
        num_envs: int,
        seed: int,
        device: torch.device | str | None = None,
        compile_step: bool = False,
        entity_info: bool = False,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise SpecError(f"env num_envs must be a whole number >= 1, got {num_envs!r}")
        self.device = torch.device(device) if device is not None else panel.device
        self.config = config
        self.entity_info = entity_info and config.action_mode == "weights"
        self.market: Market = build_market(panel, segment, config, self.device)
        self.num_envs = num_envs
        self.num_assets = panel.num_assets
        self.shape = EnvShape.of(panel.num_assets, panel.num_features, config.action_mode)
        self.obs_dim, self.action_dim = self.shape.obs_dim, self.shape.action_dim
        self.action_low, self.action_high = self.shape.action_low, self.shape.action_high
        self.layout = self.shape.layout
        settle_fn: dynamics.SettleFn | None = None
        if compile_step:
            settle_fn = torch.compile(
                functools.partial(dynamics.settle, config), fullgraph=True, dynamic=False
            )
        step_fn: StepFn = functools.partial(dynamics.step, config, self.market, settle_fn=settle_fn)
        advance_fn: StepFn = functools.partial(dynamics.advance, config, self.market, settle_fn=settle_fn)
        self._step_fn, self._advance_fn = step_fn, advance_fn
        self._generator = torch.Generator(device="cpu")
        self._generator.manual_seed(seed)
        self._steps_left = np.full(num_envs, self.market.horizon_bars, dtype=np.int64)
        self.state: EnvState = self._fresh_state()

    @property
    def cash_usd(self) -> torch.Tensor:
        """``(N,)`` current cash (USD)."""
        return self.state.cash_usd

    @property
    def shares(self) -> torch.Tensor:
        """``(N, M)`` current holdings (shares)."""
        return self.state.shares

    @property
    def equity_usd(self) -> torch.Tensor:
        """``(N,)`` current equity at the current bar's close (USD)."""
        return self.state.equity_usd

    @property
    def bar_index(self) -> torch.Tensor:
        """``(N,)`` int64, the bar each env currently observes."""
        return self.state.t

    @property
    def step_fn(self) -> StepFn:
        """The pure step with this env's config and market bound (for compiled or graphed rollouts).

        A driver that advances :attr:`state` with it must call :meth:`note_steps_taken` after.
        """
        return self._step_fn

    @property
    def advance_fn(self) -> StepFn:
        """:attr:`step_fn` without the autoreset work (:func:`~finpod.env.dynamics.advance`).

        Equal to :attr:`step_fn` bit for bit on steps where no episode ends; use it only when
        :meth:`episode_ends_within` says none does.
        """
        return self._advance_fn

    def episode_ends_within(self, num_steps: int) -> bool:
        """Whether some env's episode ends within the next ``num_steps`` steps (host clock, no sync)."""
        return episode_ends_within(self._steps_left, num_steps)

    def note_steps_taken(self, num_steps: int) -> None:
        """Advance the host-side episode clock by ``num_steps`` steps taken outside :meth:`step`.

        Every episode lasts exactly ``horizon`` steps, so the host knows, without asking the
        device, on which steps episodes end; :meth:`step` skips the autoreset work on the others.
        """
        horizon = self.market.horizon_bars
        self._steps_left = (self._steps_left - num_steps - 1) % horizon + 1

    def _fresh_state(self) -> EnvState:
        keys = torch.randint(0, 1 << KEY_BITS, (self.num_envs,), generator=self._generator, dtype=torch.int64)
        return initial_state(self.market, keys.to(self.device), dynamics.episode_start(self.config))

    def reset(self, *, seed: int | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start a new episode in every env with fresh keys (re-seeded first when ``seed`` is given).

        Returns:
            Observations ``(N, D)`` and info with ``bar_index`` ``(N,)`` int64 (each env's start bar).
        """
        if seed is not None:
            self._generator.manual_seed(seed)
        self.state = self._fresh_state()
        self._steps_left[:] = self.market.horizon_bars
        return dynamics.observe(self.market, self.state), {"bar_index": self.state.t}

    def reset_at(self, start_bars: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        """Start every env's episode at a bar of the caller's choice (its book as ``start_portfolio`` says).

        For deterministic passes over parts of a segment (e.g. the chunks of a validation score):
        env ``i`` observes ``start_bars[i]`` first and its episode lasts the horizon, like any other.

        Args:
            start_bars: int64 ``(N,)`` panel bar indices, each leaving a whole horizon before the
                segment's last bar (``first_bar <= start <= last_bar - horizon``).

        Returns:
            Observations ``(N, D)`` and info with ``bar_index`` ``(N,)`` (the start bars).

        Raises:
            SpecError: wrong shape or dtype, or a start without room for a whole episode.
        """
        market = self.market
        latest = market.last_bar - market.horizon_bars
        starts = start_bars.to("cpu")
        if starts.shape != (self.num_envs,) or starts.dtype != torch.int64:
            raise SpecError(
                f"reset_at needs int64 start bars of shape ({self.num_envs},), "
                f"got {starts.dtype} {tuple(starts.shape)}"
            )
        if bool(((starts < market.first_bar) | (starts > latest)).any()):
            raise SpecError(
                f"reset_at start bars must lie in [{market.first_bar}, {latest}] (a whole "
                f"{market.horizon_bars}-bar episode in the segment), got {starts.tolist()}"
            )
        start = starts.to(self.device)
        fresh = self._fresh_state()
        self.state = state_at(
            market,
            start,
            start + market.horizon_bars,
            fresh.episode,
            fresh.key,
            dynamics.episode_start(self.config),
        )
        self._steps_left[:] = market.horizon_bars
        return dynamics.observe(market, self.state), {"bar_index": self.state.t}

    def reset_envs(self, mask: torch.Tensor) -> torch.Tensor:
        """Start the next episode of the envs where ``mask`` ``(N,)`` bool is true; others untouched.

        Copies ``mask`` to the host once (for the episode clock); resets are not on the step path.

        Returns:
            Observations ``(N, D)`` of every env (unchanged rows for the envs not reset).
        """
        if mask.shape != (self.num_envs,) or mask.dtype != torch.bool:
            raise SpecError(
                f"reset_envs needs a bool mask of shape ({self.num_envs},), "
                f"got {mask.dtype} {tuple(mask.shape)}"
            )
        self.state = restart_where(
            self.market, self.state, mask.to(self.device), dynamics.episode_start(self.config)
        )
        self._steps_left[mask.cpu().numpy()] = self.market.horizon_bars
        return dynamics.observe(self.market, self.state)

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every env one bar; same-step autoreset of the envs whose episode ended.

        Args:
            actions: ``(N, A)`` float32 in ``[action_low, action_high]`` (clamped).

        Returns:
            ``(obs (N, D), reward (N,), terminated (N,), truncated (N,), info)``; info holds
            ``final_obs`` ``(N, D)``, ``equity_usd``, ``cash_usd``, ``cost_usd``, ``traded_usd``,
            ``bar_index`` (``(N,)``) and ``shares`` ``(N, M)``, all of the step before any reset;
            with ``entity_info`` (``weights`` mode) also ``entity_outcomes``, ``entity_costs`` and
            ``entity_holdings`` ``(N, M)`` and ``entity_cost_rates`` ``(N, 1)``
            (:mod:`finpod.env.entity_outcomes`).
        """
        if actions.shape != (self.num_envs, self.action_dim):
            raise SpecError(
                f"env actions must have shape ({self.num_envs}, {self.action_dim}), "
                f"got {tuple(actions.shape)}"
            )
        step_fn = self._step_fn if self.episode_ends_within(1) else self._advance_fn
        result = self._step(actions, step_fn)
        self.note_steps_taken(1)
        return result

    def capturable_step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """:meth:`step` as device work alone, for a CUDA graph of training steps: the autoreset work
        on every step (equal to :meth:`step` bit for bit, whether an episode ends or not) and no
        host-side episode clock; a driver that replays ``K`` of these calls :meth:`note_steps_taken`
        with ``K`` after each replay. ``actions`` must already be ``(N, A)``."""
        return self._step(actions, self._step_fn)

    def _step(
        self, actions: torch.Tensor, step_fn: StepFn
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        before = self.state
        self.state, out = step_fn(self.state, actions.to(device=self.device, dtype=torch.float32))
        info = {
            "final_obs": out.final_obs,
            "equity_usd": out.equity_usd,
            "cash_usd": out.cash_usd,
            "shares": out.shares,
            "cost_usd": out.cost_usd,
            "traded_usd": out.traded_usd,
            "bar_index": out.bar_index,
        }
        if self.entity_info:
            info |= entity_outcomes(
                self.config,
                self.market,
                before.equity_usd,
                out.equity_usd,
                before.cash_usd,
                before.shares,
                out.shares,
                out.bar_index,
            )
        return out.obs, out.reward, out.terminated, out.truncated, info

    def stack(self, members: Sequence[TensorVectorEnv]) -> TradingEnv:
        """One env of ``sum(N_i)`` rows: ``members``' envs in order, continuing from their states.

        How a population of pods (:mod:`podracer.population`) steps all its pods' envs in one call.
        The members must trade the same market tables and segment with the same settings; the
        stacked env shares them (no copy) and concatenates the dynamic state. Write its state back
        with :meth:`scatter` after stepping it.

        Raises:
            SpecError: a member that is not a TradingEnv of the same market, segment and settings.
        """
        envs = [_same_market(self, member) for member in members]
        stacked = copy.copy(self)
        stacked.num_envs = sum(env.num_envs for env in envs)
        stacked.state = EnvState(
            *(torch.cat(parts) for parts in zip(*(env.state for env in envs), strict=True))
        )
        stacked._steps_left = np.concatenate([env._steps_left for env in envs])
        stacked._generator = torch.Generator(device="cpu")  # a stacked env is stepped, never reseeded
        return stacked

    def scatter(self, stacked: TensorVectorEnv, members: Sequence[TensorVectorEnv]) -> None:
        """Write ``stacked``'s state (made by :meth:`stack` from ``members``) back into ``members``."""
        if not isinstance(stacked, TradingEnv):
            raise SpecError(f"scatter needs the TradingEnv that stack made, got {type(stacked).__name__}")
        first = 0
        for member in members:
            env = _same_market(self, member)
            rows = slice(first, first + env.num_envs)
            env.state = EnvState(*(part[rows] for part in stacked.state))
            env._steps_left = stacked._steps_left[rows].copy()
            first = rows.stop


def _same_market(reference: TradingEnv, member: TensorVectorEnv) -> TradingEnv:
    """``member`` as a TradingEnv trading ``reference``'s market with its settings, else a SpecError."""
    if not isinstance(member, TradingEnv):
        raise SpecError(f"only TradingEnvs stack with a TradingEnv, got {type(member).__name__}")
    ours, theirs = reference.market, member.market
    same_tables = all(a is b for a, b in zip(ours[:NUM_TABLES], theirs[:NUM_TABLES], strict=True))
    same_segment = ours[NUM_TABLES:] == theirs[NUM_TABLES:]
    same_settings = member.config == reference.config and member.entity_info == reference.entity_info
    if not (same_tables and same_segment and same_settings):
        raise SpecError(
            "TradingEnvs stack only when they trade one market segment with one EnvConfig (and "
            "entity_info setting); "
            "build every pod's env from the same panel, segment and config"
        )
    return member
