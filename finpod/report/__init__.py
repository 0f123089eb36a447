"""Run reports: metrics (empyrical), plots, the pyfolio tear sheet and one self-contained HTML page.

Entry points: :func:`write_report` (the main job calls it after the backtest), :func:`rebuild_report`
(``finpod report RUN_DIR``), :func:`compute_metrics` and :func:`metrics_table` (research scripts).
"""

from finpod.report.metrics import compute_metrics, metrics_table
from finpod.report.writer import ReportPaths, rebuild_report, write_report

__all__ = ["ReportPaths", "compute_metrics", "metrics_table", "rebuild_report", "write_report"]
