"""Text for the report page: the spec summary, the headline cards and the notes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import pandas as pd

from finpod.backtest.result import BacktestResult
from finpod.report.formatting import format_value
from finpod.report.metrics import METRICS, SESSIONS_PER_YEAR, MetricValue, turnover_after_entry
from finpod.report.plots import ROLLING_SHARPE_WINDOW_SESSIONS, rolling_sharpe_window
from finpod.spec import setting_key

SPEC_ROWS: tuple[tuple[str, str], ...] = tuple(
    (label, setting_key(key))
    for label, key in (
        ("Strategy", "name"),
        ("Description", "description"),
        ("Data source", "data.source"),
        ("Dataset", "data.path"),
        ("Universe", "universe"),
        ("Frequency", "frequency"),
        ("Train segment", "segments.train"),
        ("Validation segment", "segments.validation"),
        ("Backtest segment", "segments.backtest"),
        ("Initial capital (USD)", "env.initial_cash_usd"),
        ("Fee rate (fraction of notional)", "env.fee_rate"),
        ("Half spread (bps)", "env.half_spread_bps"),
        ("Max participation (share of bar volume)", "env.max_participation"),
        ("Rebalance band (fraction of equity)", "env.rebalance_band"),
        ("Action mode", "env.action_mode"),
        ("Fill", "env.fill"),
        ("Reward", "env.reward"),
        ("Training episodes start in", "env.start_portfolio"),
        ("Fully invested (cash weight ignored)", "env.fully_invested"),
        ("Tournament pool size", "tournament.pool_size"),
        ("Leaderboard size", "tournament.leaderboard_size"),
        ("Budget (env steps)", "tournament.budget_env_steps"),
        ("Budget (passes over the train bars)", "tournament.budget_passes"),
        ("Ensemble k", "tournament.ensemble_k"),
        ("Archive (snapshots the trajectory trader averages)", "tournament.archive_size"),
        ("Archive keeps (score: the best-validated; even: spread over the run)", "tournament.archive_rule"),
        ("Seed", "seed"),
    )
)
"""(label, dotted key in the resolved spec) rows of the spec summary; absent keys are left out (a run
written before the setting existed). Each key is checked to name a spec setting."""

_UNITS = {info.key: info.unit for info in METRICS}


def _lookup(spec: dict[str, Any], dotted: str) -> Any:
    node: Any = spec
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _param(value: Any) -> str:
    """A hyper-parameter as written in a spec: lists as ``[64, 64]``, None as ``none``, floats short."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_param(item) for item in value) + "]"
    return str(value)


