"""Render the self-contained ``report.html``: Jinja2 template, images as base64 data URIs, no JS.

The page needs nothing outside itself (no fonts, scripts or stylesheets from the network), so it
can be mailed, archived or opened offline.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from finpod.report.formatting import format_value
from finpod.report.leaderboard import LeaderboardEntry
from finpod.report.metrics import METRICS, SESSIONS_PER_YEAR, MetricInfo, MetricValue

if TYPE_CHECKING:
    from finpod.report.summary import WinnerDetails

TABLE_METRICS = tuple(info for info in METRICS if info.key != "num_sessions")
"""Columns of the HTML metrics table (the session count is shown once, in the page header)."""
UNIT_SUFFIX = {"fraction": "%", "ratio": "", "usd": "USD", "count": ""}
"""Unit shown in a metrics table header, by :class:`MetricInfo` unit."""


@dataclass(frozen=True)
class HtmlImage:
    """An image to embed: caption and PNG bytes."""

    title: str
    png: bytes

    @property
    def data_uri(self) -> str:
        """The PNG as a ``data:image/png;base64,...`` URI."""
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass(frozen=True)
class HtmlSegment:
    """One segment's figures for the page: metadata and ``{trader: {metric: value}}``."""

    name: str
    start: str
    end: str
    benchmark_name: str
    num_sessions: int
    kinds: dict[str, str]
    metrics: dict[str, dict[str, MetricValue]]


def best_rows(
    metrics: dict[str, dict[str, MetricValue]], info: MetricInfo, kinds: dict[str, str]
) -> set[str]:
    """The traders holding the best value of one metric column (empty when not ranked).

    Only learned traders compete: a baseline such as cash (no drawdown, no costs) is never "best".
    The direction comes from ``info.better`` (``max_drawdown``: closer to zero is better).
    """
    values = {
        name: row[info.key]
        for name, row in metrics.items()
        if row[info.key] is not None and kinds.get(name) == "trader"
    }
    if info.better == "none" or len(values) < 2:
        return set()
    pick = min if info.better == "lower" else max
    target = pick(value for value in values.values() if value is not None)
    return {name for name, value in values.items() if value == target}


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("finpod.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["fmt"] = format_value
    return environment


def render_html(
    *,
    title: str,
    run_info: dict[str, Any],
    spec_summary: list[tuple[str, str]],
    headline: list[tuple[str, str, str]],
    backtest: HtmlSegment,
    validation: HtmlSegment | None,
    plots: list[HtmlImage],
    tearsheet_sections: list[tuple[str, list[HtmlImage]]],
    tearsheet_tables_html: list[str],
    tearsheet_trader: str,
    leaderboard: list[LeaderboardEntry],
    notes: list[str],
    caveats: list[str] | None = None,
    winner: WinnerDetails | None = None,
    verdicts: list[dict[str, Any]] | None = None,
    pick: dict[str, Any] | None = None,
) -> str:
    """Fill the report template.

    Args:
        title: page title (run id).
        run_info: run metadata shown in the footer (``key: value``).
        spec_summary: ``(label, value)`` rows of the spec summary.
        headline: ``(label, value, detail)`` cards of the summary strip.
        backtest: the backtest segment's metrics.
        validation: the validation segment's metrics, or ``None``.
        plots: figures, in page order.
        tearsheet_sections: pyfolio panels by tear sheet (``returns``, ``positions``, ...), in order.
        tearsheet_tables_html: pyfolio's own HTML tables (trusted: produced by pandas from numbers).
        tearsheet_trader: the trader the tear sheets describe.
        leaderboard: final leaderboard entries, best first.
        notes: caveats and notes, one sentence each.
        caveats: warnings shown at the top of the page (e.g. a segment shorter than a year).
        winner: the selected agent's lineage and hyper-parameters, or ``None``.
        verdicts: each learned trader against equal weight
            (:meth:`finpod.report.verdict.Verdict.to_json`), shown at the top of the page.
        pick: the run's pick (:meth:`finpod.report.verdict.PickVerdict.to_json`), shown with them.

    Returns:
        The whole HTML document.
    """
    template = _environment().get_template("report.html.j2")
    best = {info.key: best_rows(backtest.metrics, info, backtest.kinds) for info in METRICS}
    return template.render(
        title=title,
        run_info=run_info,
        spec_summary=spec_summary,
        headline=headline,
        backtest=backtest,
        validation=validation,
        metrics_info=TABLE_METRICS,
        unit_suffix=UNIT_SUFFIX,
        best=best,
        plots=plots,
        tearsheet_sections=tearsheet_sections,
        tearsheet_trader=tearsheet_trader,
        tearsheet_tables=[Markup(table) for table in tearsheet_tables_html],
        leaderboard=leaderboard,
        notes=notes,
        caveats=caveats or [],
        winner=winner,
        verdicts=verdicts or [],
        pick=pick,
        sessions_per_year=SESSIONS_PER_YEAR,
    )
