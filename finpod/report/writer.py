"""Write a run's report folder, and rebuild it from the files it saved.

Layout of ``out_dir`` (everything written atomically):

- ``report.html``: the self-contained page (images as data URIs, no scripts, no network).
- ``metrics.json``: figures per segment and trader (schema below).
- ``returns.csv``, ``equity.csv``, ``costs.csv``, ``turnover.csv``, ``positions.csv``,
  ``transactions.csv``: the backtest segment in pyfolio format (see :mod:`finpod.report.artifacts`);
  ``validation/`` holds the same files for the validation segment when one was given.
- ``plots/<name>.png``: every figure of the page; ``plots/pyfolio_<name>.png``: the pyfolio panels
  (returns, positions, transactions and round-trip tear sheets of the selected trader).
- ``report_inputs.json``: the spec, leaderboard history and entries, and run info the page shows.

``metrics.json`` (``schema_version`` :data:`METRICS_SCHEMA_VERSION`)::

    {"schema_version": 1,
     "units": {metric: "fraction" | "ratio" | "usd" | "count"},
     "conventions": {...},
     "run_info": {...},
     "primary_trader": "best",
     "tearsheet_note": null | "which pyfolio panels were not drawn, and why",
     "segments": {"backtest" | "validation": {
         "segment", "start", "end" (ISO dates), "benchmark_name", "initial_cash_usd", "notes": [...],
         "traders": {name: {"kind": "trader" | "baseline", "metrics": {metric: number | null}}}}},
     "verdict": {"benchmark": "equal_weight", "segment": "backtest", "confidence": 0.95,
         "bootstrap": {...}, "num_trials": N, "traders": {name: {see finpod.report.verdict.Verdict}}},
     "verdict_vs_linear": {the same block, "benchmark": "linear"} (when the run has the baseline),
     "pick": {see finpod.report.verdict.PickVerdict: the selected trader, or equal weight when its
         validation Sharpe did not beat equal weight's} (null without a validation segment),
     "linear_baseline": null | {"ridge": {"coefficients": {feature: number}, "penalty", ...},
         "trading": {"family", "params": {"tilt", "top_fraction", "band"}, "fit_segment", ...}}}

``null`` marks an undefined figure (NaN or infinite: zero volatility, too few sessions).
:func:`rebuild_report` needs only ``metrics.json``, ``report_inputs.json`` and the CSVs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finpod.backtest.result import BacktestResult
from finpod.errors import DataError
from finpod.report.artifacts import (
    METRICS_FILE,
    POSITIONS_FILE,
    SERIES_FILES,
    TRANSACTIONS_FILE,
    read_segment,
    write_segment,
)
from finpod.report.atomic import write_text_atomic
from finpod.report.forked import start_forked
from finpod.report.html import HtmlImage, HtmlSegment, render_html
from finpod.report.leaderboard import parse_entries, parse_history
from finpod.report.metrics import (
    METRICS,
    SESSIONS_PER_YEAR,
    MetricValue,
    benchmark_returns_of,
    segment_metrics,
)
from finpod.report.plots import primary_trader, render_plots, rolling_sharpe_window
from finpod.report.summary import (
    headline,
    page_caveats,
    report_notes,
    spec_summary,
    winner_details,
)
from finpod.report.tearsheet import SECTIONS, TearSheet, import_pyfolio, write_tearsheet
from finpod.report.verdict import (
    BENCHMARK_NAME,
    BOOTSTRAP_SAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    LINEAR_NAME,
    Verdict,
    pick_verdict,
    segment_verdicts,
    validation_trial_scores,
)
from finpod.report.verdict_plot import render_excess_return_plot

METRICS_SCHEMA_VERSION = 1
"""Version of ``metrics.json``'s layout; bumped on any incompatible change."""
HTML_FILE = "report.html"
INPUTS_FILE = "report_inputs.json"
PLOTS_DIR = "plots"
VALIDATION_DIR = "validation"
TEARSHEET_SPLIT = (SECTIONS[:2], SECTIONS[2:])
"""The tear sheet's sections as two halves of about equal drawing time, drawn side by side."""
NOT_RENDERED_NOTE = "report not rendered (--no-report); fix: `finpod report RUN_DIR` renders it"


