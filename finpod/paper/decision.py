"""The run's trader (best, ensemble, trajectory or pick) and the observation it decides on, as backtested.

The trader is rebuilt like ``finpod backtest`` rebuilds it (:func:`finpod.pipeline.main.select` on the
run's leaderboard). ``pick`` deploys the run's saved pick (``metrics.json``'s ``pick``,
:class:`~finpod.report.verdict.PickVerdict`): best when its validation Sharpe beat equal weight's,
else equal weight, :func:`finpod.oracle.equal_weight_policy` (``1/M`` of each asset, no cash,
re-targeted every bar through the env's band, where the report's ``equal_weight`` baseline buys once
and holds). The observation row is assembled with the env's own functions
(:func:`~finpod.env.observation.observation_template`, :func:`~finpod.env.observation.fill_observation`),
so a feature row and a portfolio give the row the env would have built.
"""

from __future__ import annotations

import json
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
from finpod.oracle import equal_weight_policy
from finpod.paper.journal import Journal
from finpod.pipeline.context import RunContext
from finpod.pipeline.inputs import backtest_panel, load_bars, selection_panel, universe_symbols
from finpod.pipeline.main import TRAJECTORY_PREFIX, select, target_weights
from finpod.pipeline.trader_inputs import trader_inputs
from finpod.report.artifacts import METRICS_FILE
from finpod.report.verdict import BENCHMARK_NAME
from finpod.rundir import RunDir
from finpod.spec import Spec
from finpod.trader import load_policy
from podracer.api import Policy, archive_of, leaderboard_of

TraderName = Literal["best", "ensemble", "trajectory", "pick"]
TRADER_NAMES: Final[tuple[str, ...]] = ("best", "ensemble", "trajectory", "pick")
PICK: Final[str] = "pick"
"""The trader name that deploys the run's saved pick."""
PICK_TRADERS: Final[tuple[str, ...]] = ("best", BENCHMARK_NAME)
"""What a saved pick can name: the selected trader (``best``) or equal weight."""
PAPER_DIR: Final[str] = "paper"
"""Sub-folder of a run where paper trading keeps its journals and stop file."""
RESOLVED_META: Final[str] = "trader_resolved"
"""Journal meta key: what the journal's trader resolved to at its first start (``pick``: best or
equal_weight; any other trader: its own name)."""
LABEL_META: Final[str] = "trader_label"
"""Journal meta key: the trader for people (:attr:`Trader.label`) at the first start."""


@dataclass(frozen=True)
class Pick:
    """The run's saved pick (``metrics.json``'s ``pick``) as paper trading deploys it.

    Attributes:
        trader: ``"best"`` or ``"equal_weight"``.
        sentence: the verdict's sentence, e.g. ``"pick: equal weight, not best (...)"``.
    """

    trader: str
    sentence: str


