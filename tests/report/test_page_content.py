"""What the page says: the benchmark really used, short-segment caveats, green cells, the selected agent."""

from __future__ import annotations

import re

from finpod.report import ReportPaths
from finpod.report.summary import benchmark_text


def _row(html: str, name: str) -> str:
    match = re.search(rf"<tr><td>{name}<span class=\"tag [a-z]+\">.*?</tr>", html, flags=re.DOTALL)
    assert match is not None, name
    return match.group(0)


def test_green_cells_go_to_traders_only(report: ReportPaths) -> None:
    html = report.html.read_text(encoding="utf-8")
    table = html[html.index('id="metrics-table"') : html.index("</table>", html.index('id="metrics-table"'))]
    for baseline in ("equal_weight", "market", "cash"):
        assert 'class="best"' not in _row(table, baseline), baseline
    assert 'class="best"' in _row(table, "best") + _row(table, "ensemble_top3")


def test_benchmark_row_names_what_was_used() -> None:
    assert benchmark_text({"benchmark_symbol": "QQQ"}, "market") == "QQQ (market ETF)"
    assert (
        benchmark_text({"benchmark_symbol": "QQQ"}, "equal_weight")
        == "equal_weight (QQQ is not in the dataset)"
    )


def test_short_segments_carry_a_caveat_at_the_top(report: ReportPaths) -> None:
    html = report.html.read_text(encoding="utf-8")
    caveats = html[html.index('id="caveats"') : html.index('id="spec"')]
    assert "validation segment has 125 sessions, less than a year" in caveats
    assert "backtest segment has 250 sessions" in caveats


def test_selected_agent_lineage_and_hyperparameters_are_shown(report: ReportPaths) -> None:
    html = report.html.read_text(encoding="utf-8")
    section = html[html.index('id="selected"') : html.index("</section>", html.index('id="selected"'))]
    assert "pod-07" in section
    assert "pod pod-02&#39;s snapshot" in section or "pod pod-02's snapshot" in section
    assert "1,312,000" in section
    assert "learning_rate</dt><dd>0.00031" in section
    assert "hidden_sizes</dt><dd>[64, 64]" in section
    assert "pod-07, pod-02, pod-05" not in section  # no ensemble_k in this spec: no member list
