"""Fat-finger prices are refused in one line, or dropped / kept as the user says, counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clirun import run_cli
from finpod.data.importers import import_paths
from finpod.data.outliers import BODY_FACTOR, find_outliers
from finpod.data.store import read_dataset
from finpod.data.synth import synth_market
from finpod.errors import DataError

BAD_ROW = 40


def _market(tmp_path: Path, close_factor: float) -> tuple[Path, pd.DataFrame]:
    """Two symbols of minute bars; SYN000's bar ``BAD_ROW`` has close and high times ``close_factor``."""
    bars = synth_market(2, 1, "1min", seed=3)
    bad = bars.index[bars["symbol"] == "SYN000"][BAD_ROW]
    bars.loc[bad, ["close", "high"]] = bars.loc[bad, "close"] * close_factor
    path = tmp_path / "bars.parquet"
    bars.to_parquet(path)
    return path, bars.loc[[bad]]


def test_a_1000x_spike_that_reverses_is_refused_naming_symbol_time_value_and_fix(tmp_path: Path) -> None:
    path, bad = _market(tmp_path, 1000.0)
    with pytest.raises(DataError) as err:
        import_paths([path], tmp_path / "ds")
    message = str(err.value)
    assert f"SYN000 {bad['timestamp'].iloc[0]}: close {bad['close'].iloc[0]:g} is " in message
    assert "the median close" in message
    assert "--on-outlier drop" in message
    assert "--on-outlier keep" in message
    assert not (tmp_path / "ds").exists()


def test_a_close_of_1e300_is_refused(tmp_path: Path) -> None:
    """Finite and positive, so the schema lets it through; absurd, so the outlier check does not."""
    bars = synth_market(1, 1, "1min", seed=3)
    bars.loc[BAD_ROW, ["close", "high"]] = 1e300
    bars.to_parquet(tmp_path / "bars.parquet")
    with pytest.raises(DataError, match=r"SYN000 .*: close 1e\+300 is .*x the median close"):
        import_paths([tmp_path / "bars.parquet"], tmp_path / "ds")


def test_drop_removes_the_bar_and_counts_it(tmp_path: Path) -> None:
    path, bad = _market(tmp_path, 1000.0)
    manifest = import_paths([path], tmp_path / "ds", on_outlier="drop")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.repairs["outlier_bars_dropped"] == 1
    assert bad["timestamp"].iloc[0] not in set(bars.loc[bars["symbol"] == "SYN000", "timestamp"])
    assert bars["close"].max() < 1000.0


def test_keep_imports_the_bar_as_given_and_counts_it(tmp_path: Path) -> None:
    path, bad = _market(tmp_path, 1000.0)
    manifest = import_paths([path], tmp_path / "ds", on_outlier="keep")
    bars, _ = read_dataset(tmp_path / "ds")
    assert manifest.repairs["outlier_bars_kept"] == 1
    assert bars["close"].max() == bad["close"].iloc[0]


def test_a_move_to_a_new_level_is_no_outlier() -> None:
    """A price that jumps 10x and stays there (a takeover, a unit change the user meant) is not flagged."""
    bars = synth_market(1, 1, "1min", seed=3)
    later = bars.index >= len(bars) // 2
    bars.loc[later, ["open", "high", "low", "close"]] *= 10.0
    assert find_outliers(bars).count == 0


def test_a_bar_just_inside_the_factor_passes_and_just_outside_fails() -> None:
    bars = synth_market(1, 1, "1min", seed=3)
    level = float(bars["close"].iloc[:21].median())
    for factor, flagged in ((BODY_FACTOR * 0.99, 0), (BODY_FACTOR * 1.01, 1)):
        moved = bars.copy()
        moved.loc[10, ["close", "high"]] = level * factor
        assert find_outliers(moved).count == flagged


def test_a_non_positive_price_after_adjustment_is_an_outlier() -> None:
    bars = synth_market(1, 1, "1min", seed=3)
    bars.loc[5, "low"] = 0.0
    found = find_outliers(bars)
    assert np.flatnonzero(found.mask).tolist() == [5]
    assert "low 0 is not a usable price after adjustment" in found.first


def test_cli_refusal_is_one_line_exit_2(tmp_path: Path) -> None:
    path, _ = _market(tmp_path, 1000.0)
    result = run_cli("data", "import", str(path), "--out", str(tmp_path / "ds"))
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--on-outlier drop" in result.stderr
    assert not (tmp_path / "ds").exists()
    kept = run_cli("data", "import", str(path), "--out", str(tmp_path / "ds"), "--on-outlier", "keep")
    assert kept.exit_code == 0, kept.stderr
    assert "outlier_bars_kept 1" in kept.stdout