@dataclass(frozen=True)
class Trader:
    """A deployed trader: observation ``(1, D)`` -> target weights ``(M + 1,)`` over ``[cash, assets]``.

    Attributes:
        name: the trader name it was asked for (journals, client order ids).
        policy: the policy.
        fully_invested: the run's ``env.fully_invested``.
        pick: for ``name == "pick"``, what the run's saved pick resolved to; else ``None``.
    """

    name: str
    policy: Policy
    fully_invested: bool = False
    pick: Pick | None = None

    @property
    def resolved(self) -> str:
        """The trader that trades: the name, or for ``pick`` ``"best"`` / ``"equal_weight"``."""
        return self.name if self.pick is None else self.pick.trader

    @property
    def label(self) -> str:
        """The trader for people: ``best``, or ``pick = equal_weight (pick: equal weight, not best ...)``."""
        return self.name if self.pick is None else f"{self.name} = {self.pick.trader} ({self.pick.sentence})"

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
        trader: ``"best"``, ``"ensemble"``, ``"trajectory"`` or ``"pick"`` (the run's saved pick).
        full_panel: build the panel with the backtest segment (for a replay); otherwise only the
            bars before it (the normalisation statistics come from the train rows either way).

    Raises:
        SpecError: not a finished run, an unknown trader, a run without an ensemble or without a
            saved pick, or a spec whose action mode paper trading cannot send (share deltas).
    """
    _check_name(trader)
    run = RunDir(Path(run_dir).expanduser().resolve())
    spec = _finished_spec(run)
    pick = saved_pick(run) if trader == PICK else None
    device = torch.device("cpu")
    bars = load_bars(Path(run.read_info()["dataset"]))
    symbols = universe_symbols(spec, bars)
    build = backtest_panel if full_panel else selection_panel
    panel = build(spec, bars, symbols, str(device))
    context = RunContext.of(spec, panel, device)
    chosen = trader if pick is None else pick.trader
    if chosen == BENCHMARK_NAME:
        policy = equal_weight_policy(panel.num_assets)
    else:
        board, archive = leaderboard_of(run.tournament), archive_of(run.tournament)
        policy = _choose(select(spec, board, context.agent_factory, archive), chosen, run.root)
    trader_of = Trader(trader, policy, context.eval_config.fully_invested, pick)
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
    _check_name(trader)
    run = RunDir(Path(run_dir).expanduser().resolve())
    spec = _finished_spec(run)
    pick = saved_pick(run) if trader == PICK else None
    symbols, stats = trader_inputs(run, spec)
    chosen = trader if pick is None else pick.trader
    config = spec.env_config(random_start=False)
    policy: Policy
    if chosen == BENCHMARK_NAME:
        policy = equal_weight_policy(len(symbols))
    else:
        policy = load_policy(
            run.root,
            "trajectory" if chosen == "trajectory" else ("best" if chosen == "best" else "ensemble"),
            ensemble_k=spec.tournament.ensemble_k,
            action_mode=spec.env.action_mode,
            fully_invested=spec.env.fully_invested,
        )
    trader_of = Trader(trader, policy, config.fully_invested, pick)
    return LiveRun(run, spec, tuple(symbols), stats, config, trader_of)


def saved_pick(run: RunDir) -> Pick:
    """The run's pick as ``finpod run`` (or ``finpod report``) saved it in ``metrics.json``.

    Raises:
        SpecError: no ``metrics.json``, no pick in it (a run made before picks were saved, or one
            without a validation segment), or a pick paper trading cannot deploy.
    """
    path = run.root / METRICS_FILE
    fix = (
        f"fix: use --trader best, or rebuild its metrics with `finpod report {run.root}` "
        "(a run with a validation segment gets a pick)"
    )
    if not path.is_file():
        raise SpecError(f"{path}: missing, so the run has no saved pick for --trader pick; {fix}")
    try:
        saved = json.loads(path.read_text(encoding="utf-8")).get("pick")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise SpecError(f"{path}: not a metrics.json finpod wrote (not JSON); {fix}") from None
    if not isinstance(saved, dict) or saved.get("trader") is None:
        raise SpecError(
            f"{path}: no pick saved (a run from before picks were saved, or one without a "
            f"validation segment), so --trader pick has nothing to deploy; {fix}"
        )
    if saved["trader"] not in PICK_TRADERS:
        raise SpecError(f"{path}: the saved pick is {saved['trader']!r}, not best or {BENCHMARK_NAME}; {fix}")
    return Pick(str(saved["trader"]), str(saved.get("sentence") or f"pick: {saved['trader']}"))


def pin_trader(journal: Journal, trader: Trader) -> None:
    """Record what ``trader`` resolved to in ``journal`` at its first start; refuse a later start
    that resolves differently (a ``pick`` whose ``metrics.json`` changed), before any order.

    Raises:
        SpecError: the journal's trader resolved to something else at its first start.
    """
    pinned = journal.meta(RESOLVED_META)
    if pinned is None:
        journal.set_meta(RESOLVED_META, trader.resolved)
        journal.set_meta(LABEL_META, trader.label)
        return
    if pinned != trader.resolved:
        raise SpecError(
            f"{journal.path}: this paper trader started as {trader.name} = {pinned}, but the run's "
            f"saved pick now says {trader.resolved} (its metrics.json changed); nothing was traded; "
            f"fix: restore the metrics.json it started with, or move {journal.path.name} aside to "
            "deploy the new pick afresh (it adopts the account's positions)"
        )


def _check_name(trader: str) -> None:
    if trader not in TRADER_NAMES:
        raise SpecError(f"--trader: unknown trader {trader!r}; fix: use best, ensemble, trajectory or pick")


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