@dataclass(frozen=True)
class ReportPaths:
    """Where a report's files are.

    Attributes:
        root: the report folder.
        html: ``report.html`` (not written by ``write_report(render=False)``).
        metrics_json: ``metrics.json``.
        returns_csv, positions_csv, transactions_csv: the backtest segment in pyfolio format.
        plots: figure name -> PNG path.
        tearsheets: pyfolio panel name -> PNG path (returns, positions, transactions, round trips).
        validation_dir: the validation segment's CSV folder, or ``None``.
    """

    root: Path
    html: Path
    metrics_json: Path
    returns_csv: Path
    positions_csv: Path
    transactions_csv: Path
    plots: dict[str, Path]
    tearsheets: dict[str, Path]
    validation_dir: Path | None


def _json_text(payload: dict[str, Any]) -> str:
    """Strict JSON (NaN is an error, not ``NaN``); non-JSON values such as paths become strings."""
    return json.dumps(payload, indent=2, allow_nan=False, default=str) + "\n"


def _spec_json(value: Any) -> Any:
    """The resolved spec with its infinite settings as text (``max_participation = inf``: no cap),
    so strict JSON can hold it; every other value unchanged."""
    if isinstance(value, dict):
        return {key: _spec_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_spec_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _segment_meta(backtest: BacktestResult, metrics: dict[str, dict[str, MetricValue]]) -> dict[str, Any]:
    return {
        "segment": backtest.segment,
        "start": backtest.start.date().isoformat(),
        "end": backtest.end.date().isoformat(),
        "benchmark_name": backtest.benchmark_name,
        "initial_cash_usd": backtest.initial_cash_usd,
        "notes": list(backtest.notes),
        "traders": {
            name: {"kind": result.kind, "metrics": metrics[name]} for name, result in backtest.traders.items()
        },
    }


def _html_segment(backtest: BacktestResult, metrics: dict[str, dict[str, MetricValue]]) -> HtmlSegment:
    return HtmlSegment(
        name=backtest.segment,
        start=backtest.start.date().isoformat(),
        end=backtest.end.date().isoformat(),
        benchmark_name=backtest.benchmark_name,
        num_sessions=max((len(result.returns) for result in backtest.traders.values()), default=0),
        kinds={name: result.kind for name, result in backtest.traders.items()},
        metrics=metrics,
    )


def write_report(
    out_dir: Path,
    *,
    backtest: BacktestResult,
    validation: BacktestResult | None,
    spec: dict[str, Any],
    leaderboard_history: list[dict[str, Any]],
    leaderboard_entries: list[dict[str, Any]],
    run_info: dict[str, Any],
    render: bool = True,
    linear_baseline: dict[str, Any] | None = None,
) -> ReportPaths:
    """Write the whole report of a run into ``out_dir`` (see module doc for the layout).

    Args:
        out_dir: the run's folder (created if missing); existing report files are replaced.
        backtest: every trader and baseline over the held-out backtest segment.
        validation: the same over the validation segment, or ``None``.
        spec: the resolved strategy spec (JSON-friendly dict).
        leaderboard_history: snapshots ``{elapsed_s, env_steps, best_score, scores}`` over the run.
        leaderboard_entries: final entries ``{rank, pod_id, generation, parent_id, score, ...}``.
        run_info: run metadata (``run_id``, versions, device, ...), shown in the page footer.
        render: False writes only the data (``metrics.json``, CSVs, ``report_inputs.json``) and
            skips the plots, tear sheet and ``report.html`` (seconds instead of ~25 s);
            ``finpod report RUN_DIR`` renders them later.
        linear_baseline: the linear baseline's fit (:meth:`finpod.linear_baseline.LinearTrader.to_json`),
            or ``None`` when the run has none.

    Returns:
        The paths written.

    Raises:
        pydantic.ValidationError: a leaderboard record or entry lacks a key or has a bad value.
    """
    history = parse_history(leaderboard_history)
    entries = parse_entries(leaderboard_entries)
    if not backtest.traders:
        raise DataError(f"the {backtest.segment} result has no trader; fix: backtest at least one trader")
    write_segment(backtest, out_dir)
    if validation is not None:
        write_segment(validation, out_dir / VALIDATION_DIR)
    inputs = {
        "schema_version": METRICS_SCHEMA_VERSION,
        "spec": _spec_json(spec),
        "leaderboard_history": leaderboard_history,
        "leaderboard_entries": leaderboard_entries,
        "run_info": run_info,
        "linear_baseline": linear_baseline,
    }
    write_text_atomic(out_dir / INPUTS_FILE, _json_text(inputs))

    backtest_metrics = segment_metrics(backtest)
    validation_metrics = None if validation is None else segment_metrics(validation)
    primary = primary_trader(backtest)
    paths = ReportPaths(
        root=out_dir,
        html=out_dir / HTML_FILE,
        metrics_json=out_dir / METRICS_FILE,
        returns_csv=out_dir / SERIES_FILES["returns"],
        positions_csv=out_dir / POSITIONS_FILE,
        transactions_csv=out_dir / TRANSACTIONS_FILE,
        plots={},
        tearsheets={},
        validation_dir=None if validation is None else out_dir / VALIDATION_DIR,
    )
    # the tear sheet (over half of the drawing) in two forked children while this process does the rest
    if render:
        import_pyfolio()  # here, not in each child (no child may wait on an import another thread holds)
    tearsheet_calls = [
        start_forked(
            write_tearsheet,
            primary,
            benchmark_returns_of(backtest),
            benchmark_name=backtest.benchmark_name,
            rolling_window=rolling_sharpe_window(len(primary.returns)),
            plots_dir=out_dir / PLOTS_DIR,
            sections=sections,
        )
        for sections in (TEARSHEET_SPLIT if render else ())
    ]
    try:
        trials = validation_trial_scores(out_dir)
        verdicts = segment_verdicts(backtest, trials)
        linear_verdicts = segment_verdicts(backtest, trials, LINEAR_NAME)
        pick = None if validation is None else pick_verdict(validation)
        plots = render_plots(backtest, history, out_dir / PLOTS_DIR) if render else []
        if render:
            plots.insert(min(2, len(plots)), render_excess_return_plot(backtest, out_dir / PLOTS_DIR))
        parts = [call.result() for call in tearsheet_calls]
        tearsheet = TearSheet.joined(parts) if render else TearSheet([], [], [NOT_RENDERED_NOTE])
    finally:
        for call in tearsheet_calls:
            call.cancel()  # stops a child still drawing when this process failed; else a no-op
    segments = {"backtest": _segment_meta(backtest, backtest_metrics)}
    if validation is not None and validation_metrics is not None:
        segments["validation"] = _segment_meta(validation, validation_metrics)
    metrics_json = {
        "schema_version": METRICS_SCHEMA_VERSION,
        "units": {info.key: info.unit for info in METRICS},
        "conventions": {
            "returns": "daily simple returns at each session close, fractions",
            "annualisation_sessions_per_year": SESSIONS_PER_YEAR,
            "risk_free_rate": 0.0,
            "null": "undefined figure (NaN or infinite)",
        },
        "run_info": run_info,
        "primary_trader": primary.name,
        "tearsheet_note": tearsheet.note,
        "segments": segments,
        "verdict": verdict_json(verdicts),
        "verdict_vs_linear": verdict_json(linear_verdicts, LINEAR_NAME) if linear_verdicts else None,
        "pick": None if pick is None else pick.to_json(),
        "linear_baseline": linear_baseline,
    }
    write_text_atomic(out_dir / METRICS_FILE, _json_text(metrics_json))
    if not render:
        return paths

    html = render_html(
        title=str(run_info.get("run_id", out_dir.name)),
        run_info=run_info,
        spec_summary=spec_summary(spec, backtest.benchmark_name),
        headline=headline(primary.name, backtest_metrics, backtest.benchmark_name, validation_metrics),
        backtest=_html_segment(backtest, backtest_metrics),
        validation=None
        if validation is None or validation_metrics is None
        else _html_segment(validation, validation_metrics),
        plots=[HtmlImage(plot.title, plot.png) for plot in plots],
        tearsheet_sections=[
            (section, [HtmlImage(p.title, p.png) for p in tearsheet.panels if p.section == section])
            for section in SECTIONS
            if any(p.section == section for p in tearsheet.panels)
        ],
        tearsheet_tables_html=tearsheet.tables_html,
        tearsheet_trader=primary.name,
        leaderboard=entries,
        notes=report_notes(backtest, validation, tearsheet.note),
        caveats=page_caveats(backtest, validation),
        winner=winner_details(leaderboard_entries, _ensemble_k(spec)),
        verdicts=[verdict.to_json() for verdict in [*verdicts.values(), *linear_verdicts.values()]],
        pick=None if pick is None else pick.to_json(),
    )
    write_text_atomic(out_dir / HTML_FILE, html)
    return dataclasses.replace(
        paths,
        plots={plot.name: plot.path for plot in plots},
        tearsheets={panel.name: panel.path for panel in tearsheet.panels},
    )


def verdict_json(verdicts: dict[str, Verdict], benchmark: str = BENCHMARK_NAME) -> dict[str, Any]:
    """A ``verdict`` block of ``metrics.json``: every learned trader against ``benchmark``."""
    num_trials = next(iter(verdicts.values())).num_trials if verdicts else 0
    return {
        "benchmark": benchmark,
        "segment": "backtest",
        "confidence": CONFIDENCE,
        "bootstrap": {
            "method": "stationary bootstrap of paired daily returns, mean block n^(1/3) sessions",
            "samples": BOOTSTRAP_SAMPLES,
            "seed": BOOTSTRAP_SEED,
        },
        "num_trials": num_trials,
        "statistic": f"PSR and DSR are of the daily active return (trader - {benchmark})",
        "traders": {name: verdict.to_json() for name, verdict in verdicts.items()},
    }


def _ensemble_k(spec: dict[str, Any]) -> int | None:
    value = spec.get("tournament", {}).get("ensemble_k") if isinstance(spec.get("tournament"), dict) else None
    return int(value) if isinstance(value, int) else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DataError(f"{path}: missing; fix: pass a run folder written by `finpod run`, or rerun it")
    try:
        payload: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not valid JSON ({error}); fix: rerun `finpod run`") from None
    version = payload.get("schema_version")
    if version != METRICS_SCHEMA_VERSION:
        raise DataError(
            f"{path}: schema_version {version!r}, this finpod reads {METRICS_SCHEMA_VERSION}; "
            "fix: rebuild with the finpod version that wrote it, or rerun `finpod run`"
        )
    return payload


def rebuild_report(run_dir: Path) -> ReportPaths:
    """Re-render a report folder from its saved files (``finpod report RUN_DIR``).

    Reads ``metrics.json`` (segment metadata), ``report_inputs.json`` and the CSVs, recomputes every
    figure and rewrites the report: the result equals what :func:`write_report` wrote.

    Raises:
        DataError: a needed file is missing, unreadable, or from another schema version.
    """
    metrics_json = _read_json(run_dir / METRICS_FILE)
    inputs = _read_json(run_dir / INPUTS_FILE)
    segments = metrics_json["segments"]
    backtest = read_segment(run_dir, segments["backtest"])
    validation = (
        read_segment(run_dir / VALIDATION_DIR, segments["validation"]) if "validation" in segments else None
    )
    return write_report(
        run_dir,
        backtest=backtest,
        validation=validation,
        spec=inputs["spec"],
        leaderboard_history=inputs["leaderboard_history"],
        leaderboard_entries=inputs["leaderboard_entries"],
        run_info=inputs["run_info"],
        linear_baseline=inputs.get("linear_baseline"),
    )
