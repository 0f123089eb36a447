"""List and compare the runs under a reports folder, as DataFrames (``finpod.runs``, ``finpod runs``).

Read-only: it reads each run's ``run.json``, ``spec.json`` and (once finished) ``metrics.json``;
a folder that is not a run is skipped, an unfinished run is listed with empty figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from finpod.errors import SpecError
from finpod.paths import default_reports_root
from finpod.report.writer import METRICS_FILE
from finpod.rundir import RUN_FILE, RunDir

LISTED_METRICS = ("sharpe_ratio", "annual_return", "max_drawdown", "cumulative_return")
"""Backtest figures of the primary trader shown per run by :func:`runs`."""
INFO_COLUMNS = ("name", "status", "started_at", "device", "spec_hash")


def runs(folder: str | Path | None = None) -> pd.DataFrame:
    """One row per run under ``folder`` (default ``./reports`` or ``$FINPOD_HOME/reports``), newest last.

    Columns: ``name``, ``status``, ``started_at``, ``device``, ``spec_hash``, ``budget_env_steps``,
    ``trader`` (the primary trader), its backtest ``sharpe_ratio``, ``annual_return``,
    ``max_drawdown``, ``cumulative_return`` (fractions; NaN while a run is unfinished),
    ``validation_sharpe`` and ``path``. Index: ``run_id``.

    Raises:
        SpecError: ``folder`` does not exist.
    """
    root = _root(folder)
    rows = [_row(RunDir(path)) for path in sorted(root.iterdir()) if (path / RUN_FILE).is_file()]
    columns = [*INFO_COLUMNS, "budget_env_steps", "trader", *LISTED_METRICS, "validation_sharpe", "path"]
    frame = pd.DataFrame(rows, columns=["run_id", *columns])
    return frame.set_index("run_id")


def compare(run_dirs: Sequence[str | Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Figures and spec differences of several finished runs, side by side.

    Returns:
        ``(metrics, spec_diff)``: ``metrics`` has a ``(run_id, trader)`` index and one column per
        backtest figure; ``spec_diff`` has one row per resolved-spec setting that differs between
        the runs (index: dotted key) and one column per run. A run saved before a setting existed
        shows what it trained with (:func:`_trained_spec`), so only real differences are rows.

    Raises:
        SpecError: fewer than two runs, or one is not a finished run folder.
    """
    if len(run_dirs) < 2:
        raise SpecError("compare needs at least two run folders; fix: pass two or more reports/<run_id>")
    folders = [RunDir(Path(path).expanduser().resolve()) for path in run_dirs]
    tables = []
    specs: dict[str, dict[str, Any]] = {}
    for run in folders:
        run.read_info()
        metrics = _metrics(run)
        if metrics is None:
            raise SpecError(f"{run.root}: not finished (no {METRICS_FILE}); fix: finish it or leave it out")
        traders = metrics["segments"]["backtest"]["traders"]
        table = pd.DataFrame({name: entry["metrics"] for name, entry in traders.items()}).T
        table.index = pd.MultiIndex.from_product([[run.run_id], table.index], names=["run_id", "trader"])
        tables.append(table)
        specs[run.run_id] = _flatten(_trained_spec(run))
    keys = sorted(set().union(*(spec.keys() for spec in specs.values())))
    differing = [key for key in keys if len({json.dumps(spec.get(key)) for spec in specs.values()}) > 1]
    diff = pd.DataFrame(
        {run_id: [_cell(spec.get(key)) for key in differing] for run_id, spec in specs.items()},
        index=pd.Index(differing, name="setting"),
    )
    return pd.concat(tables).astype(float), diff


def _trained_spec(run: RunDir) -> dict[str, Any]:
    """The resolved spec ``run`` trained with, every setting present: its ``spec.toml`` read as the run
    was trained (:meth:`~finpod.rundir.RunDir.load_spec`: a setting the run predates takes the value
    it trained with, one added since with an unchanged behaviour its default), so two runs differ only
    where their training did.

    Raises:
        SpecError: the run's ``spec.toml`` is missing or damaged (one line naming it).
    """
    return run.load_spec().resolved_dict()


def _root(folder: str | Path | None) -> Path:
    root = default_reports_root() if folder is None else Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise SpecError(f"{root}: no such reports folder; fix: pass the folder `finpod run --out` wrote to")
    return root


def _row(run: RunDir) -> dict[str, Any]:
    info = run.read_info()
    spec = _read_json(run.spec_json) if run.spec_json.is_file() else {}
    row: dict[str, Any] = {"run_id": run.run_id, "path": str(run.root)}
    row |= {column: info.get(column if column != "name" else "spec_name") for column in INFO_COLUMNS}
    row["budget_env_steps"] = spec.get("tournament", {}).get("budget_env_steps")
    metrics = _metrics(run)
    if metrics is None:
        return row | {"trader": None} | dict.fromkeys((*LISTED_METRICS, "validation_sharpe"), math.nan)
    primary = str(metrics.get("primary_trader", "best"))
    segments = metrics["segments"]
    figures = segments["backtest"]["traders"].get(primary, {}).get("metrics", {})
    validation = segments.get("validation", {}).get("traders", {}).get(primary, {}).get("metrics", {})
    row["trader"] = primary
    row |= {key: _number(figures.get(key)) for key in LISTED_METRICS}
    row["validation_sharpe"] = _number(validation.get("sharpe_ratio"))
    return row


def _metrics(run: RunDir) -> dict[str, Any] | None:
    path = run.root / METRICS_FILE
    if not path.is_file():
        return None
    return _read_json(path)


def _read_json(path: Path) -> dict[str, Any]:
    """A run's JSON part as a dict; a damaged one is a one-line error naming it."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        reason = " ".join(str(err).split())
        raise SpecError(
            f"{path}: not valid JSON ({reason}); fix: restore the run folder as `finpod run` wrote it, "
            f"or move {path.parent} out of the way"
        ) from None
    if not isinstance(payload, dict):
        raise SpecError(f"{path}: not a JSON object; fix: restore the run folder as `finpod run` wrote it")
    return payload


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat |= _flatten(value, f"{name}.")
        else:
            flat[name] = value
    return flat


def _cell(value: Any) -> str:
    return "-" if value is None else json.dumps(value) if isinstance(value, list | dict) else str(value)