def _show(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 2:
        return f"{value[0]} → {value[1]}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else f"{value:.6g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def spec_summary(spec: dict[str, Any], benchmark_name: str | None = None) -> list[tuple[str, str]]:
    """``(label, text)`` rows for the keys of :data:`SPEC_ROWS` present (and not null) in ``spec``.

    With ``benchmark_name`` (the result the backtest measured alpha and beta against) a
    "Benchmark" row says what was actually used: the market ETF, or equal weight when the dataset
    lacks the ETF the spec names.
    """
    rows = []
    for label, dotted in SPEC_ROWS:
        value = _lookup(spec, dotted)
        if value is not None:
            rows.append((label, _show(value)))
    if benchmark_name is not None:
        rows.insert(min(6, len(rows)), ("Benchmark", benchmark_text(spec, benchmark_name)))
    return rows


def benchmark_text(spec: dict[str, Any], benchmark_name: str) -> str:
    """What the benchmark really was: ``"QQQ (market ETF)"`` or ``"equal_weight (QQQ not in the data)"``."""
    symbol = str(spec.get("benchmark_symbol") or "")
    if benchmark_name == "market":
        return f"{symbol} (market ETF)" if symbol else "market"
    if not symbol:
        return f"{benchmark_name} (no market ETF set in the spec)"
    return f"{benchmark_name} ({symbol} is not in the dataset)"


@dataclass(frozen=True)
class WinnerDetails:
    """The selected agent (leaderboard rank 1): lineage facts and hyper-parameters, as text rows."""

    lineage: list[tuple[str, str]]
    hyperparameters: list[tuple[str, str]]
    ensemble_pods: list[str]


def ensemble_members(entries: list[dict[str, Any]], ensemble_k: int | None) -> list[dict[str, Any]]:
    """The entries the run's ensemble averages: the best entry of each of the ``ensemble_k`` best
    DISTINCT lineages (``lineage_id``), best first, as the pipeline selects them
    (:meth:`podracer.leaderboard.Leaderboard.top_lineage_ranks`); empty when fewer than two
    lineages (the run then backtests no ensemble) or when a record lacks its ``lineage_id``.

    Args:
        entries: leaderboard records (``rank`` 1 = best), as the run saved them.
        ensemble_k: the spec's ``tournament.ensemble_k``.
    """
    ranked = sorted(entries, key=lambda entry: int(entry.get("rank", 0)))
    if any("lineage_id" not in entry for entry in ranked):
        return []
    members: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for entry in ranked:
        if len(members) >= (ensemble_k or 0):
            break
        if entry["lineage_id"] not in seen:
            seen.add(entry["lineage_id"])
            members.append(entry)
    return members if len(members) >= 2 else []


def winner_details(entries: list[dict[str, Any]], ensemble_k: int | None) -> WinnerDetails | None:
    """Lineage and hyper-parameters of the best leaderboard entry, from the run's entry records.

    Args:
        entries: leaderboard records (``rank`` 1 = best), as the run saved them.
        ensemble_k: the spec's ``tournament.ensemble_k`` (the ensemble's members are the best
            entries of the top k distinct lineages, :func:`ensemble_members`).
    """
    ranked = sorted(entries, key=lambda entry: int(entry.get("rank", 0)))
    if not ranked:
        return None
    best = ranked[0]
    parent = best.get("parent_id")
    lineage = [
        ("Pod", str(best.get("pod_id", best.get("pod", "?")))),
        ("Started from", "scratch" if parent is None else f"pod {parent}'s snapshot"),
        ("Generation (parent links back to a fresh pod)", str(best.get("generation", "?"))),
        ("Training rounds behind the weights (lineage included)", _show(best.get("policy_version"))),
        ("Env steps learned (lineage included)", _show(best.get("env_steps"))),
        ("Validation score", f"{float(best['score']):.4f}" if "score" in best else "?"),
        ("Seed", _show(best.get("seed"))),
        ("Admitted", str(best.get("created_at", "?"))),
    ]
    config = best.get("agent_config") or {}
    fields = config.get("fields", config) if isinstance(config, dict) else {}
    hyperparameters = [(str(key), _param(value)) for key, value in sorted(fields.items())]
    members = [str(entry.get("pod_id", "?")) for entry in ensemble_members(ranked, ensemble_k)]
    return WinnerDetails(
        [(label, text) for label, text in lineage if text not in ("None", "?")], hyperparameters, members
    )


def _fmt(metrics: dict[str, MetricValue], key: str) -> str:
    return format_value(metrics[key], _UNITS[key])


def headline(
    primary: str,
    backtest_metrics: dict[str, dict[str, MetricValue]],
    benchmark_name: str,
    validation_metrics: dict[str, dict[str, MetricValue]] | None,
) -> list[tuple[str, str, str]]:
    """Summary-strip cards ``(label, value, detail)`` for the primary trader on the backtest segment."""
    mine = backtest_metrics[primary]
    bench = backtest_metrics.get(benchmark_name)

    def versus(key: str) -> str:
        return f"{benchmark_name}: {_fmt(bench, key)}" if bench is not None else "no benchmark"

    cards = [
        ("Sharpe", _fmt(mine, "sharpe_ratio"), versus("sharpe_ratio")),
        ("Annual return", _fmt(mine, "annual_return"), versus("annual_return")),
        ("Max drawdown", _fmt(mine, "max_drawdown"), versus("max_drawdown")),
        ("Calmar", _fmt(mine, "calmar_ratio"), versus("calmar_ratio")),
        ("Final equity", _fmt(mine, "final_equity_usd"), f"costs paid {_fmt(mine, 'costs_usd')}"),
    ]
    if validation_metrics is not None and primary in validation_metrics:
        cards.append(
            ("Validation Sharpe", _fmt(validation_metrics[primary], "sharpe_ratio"), "selection segment")
        )
    return [
        (f"{label} · {primary}" if index == 0 else label, value, detail)
        for index, (label, value, detail) in enumerate(cards)
    ]


def short_segment_caveats(backtest: BacktestResult, validation: BacktestResult | None) -> list[str]:
    """Warnings shown at the top of the page when a segment is shorter than a year of sessions."""
    caveats = []
    for segment in (backtest, validation):
        if segment is None:
            continue
        sessions = max((len(result.returns) for result in segment.traders.values()), default=0)
        if sessions < SESSIONS_PER_YEAR:
            caveats.append(
                f"The {segment.segment} segment has {sessions} sessions, less than a year "
                f"({SESSIONS_PER_YEAR}): annualised figures (annual return and volatility, Sharpe, "
                "Sortino, Calmar, alpha, turnover per year) extrapolate a short sample and are noisy."
            )
    return caveats


COSTLY_TRADER_ANNUAL_COST: Final[float] = 0.01
"""A learned trader paying at least this fraction of its starting capital a year in fees and
slippage (and :data:`COSTLY_TRADER_COST_RATIO` times equal weight's) gets a caveat."""
COSTLY_TRADER_COST_RATIO: Final[float] = 3.0
"""... and at least this many times equal weight's costs."""


def annual_cost_fraction(backtest: BacktestResult, name: str) -> float:
    """Fees plus slippage trader ``name`` paid a year, as a fraction of the starting capital (0 for
    an empty segment)."""
    result = backtest.traders[name]
    sessions = len(result.returns)
    if sessions == 0:
        return 0.0
    return float(result.costs_usd.sum()) / backtest.initial_cash_usd * SESSIONS_PER_YEAR / sessions


def _sharpe(returns: pd.Series) -> float:
    """Mean over standard deviation of daily returns (not annualised: for comparisons); 0 when flat."""
    spread = float(returns.std(ddof=1)) if len(returns) > 1 else 0.0
    return float(returns.mean()) / spread if spread > 0.0 else 0.0


def cost_caveats(backtest: BacktestResult, equal_weight: str = "equal_weight") -> list[str]:
    """A warning (one sentence, or none) naming the learned traders that trailed equal weight's
    Sharpe while their costs dwarfed its own (:data:`COSTLY_TRADER_ANNUAL_COST`,
    :data:`COSTLY_TRADER_COST_RATIO`), pointing at the no-trade band: on real NASDAQ-100 daily bars
    at a 0.2 % fee, traders without one turned their books over about 20 times a year, paid about
    5 % of their capital and trailed equal weight (BENCHMARKS.md "Real daily bars at a 0.2 % fee").
    A trader that beat equal weight after its costs is not warned about: trading often can be its
    edge (the demo's one-day reversal)."""
    if equal_weight not in backtest.traders:
        return []
    baseline = annual_cost_fraction(backtest, equal_weight)
    baseline_sharpe = _sharpe(backtest.traders[equal_weight].returns)
    costly = []
    for name, result in backtest.traders.items():
        paid = annual_cost_fraction(backtest, name)
        if result.kind != "trader" or paid < COSTLY_TRADER_ANNUAL_COST:
            continue
        if paid < COSTLY_TRADER_COST_RATIO * baseline or _sharpe(result.returns) >= baseline_sharpe:
            continue
        rebalancing = turnover_after_entry(result.turnover)
        turnover = float(rebalancing.mean()) * SESSIONS_PER_YEAR if len(rebalancing) else 0.0
        costly.append(f"{name} {paid:.1%} of the starting capital a year (turnover {turnover:.0f}x)")
    if not costly:
        return []
    return [
        f"Costs: fees and slippage took {', '.join(costly)}, against equal weight's {baseline:.1%}. "
        "A wider no-trade band ([env] rebalance_band, a fraction of equity; about half a position "
        "helped on 100 names) keeps positions through small changes of target; compare it on "
        "validation."
    ]


def page_caveats(backtest: BacktestResult, validation: BacktestResult | None) -> list[str]:
    """The warnings at the top of the report: short segments, then costs (:func:`cost_caveats`)."""
    return [*short_segment_caveats(backtest, validation), *cost_caveats(backtest)]


def report_notes(
    backtest: BacktestResult, validation: BacktestResult | None, tearsheet_note: str | None
) -> list[str]:
    """Caveats shown at the end of the report, one sentence each."""
    notes = [
        "Figures come from daily simple returns at each session close, computed with empyrical; ratios are "
        f"annualised with {SESSIONS_PER_YEAR} sessions per year and a zero risk-free rate.",
        "A dash marks an undefined figure (zero volatility, as for cash, or too few sessions).",
        "Costs are the env's model (proportional fee plus half-spread slippage, volume cap); "
        "real fills differ.",
    ]
    if validation is not None:
        notes.append(
            "Traders were selected on the validation segment "
            f"({validation.start.date()} → {validation.end.date()}); "
            f"the backtest segment ({backtest.start.date()} → {backtest.end.date()}) is held out."
        )
    num_sessions = max((len(result.returns) for result in backtest.traders.values()), default=0)
    window = rolling_sharpe_window(num_sessions)
    if window != ROLLING_SHARPE_WINDOW_SESSIONS:
        shown = "not drawn" if window is None else f"drawn with a {window}-session window"
        notes.append(
            f"The backtest has {num_sessions} sessions: the rolling Sharpe is {shown} "
            f"(standard window {ROLLING_SHARPE_WINDOW_SESSIONS})."
        )
    for segment in (backtest, validation):
        if segment is not None:
            notes.extend(f"{segment.segment}: {note}" for note in segment.notes)
    if tearsheet_note is not None:
        notes.append(tearsheet_note)
    return notes
