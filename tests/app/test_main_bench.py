"""``finpod bench main``: the real main job on a named shape, timed phase by phase."""

from __future__ import annotations

import json

import pytest

from clirun import run_cli
from finpod.bench.main_bench import parse_nvidia_smi, per_phase, shape_spec
from finpod.errors import SpecError
from finpod.pipeline.phases import PHASES, PhaseClock


def test_the_demo_shape_runs_end_to_end_and_reports_every_phase() -> None:
    result = run_cli(
        "bench", "main", "--shape", "daily20", "--set", "tournament.budget_env_steps=2048", "--json"
    )
    assert result.exit_code == 0, result.stderr
    figures = json.loads(result.stdout)
    assert list(figures["phase_seconds"]) == list(PHASES)
    assert all(seconds >= 0 for seconds in figures["phase_seconds"].values())
    assert figures["env_steps"] >= 2048
    assert figures["env_steps_per_second"] > 0
    assert figures["train_bench_samples_per_second"] > 0
    assert figures["ratio_to_train_bench"] == pytest.approx(
        figures["env_steps_per_second"] / figures["train_bench_samples_per_second"], rel=1e-2
    )
    assert figures["num_assets"] == 20
    assert figures["peak_rss_bytes"] > 0
    assert 0.0 < figures["evaluation_share"] < 1.0  # the pods were scored, and they learned


def test_the_minute_shape_is_the_reference_minute_spec_on_100_synthetic_stocks() -> None:
    spec = shape_spec("minute100", 30, ["tournament.pool_size=2"])
    assert spec.frequency == "1min"
    assert spec.data.synthetic is not None
    assert spec.data.synthetic.n_symbols == 100
    assert (spec.env.fee_rate, spec.agent["policy"], tuple(spec.agent["hidden_sizes"])) == (
        0.002,
        "mlp",
        (512, 512),
    )
    assert spec.tournament.pool_size == 2
    with pytest.raises(SpecError, match="--days must be >= 8"):
        shape_spec("minute100", 3, [])
    with pytest.raises(SpecError, match="unknown shape 'weekly'"):
        shape_spec("weekly", None, [])


def test_gpu_samples_are_parsed_and_split_by_phase() -> None:
    assert parse_nvidia_smi("87, 13512\n") == (87.0, 13512.0)
    assert parse_nvidia_smi("[N/A], 0\n") is None
    assert parse_nvidia_smi("") is None
    samples = [(0.5, 90.0, 1000.0), (1.5, 70.0, 3000.0), (2.5, 0.0, 3000.0)]
    busy, memory = per_phase(samples, {"train": (0.0, 2.0), "backtest": (2.0, 3.0), "report": (3.0, 4.0)})
    assert busy == {"train": 80.0, "backtest": 0.0}
    assert memory == {"train": 3000.0, "backtest": 3000.0}


def test_a_phase_clock_adds_laps_of_the_same_phase() -> None:
    clock = PhaseClock()
    clock.lap("data")
    clock.lap("train")
    clock.lap("train")
    assert list(clock.seconds) == ["data", "train"]
    assert all(seconds >= 0 for seconds in clock.seconds.values())
