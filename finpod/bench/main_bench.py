"""``finpod bench main``: the real ``finpod run`` on a named shape, timed phase by phase.

It runs the main job itself (:func:`finpod.pipeline.main.run`: data, tournament, selection,
backtests, report) and reads back what the run recorded in ``run.json``: the wall seconds of each
phase and the process's peak memory. Training throughput *with learning* is the tournament's env
steps divided by the train phase's seconds (validation of the pods included, as a user waits for it).
In the same process, ``finpod bench train`` measures one PPO agent at the same shape (envs, assets,
features, network, epochs), and the ratio of the two says how far the main job is from its own
training bench. On CUDA a sampler polls ``nvidia-smi`` for the GPU's busy share and memory, per phase.

Shapes (:data:`SHAPES`):

* ``daily20``: the demo (``strategies/demo.toml``: 20 synthetic stocks, daily bars, its settings);
* ``minute100``: the paper's shape: 100 synthetic stocks of minute bars with the reference minute
  spec's costs, network (flat MLP 512 x 512), envs (1,024) and pool (4); ``--days`` sets its length
  (1,360 sessions in the paper; a CPU wants far fewer).

``--set SECTION.KEY=VALUE`` overrides either, as with ``finpod run``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import empyrical as ep
import pandas as pd
import torch
from rich.console import Console

from finpod.backtest.threads import torch_threads
from finpod.bench.train_bench import run_train_bench
from finpod.data.xnas_sessions import sessions_from
from finpod.errors import SpecError
from finpod.paths import example_specs
from finpod.pipeline.phases import PHASES
from finpod.pipeline.trader_inputs import TRADER_INPUTS_FILE
from finpod.spec import Spec

SHAPES: Final[tuple[str, ...]] = ("daily20", "minute100")
"""Named shapes of the main job."""
MINUTE_BARS_PER_SESSION: Final[int] = 390
SPLIT: Final[tuple[float, float]] = (0.7, 0.85)
"""minute100: train on the first 70 % of the sessions, validate on the next 15 %, backtest the rest."""
GPU_POLL_S: Final[float] = 0.5
"""Seconds between two ``nvidia-smi`` samples."""
TRAIN_BENCH_ROUNDS: Final[int] = 10
"""Timed rounds of the same-shape ``bench train`` (after one untimed round). Three rounds of the demo's
shape took 0.2 s and gave 2,891-4,136 samples/s from one run to the next."""


@dataclass(frozen=True)
class MainBenchResult:
    """One ``finpod bench main`` measurement.

    Attributes:
        shape: the named shape.
        device: where the run trained.
        backend: the tournament backend.
        pool_size: pods in the pool.
        num_envs: envs per pod.
        num_assets: assets ``M``.
        phase_seconds: wall seconds of each phase (data, train, validate, backtest, report).
        total_seconds: wall seconds of the whole run.
        env_steps: env steps the tournament trained.
        env_steps_per_second: ``env_steps`` / the train phase's seconds (learning and the pods'
            validation included).
        train_bench_samples_per_second: one PPO agent at the same shape (``finpod bench train``),
            at the training's torch thread count.
        ratio_to_train_bench: ``env_steps_per_second / train_bench_samples_per_second``.
        peak_rss_bytes: the process's peak resident memory during the run.
        peak_worker_rss_bytes: the largest peak of its pod worker processes (``processes`` backend;
            pages shared with the run's process counted in both), 0 without any.
        torch_threads: torch threads of the training computation (run.json).
        best_backtest_sharpe: the best trader's backtest Sharpe (a sanity check, not a score).
        gpu_busy_percent: mean GPU utilisation per phase (CUDA only; empty elsewhere).
        gpu_memory_mib: peak GPU memory used per phase (CUDA only).
        evaluation_share: of the pods' round time in training, the share spent scoring them on
            validation (the rest is collecting and learning), from the run's events.
        gpu_timeline: every ``nvidia-smi`` poll as ``(seconds since the run began, busy %, memory
            MiB)`` (CUDA only), to see which stretch of a phase leaves the GPU idle.
    """

    shape: str
    device: str
    backend: str
    pool_size: int
    num_envs: int
    num_assets: int
    phase_seconds: dict[str, float]
    total_seconds: float
    env_steps: int
    env_steps_per_second: float
    train_bench_samples_per_second: float
    ratio_to_train_bench: float
    peak_rss_bytes: int
    torch_threads: int
    best_backtest_sharpe: float
    evaluation_share: float = 0.0
    peak_worker_rss_bytes: int = 0
    gpu_busy_percent: dict[str, float] = field(default_factory=dict)
    gpu_memory_mib: dict[str, float] = field(default_factory=dict)
    gpu_timeline: list[tuple[float, float, float]] = field(default_factory=list)


def shape_spec(shape: str, days: int | None, overrides: Sequence[str]) -> Spec:
    """The spec of a named shape with ``--set`` overrides applied.

    Raises:
        SpecError: an unknown shape, a bad ``--days`` or a bad override.
    """
    from finpod.spec.overrides import apply_overrides

    if shape not in SHAPES:
        raise SpecError(f"unknown shape {shape!r}; pick one of {', '.join(SHAPES)}")
    if shape == "daily20":
        spec = Spec.from_toml(packaged_strategy("demo.toml"))
    else:
        spec = _minute_spec(days if days is not None else 20)
    return apply_overrides(spec, list(overrides))


def packaged_strategy(name: str) -> Path:
    """The example spec ``name`` shipped in the package (:func:`finpod.paths.example_specs`)."""
    return next(path for path in example_specs() if path.name == name)


def _minute_spec(days: int) -> Spec:

    if days < 8:
        raise SpecError(
            f"--days must be >= 8 for minute100 (train, validation and backtest sessions), got {days}"
        )
    start = "2016-01-04"
    dates = pd.DatetimeIndex(sessions_from(pd.Timestamp(start), days).session_dates)
    train_end, validation_end = (int(days * cut) for cut in SPLIT)
    reference = tomllib.loads(packaged_strategy("nasdaq100_minute.toml").read_text())
    horizon = min(reference["env"]["horizon_bars"], (train_end - 1) * MINUTE_BARS_PER_SESSION // 2)
    raw: dict[str, Any] = {
        **reference,
        "name": "bench_minute100",
        "universe": "all",
        "data": {
            "source": "synthetic",
            "synthetic": {"n_symbols": 100, "n_days": days, "start_date": start, "seed": 0},
        },
        "segments": {
            "train": [str(dates[0].date()), str(dates[train_end - 1].date())],
            "validation": [str(dates[train_end].date()), str(dates[validation_end - 1].date())],
            "backtest": [str(dates[validation_end].date()), str(dates[-1].date())],
        },
        "env": {**reference["env"], "horizon_bars": horizon},
        "tournament": {**reference["tournament"], "budget_env_steps": 1_048_576, "budget_seconds": 120.0},
    }
    return Spec.from_dict(raw)


class GpuSampler:
    """Polls ``nvidia-smi`` in a thread: utilisation (%) and memory used (MiB) with their times."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        """``(perf_counter time, busy %, memory MiB)`` per poll."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="finpod-gpu-sampler", daemon=True)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
        while not self._stop.is_set():
            try:
                text = subprocess.run(query, capture_output=True, text=True, timeout=5, check=True).stdout
            except (OSError, subprocess.SubprocessError):
                return
            sample = parse_nvidia_smi(text)
            if sample is not None:
                self.samples.append((time.perf_counter(), *sample))
            self._stop.wait(GPU_POLL_S)


def parse_nvidia_smi(text: str) -> tuple[float, float] | None:
    """``(busy %, memory MiB)`` of the first GPU in ``nvidia-smi --format=csv,noheader,nounits`` output."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    parts = [part.strip() for part in first.split(",")]
    try:
        return float(parts[0]), float(parts[1])
    except (IndexError, ValueError):
        return None


def per_phase(
    samples: Sequence[tuple[float, float, float]], bounds: dict[str, tuple[float, float]]
) -> tuple[dict[str, float], dict[str, float]]:
    """Mean busy % and peak memory MiB of the samples that fall in each phase's ``(start, end)``."""
    busy: dict[str, float] = {}
    memory: dict[str, float] = {}
    for name, (start, end) in bounds.items():
        inside = [(b, m) for t, b, m in samples if start <= t < end]
        if inside:
            busy[name] = round(sum(b for b, _ in inside) / len(inside), 1)
            memory[name] = max(m for _, m in inside)
    return busy, memory


def scoring_share(events_file: Path) -> float:
    """Of the pods' round seconds in an ``events.jsonl``, the share spent scoring (``eval_seconds``)."""
    learning = scoring = 0.0
    with events_file.open(encoding="utf-8") as lines:
        for line in lines:
            event = json.loads(line)
            if event.get("kind") == "round_finished":
                learning += float(event["data"].get("train_seconds", 0.0))
                scoring += float(event["data"].get("eval_seconds", 0.0))
    total = learning + scoring
    return scoring / total if total > 0 else 0.0


def run_main_bench(
    shape: str, spec: Spec, out: Path | None = None, console: Console | None = None
) -> MainBenchResult:
    """Run ``finpod run`` on ``spec`` (a shape from :func:`shape_spec`) and measure it (see the module).

    Args:
        shape: the shape's name (recorded in the result).
        spec: the run's spec.
        out: keep the run's data and report folders here (None: a temporary folder, removed after).
        console: where the run prints its progress (None: nowhere).
    """
    from finpod.pipeline.main import run

    console = console if console is not None else Console(quiet=True)

    device = torch.device(spec.resolve_device())
    folder = Path(tempfile.mkdtemp(prefix="finpod-bench-main-")) if out is None else out
    try:
        sampler = GpuSampler() if device.type == "cuda" and shutil.which("nvidia-smi") else None
        started = time.perf_counter()
        if sampler is not None:
            with sampler:
                result = run(spec, out=folder / "reports", data_root=folder / "data", console=console)
        else:
            result = run(spec, out=folder / "reports", data_root=folder / "data", console=console)
        total = time.perf_counter() - started
        info = json.loads((result.run_dir / "run.json").read_text())
        best_sharpe = float(ep.sharpe_ratio(result.backtest.traders["best"].returns.to_numpy()))
        inputs = torch.load(result.run_dir / TRADER_INPUTS_FILE, weights_only=True)
        evaluation_share = round(scoring_share(result.run_dir / "tournament" / "events.jsonl"), 3)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    phases = {name: float(info["phase_seconds"][name]) for name in PHASES if name in info["phase_seconds"]}
    env_steps = int(info["tournament_env_steps"])
    steps_per_second = env_steps / phases["train"] if phases.get("train") else 0.0
    busy: dict[str, float] = {}
    memory: dict[str, float] = {}
    if sampler is not None:
        bounds, edge = {}, started
        for name, seconds in phases.items():
            bounds[name] = (edge, edge + seconds)
            edge += seconds
        busy, memory = per_phase(sampler.samples, bounds)
    num_assets = len(inputs["symbols"])
    training_threads = int(info["torch_threads"]["training"])
    with torch_threads(training_threads):  # the run may leave the process at another count
        bench = run_train_bench(
            num_envs=spec.env.num_envs,
            num_assets=num_assets,
            num_features=len(inputs["feature_names"]),
            num_sessions=10,
            device=device,
            config=spec.agent_config(),
            warmup_rounds=1,
            rounds=TRAIN_BENCH_ROUNDS,
            matmul_size=512,
            matmul_repeats=2,
            seed=spec.seed,
        )
    return MainBenchResult(
        shape=shape,
        device=str(device),
        backend=str(info["backend"]),
        pool_size=spec.tournament.pool_size,
        num_envs=spec.env.num_envs,
        num_assets=num_assets,
        phase_seconds={name: round(value, 2) for name, value in phases.items()},
        total_seconds=round(total, 2),
        env_steps=env_steps,
        env_steps_per_second=round(steps_per_second, 1),
        train_bench_samples_per_second=round(bench.samples_per_second, 1),
        ratio_to_train_bench=round(steps_per_second / bench.samples_per_second, 3),
        peak_rss_bytes=int(info["peak_rss_bytes"]),
        peak_worker_rss_bytes=int(info.get("peak_worker_rss_bytes", 0)),
        torch_threads=training_threads,
        best_backtest_sharpe=round(best_sharpe, 3),
        evaluation_share=evaluation_share,
        gpu_busy_percent=busy,
        gpu_memory_mib=memory,
        gpu_timeline=[(round(t - started, 2), b, m) for t, b, m in sampler.samples] if sampler else [],
    )


def as_json(result: MainBenchResult) -> str:
    """The result as one JSON object."""
    from dataclasses import asdict

    return json.dumps(asdict(result), indent=2)
