"""The run's trader (best, ensemble or trajectory) and the observation it decides on, as in the backtest.

The trader is rebuilt like ``finpod backtest`` rebuilds it (:func:`finpod.pipeline.main.select` on the
run's leaderboard); the observation row is assembled with the env's own functions
(:func:`~finpod.env.observation.observation_template`, :func:`~finpod.env.observation.fill_observation`),
so a feature row and a portfolio give the row the env would have built.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import numpy as np
import pandas as pd
import torch

from finpod.data.features import FeatureStats
from finpod.data.panel import Panel
from finpod.env.config import EnvConfig
from finpod.env.observation import fill_observation, observation_template
from finpod.errors import SpecError
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import backtest_panel, load_bars, selection_panel, universe_symbols
from finpod.pipeline.main import TRAJECTORY_PREFIX, select, target_weights
from finpod.pipeline.trader_inputs import trader_inputs
from finpod.rundir import RunDir
from finpod.spec import Spec
from finpod.trader import load_policy
from podracer.api import Policy, archive_of, leaderboard_of

TraderName = Literal["best", "ensemble", "trajectory"]
TRADER_NAMES: Final[tuple[str, ...]] = ("best", "ensemble", "trajectory")
PAPER_DIR: Final[str] = "paper"
"""Sub-folder of a run where paper trading keeps its journals and stop file."""


@dataclass(frozen=True)
class Trader:
    """A deployed trader: observation ``(1, D)`` -> target weights ``(M + 1,)`` over ``[cash, assets]``."""

    name: str
    policy: Policy
    fully_invested: bool = False

    @torch.no_grad()
    def target_weights(self, obs: torch.Tensor) -> torch.Tensor:
        """The weights the env would trade for ``obs`` (clamped, normalised; all-zero = all cash;
        no cash weight for a fully invested run)."""
        return target_weights(self.policy(obs), self.fully_invested)[0]


@dataclass(frozen=True)
class LoadedRun:
    """What paper trading needs from a finished run.

    Attributes:
        run: the run folder.
        spec: its resolved spec.
        panel: the market the run was built on (selection panel, or the full one for a replay).
        config: env settings in backtest mode (costs, band, whole shares).
        trader: the chosen trader.
        device: where the policy runs.
    """

    run: RunDir
    spec: Spec
    panel: Panel
    config: EnvConfig
    trader: Trader
    device: torch.device

    @property
    def paper_dir(self) -> Path:
        """``<run>/paper/``."""
        return self.run.root / PAPER_DIR


def load_run(run_dir: Path, trader: str, *, full_panel: bool) -> LoadedRun:
    """Rebuild a finished run's trader and market.

    Args:
        run_dir: ``reports/<run_id>``.
        trader: ``"best"``, ``"ensemble"`` or ``"trajectory"``.
        full_panel: build the panel with the backtest segment (for a replay); otherwise only the
            bars before it (the normalisation statistics come from the train rows either way).

    Raises:
        SpecError: not a finished run, an unknown trader, a run without an ensemble, or a spec
            whose action mode paper trading cannot send (share deltas).
    """
    if trader not in TRADER_NAMES:
        raise SpecError(f"--trader: unknown trader {trader!r}; fix: use best, ensemble or trajectory")
    run = RunDir(Path(run_dir).expanduser().resolve())
    spec = _finished_spec(run)
    device = torch.device("cpu")
    bars = load_bars(Path(run.read_info()["dataset"]))
    symbols = universe_symbols(spec, bars)
    build = backtest_panel if full_panel else selection_panel
    panel = build(spec, bars, symbols, str(device))
    context = RunContext.of(spec, panel, device)
    policies = select(spec, leaderboard_of(run.tournament), context.agent_factory, archive_of(run.tournament))
    chosen = _choose(policies, trader, run.root)
    trader_of = Trader(trader, chosen, context.eval_config.fully_invested)
    return LoadedRun(run, spec, panel, context.eval_config, trader_of, device)


@dataclass(frozen=True)
class LiveRun:
    """What the live trader needs: no panel, only the run's columns, statistics and trader.

    Attributes:
        run: the run folder.
        spec: its resolved spec (``[paper]`` limits, env costs, frequency).
        symbols: the ``M`` traded tickers in column order.
        stats: the train-segment feature statistics saved with the run.
        config: env settings in backtest mode.
        trader: the chosen trader.
    """

    run: RunDir
    spec: Spec
    symbols: tuple[str, ...]
    stats: FeatureStats
    config: EnvConfig
    trader: Trader

    @property
    def paper_dir(self) -> Path:
        """``<run>/paper/``."""
        return self.run.root / PAPER_DIR


def load_live(run_dir: Path, trader: str) -> LiveRun:
    """The run's trader, columns and feature statistics (:func:`finpod.trader.load_policy`).

    Raises:
        SpecError: as :func:`load_run`.
    """
    if trader not in TRADER_NAMES:
        raise SpecError(f"--trader: unknown trader {trader!r}; fix: use best, ensemble or trajectory")
    run = RunDir(Path(run_dir).expanduser().resolve())
    spec = _finished_spec(run)
    symbols, stats = trader_inputs(run, spec)
    policy = load_policy(
        run.root,
        "trajectory" if trader == "trajectory" else ("best" if trader == "best" else "ensemble"),
        ensemble_k=spec.tournament.ensemble_k,
        action_mode=spec.env.action_mode,
        fully_invested=spec.env.fully_invested,
    )
    config = spec.env_config(random_start=False)
    return LiveRun(run, spec, tuple(symbols), stats, config, Trader(trader, policy, config.fully_invested))


def _finished_spec(run: RunDir) -> Spec:
    info = run.read_info()
    if info.get("status") != "done":
        raise SpecError(
            f"{run.root}: the run is not finished (status {info.get('status')!r}); fix: finish it with "
            f"`finpod run {run.spec_toml} --resume` before paper trading it"
        )
    run.verify_integrity()
    spec = run.load_spec()
    if spec.env.action_mode != "weights":
        raise SpecError(
            f"{run.spec_toml}: env.action_mode is {spec.env.action_mode!r}; paper trading sends target "
            "weights only; fix: train a run with env.action_mode = 'weights'"
        )
    return spec


def _choose(policies: dict[str, Policy], trader: str, root: Path) -> Policy:
    if trader == "best":
        return policies["best"]
    if trader == "trajectory":
        found = [name for name in policies if name.startswith(TRAJECTORY_PREFIX)]
        if not found:
            raise SpecError(
                f"{root}: the run has no trajectory trader (tournament.archive_size is 0, or it archived "
                "fewer than 2 snapshots); fix: use --trader best"
            )
        return policies[found[0]]
    ensembles = [name for name in policies if name.startswith("ensemble")]
    if not ensembles:
        raise SpecError(
            f"{root}: the run has no ensemble trader (fewer than 2 leaderboard entries or "
            "tournament.ensemble_k = 1); fix: use --trader best"
        )
    return policies[ensembles[0]]


def session_position(bar_ns: int, session_open_ns: int, session_close_ns: int, freq: str) -> float:
    """Position of a bar in its session in ``[0, 1]``, as :func:`finpod.env.market.session_progress`.

    Minute bars: minutes since the open over (session minutes - 1), so half days end at 1 too;
    daily bars (one bar a session): 0.
    """
    if freq != "1min":
        return 0.0
    minutes = (session_close_ns - session_open_ns) // 60_000_000_000
    return float(np.float32((bar_ns - session_open_ns) // 60_000_000_000 / max(minutes - 1, 1)))


def observation(
    features: torch.Tensor,
    session_progress: float,
    shares: np.ndarray,
    close_usd: np.ndarray,
    cash_usd: float,
) -> torch.Tensor:
    """The env's observation row ``(1, D)`` for one portfolio at one bar's close.

    Args:
        features: float32 ``(M, F)`` the bar's features (:class:`~finpod.paper.features.OnlineFeatures`).
        session_progress: the bar's position in its session (:func:`session_position`).
        shares: ``(M,)`` holdings (shares).
        close_usd: ``(M,)`` the bar's aligned closes.
        cash_usd: cash.
    """
    rows = observation_template(
        features[None].to(torch.float32), torch.tensor([session_progress], dtype=torch.float32)
    )
    holdings = torch.from_numpy(
        np.asarray(shares, dtype=np.float64) * np.asarray(close_usd, dtype=np.float64)
    )[None]
    cash = torch.tensor([cash_usd], dtype=torch.float64)
    equity = cash + holdings.sum(dim=1)
    return fill_observation(rows, holdings_usd=holdings, cash_usd=cash, equity_usd=equity)


def bar_stamp(bar_ns: int) -> str:
    """A bar start as ISO UTC text (for logs and the journal)."""
    return pd.Timestamp(bar_ns, tz="UTC").isoformat()
