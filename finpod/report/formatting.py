"""Figures as the report shows them: one format per unit, a dash for an undefined figure."""

from __future__ import annotations

from finpod.report.metrics import MetricValue

EM_DASH = "—"
"""How an undefined figure (``None``: NaN or infinite) is shown."""


def format_value(value: MetricValue, unit: str) -> str:
    """Human-readable metric: fractions as percent, USD with thousands separators, ``None`` as a dash."""
    if value is None:
        return EM_DASH
    if unit == "fraction":
        return f"{100.0 * value:,.2f} %"
    if unit == "usd":
        return f"${value:,.0f}"
    if unit == "count":
        return f"{int(value):,}"
    return f"{value:,.2f}"
