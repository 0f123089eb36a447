"""The skill bench's learning curves as one PNG: share of the oracle's edge vs env steps and vs seconds."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Final

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen

from finpod.bench.skill_bench import SeedResult

PANEL_WIDTH_IN: Final[float] = 5.5
PANEL_HEIGHT_IN: Final[float] = 3.2
DPI: Final[int] = 110
SEED_LINE_WIDTH: Final[float] = 1.0
SEED_ALPHA: Final[float] = 0.6
AXES: Final[tuple[tuple[int, str], ...]] = ((0, "env steps"), (1, "wall seconds"))
"""Curve column and x-axis label of the two panels of a case's row."""
SHARE: Final[int] = 2
"""The curve column of the held-out share of the oracle's edge."""
EXCESS: Final[int] = 3
"""The curve column of the held-out Sharpe minus equal weight's (plotted where there is no edge)."""


def plot_curves(results: list[SeedResult], path: Path) -> Path:
    """Write one row per case: held-out share vs env steps (left) and vs wall seconds (right).

    Each contender has one colour and one step line per seed (the share of the policy selection
    would pick at that point); the linear baseline's median share is a dashed line, the oracle is 1
    and equal weight 0. A case without an edge (the null cases) shows Sharpe minus equal weight's.

    Args:
        results: what :func:`finpod.bench.skill_bench.run_seed` returned, any cases and seeds.
        path: the PNG to write (its folder is created).

    Returns:
        ``path``.
    """
    cases = list(dict.fromkeys(r.case for r in results))
    keys = list(dict.fromkeys(k for r in results for k in r.contenders))
    colours = {key: f"C{i % 10}" for i, key in enumerate(keys)}
    figure, axes = plt.subplots(
        len(cases), 2, figsize=(2 * PANEL_WIDTH_IN, PANEL_HEIGHT_IN * len(cases)), squeeze=False
    )
    for row, case in enumerate(cases):
        rows = [r for r in results if r.case == case]
        has_edge = any(math.isfinite(r.linear_share) for r in rows)  # finite: the oracle beat EW
        y_column = SHARE if has_edge else EXCESS
        y_label = "share of the oracle's edge" if has_edge else "Sharpe - equal weight"
        reference = [r.linear_share if has_edge else r.linear_sharpe - r.equal_weight_sharpe for r in rows]
        linear = [value for value in reference if math.isfinite(value)]
        for column, label in AXES:
            ax = axes[row][column]
            for key in keys:
                for index, result in enumerate(r for r in rows if key in r.contenders):
                    contender = result.contenders[key]
                    curve = [p for p in contender.curve if math.isfinite(p[y_column])]
                    if curve:  # the last selection holds until training ends
                        curve.append([float(contender.env_steps), contender.seconds, *curve[-1][SHARE:]])
                        ax.step(
                            [point[column] for point in curve],
                            [point[y_column] for point in curve],
                            where="post",
                            color=colours[key],
                            alpha=SEED_ALPHA,
                            linewidth=SEED_LINE_WIDTH,
                            label=key if index == 0 else None,
                        )
            if linear:
                ax.axhline(statistics.median(linear), color="black", linestyle="--", label="linear (median)")
            if has_edge:
                ax.axhline(1.0, color="grey", linewidth=0.8)
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.set_xlabel(label)
            ax.set_ylabel(y_label)
            ax.set_title(f"{case} ({len(rows)} seeds)")
            ax.legend(fontsize="small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path
