"""What a replay needs to rebuild a run's observations: its columns and its feature statistics.

A run saves them in ``<run>/trader_inputs.pt`` (loaded with ``weights_only=True``) right after it
builds its selection panel, so :func:`finpod.replay.backtest` never refits them on other data.
"""

from __future__ import annotations

import io
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch

from finpod.data.features import FeatureStats, feature_specs
from finpod.errors import DataError, SpecError
from finpod.pipeline.inputs import load_bars, selection_panel, universe_symbols
from finpod.report.atomic import write_bytes_atomic
from finpod.rundir import RunDir
from finpod.spec import Spec

TRADER_INPUTS_FILE = "trader_inputs.pt"
"""In a run folder: the traded symbols (in column order) and the train-segment feature statistics."""


def save_trader_inputs(run_root: Path, symbols: list[str], stats: FeatureStats) -> Path:
    """Save what a replay needs to rebuild the run's observations: columns and feature statistics."""
    path = run_root / TRADER_INPUTS_FILE
    payload = {
        "symbols": list(symbols),
        "feature_names": list(stats.names),
        "mean": stats.mean.detach().cpu(),
        "std": stats.std.detach().cpu(),
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    write_bytes_atomic(path, buffer.getvalue())  # temp file, fsync, rename: a kill leaves old or new
    return path


def _check_features(path: Path, stats: FeatureStats, spec: Spec) -> None:
    """Refuse statistics of another feature set (a run trained by an earlier finpod, e.g. before the
    returns became cross-sectional ``xs_logret_h``): its trader would read other inputs than it
    learned on."""
    expected = tuple(feature.name for feature in feature_specs(spec.frequency))
    if stats.names != expected:
        pairs = zip(stats.names, expected, strict=False)
        renamed = (f"{old!r} is now {new!r}" for old, new in pairs if old != new)
        changed = next(renamed, f"{len(stats.names)} features, this finpod computes {len(expected)}")
        raise SpecError(
            f"{path}: the run was trained on other features than this finpod computes ({changed}); "
            "fix: train it again with `finpod run` (or use the finpod version that trained it)"
        )


def trader_inputs(run: RunDir, spec: Spec) -> tuple[list[str], FeatureStats]:
    """The run's symbols and feature statistics: saved ones, else recomputed from its spec and data."""
    path = run.root / TRADER_INPUTS_FILE
    if path.is_file():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's note on a foreign pickle protocol
                saved: dict[str, Any] = torch.load(path, weights_only=True)
            stats = FeatureStats(tuple(saved["feature_names"]), saved["mean"], saved["std"])
            symbols = list(saved["symbols"])
        except (OSError, RuntimeError, EOFError, KeyError, TypeError, pickle.UnpicklingError) as err:
            reason = " ".join(str(err).split())[:160]
            raise SpecError(
                f"{path}: cannot be read ({type(err).__name__}: {reason}): truncated, or not written by "
                "`finpod run`; fix: restore the run folder as `finpod run` wrote it"
            ) from None
        _check_features(path, stats, spec)
        return symbols, stats
    bars = load_bars(Path(run.read_info()["dataset"]))
    symbols = universe_symbols(spec, bars)
    panel = selection_panel(spec, bars, symbols, "cpu")
    if panel.feature_stats is None:  # build_panel always fits them; guard for the type checker
        raise DataError(f"{run.root}: the run's panel has no feature statistics")
    return symbols, panel.feature_stats
