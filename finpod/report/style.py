"""One look for every report figure: palette, fonts, sizes, and PNG rendering without pyplot.

Figures are built on :class:`matplotlib.figure.Figure` directly (Agg canvas), so nothing touches
pyplot's global state or needs a display.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from finpod.report.atomic import write_bytes_atomic

FIGURE_SIZE_IN = (10.0, 4.2)
"""Width and height of a report figure, inches."""
FIGURE_DPI = 110
"""Resolution of saved PNGs, dots per inch."""

TRADER_COLOURS = ("#2563eb", "#7c3aed", "#0d9488", "#db2777", "#ea580c", "#4f46e5")
"""Strong colours for learned traders, in result order."""
BASELINE_COLOURS = {"equal_weight": "#d97706", "linear": "#7c3aed", "market": "#16a34a", "cash": "#6b7280"}
"""Muted, fixed colours for the standard baselines."""
OTHER_BASELINE_COLOURS = ("#a16207", "#65a30d", "#9ca3af")
"""Colours for baselines with non-standard names, in order."""
INK = "#1f2937"
MUTED_INK = "#6b7280"
GRID = "#e5e7eb"

_RC: dict[Any, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9.5,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.titlepad": 10,
    "axes.labelsize": 9.5,
    "axes.labelcolor": INK,
    "axes.edgecolor": "#9ca3af",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": GRID,
    "grid.linewidth": 0.8,
    "xtick.color": MUTED_INK,
    "ytick.color": MUTED_INK,
    "legend.frameon": False,
    "legend.fontsize": 9,
    "text.color": INK,
}


@contextmanager
def report_style() -> Iterator[None]:
    """Apply the report's matplotlib rc settings inside the block only."""
    with mpl.rc_context(_RC):
        yield


def new_figure(*, height_in: float = FIGURE_SIZE_IN[1]) -> Figure:
    """A blank Agg-backed figure of report width; call inside :func:`report_style`."""
    figure = Figure(figsize=(FIGURE_SIZE_IN[0], height_in), dpi=FIGURE_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def format_date_axis(axes: Axes) -> None:
    """Concise, non-overlapping date ticks on the x axis."""
    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def figure_png(figure: Figure) -> bytes:
    """Render a figure to PNG bytes at :data:`FIGURE_DPI`."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=FIGURE_DPI, facecolor="white")
    return buffer.getvalue()


def save_png(figure: Figure, path: Path) -> bytes:
    """Render a figure to PNG, write it atomically to ``path`` and return the bytes."""
    png = figure_png(figure)
    write_bytes_atomic(path, png)
    return png


def colour_for(name: str, kind: str, index_of_kind: int) -> str:
    """Line colour of a trader (``kind == "trader"``) or baseline, stable across figures."""
    if kind == "trader":
        return TRADER_COLOURS[index_of_kind % len(TRADER_COLOURS)]
    return BASELINE_COLOURS.get(name, OTHER_BASELINE_COLOURS[index_of_kind % len(OTHER_BASELINE_COLOURS)])
