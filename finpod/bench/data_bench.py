"""``finpod bench data``: bars per second and peak memory of synth -> write -> read -> panel build.

Stages, each timed on its own: the seeded synthetic market (:func:`finpod.data.synth.synth_market`),
writing it as a dataset folder (:func:`finpod.data.store.write_dataset`), reading it back with its
checks (:func:`finpod.data.store.read_dataset`), and building the panel from the bars read
(:func:`finpod.data.panel_builder.build_panel`: alignment, tradable mask, features, train-only
normalisation). Sessions are split 70/15/15 into train, validation and backtest.

Memory is the process's resident set (RSS), so numpy, pandas, arrow and torch CPU allocations all
count. On Linux the kernel's high-water mark (``VmHWM``) is reset before each stage through
``/proc/self/clear_refs`` and read after it: exact. Elsewhere a thread samples RSS with psutil every
:data:`RSS_SAMPLE_SECONDS`. For the panel build the figure that matters is the peak RSS *increase*
over the RSS before the build (the bars it reads are already resident), relative to
``Panel.nbytes()``; on a CUDA device ``torch.cuda.max_memory_allocated`` is reported as well.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

import numpy as np
import pandas as pd
import psutil
import torch

from finpod.data.calendar import calendar_grid, session_day_numbers
from finpod.data.panel import Panel
from finpod.data.panel_builder import build_panel
from finpod.data.store import read_dataset, write_dataset
from finpod.data.synth import synth_market
from finpod.errors import SpecError

SEGMENT_SHARES: Final[tuple[float, float]] = (0.70, 0.15)
"""Train and validation shares of the sessions; the backtest gets the rest."""
MIN_SESSIONS: Final[int] = 3
"""One session per segment at least."""
RSS_SAMPLE_SECONDS: Final[float] = 0.005
_PROC_STATUS: Final[Path] = Path("/proc/self/status")
_PROC_CLEAR_REFS: Final[Path] = Path("/proc/self/clear_refs")
_RESET_PEAK_RSS: Final[str] = "5"
"""Writing 5 to /proc/self/clear_refs resets the process's peak RSS (Linux >= 4.0)."""
_KIB: Final[int] = 1024

T = TypeVar("T")


@dataclass(frozen=True)
class StageResult:
    """One stage of the pipeline.

    Attributes:
        name: ``synth``, ``write``, ``read`` or ``panel``.
        seconds: wall seconds.
        bars_per_second: input bars / seconds.
        rss_before_bytes: resident set before the stage.
        peak_rss_bytes: highest resident set during the stage.
        peak_rss_increase_bytes: ``peak_rss_bytes - rss_before_bytes``.
    """

    name: str
    seconds: float
    bars_per_second: float
    rss_before_bytes: int
    peak_rss_bytes: int
    peak_rss_increase_bytes: int


@dataclass(frozen=True)
class DataBenchResult:
    """Everything ``finpod bench data`` reports.

    Attributes:
        symbols, days, bars: market shape (bars = symbols x minutes of the sessions).
        device: where the panel's tensors live.
        torch_threads: ``torch.get_num_threads()``.
        memory_method: how peaks were measured (``linux VmHWM`` or ``psutil sampling``).
        stages: synth, write, read, panel.
        panel_bars_per_second: bars / seconds of the panel build (the 1M/s target).
        panel_bytes: ``Panel.nbytes()`` (tensors and index arrays).
        panel_shape: ``[T, M, F]``.
        panel_peak_increase_ratio: panel build's peak RSS increase / panel bytes (target < 3).
        cuda_peak_bytes: ``torch.cuda.max_memory_allocated`` during the build, or None on the CPU.
    """

    symbols: int
    days: int
    bars: int
    device: str
    torch_threads: int
    memory_method: str
    stages: list[StageResult]
    panel_bars_per_second: float
    panel_bytes: int
    panel_shape: list[int]
    panel_peak_increase_ratio: float
    cuda_peak_bytes: int | None

    def to_json_dict(self) -> dict[str, object]:
        """The result as plain JSON values."""
        return asdict(self)


def _rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def _linux_peak_reset() -> bool:
    """Reset the kernel's peak-RSS counter; False where that is not possible."""
    try:
        _PROC_CLEAR_REFS.write_text(_RESET_PEAK_RSS)
    except OSError:
        return False
    return True


def _linux_peak_bytes() -> int:
    match = re.search(r"VmHWM:\s+(\d+)\s+kB", _PROC_STATUS.read_text())
    if match is None:
        raise SpecError(f"{_PROC_STATUS} has no VmHWM line; cannot measure peak memory")
    return int(match.group(1)) * _KIB


def memory_method() -> str:
    """How :func:`measure_peak` measures on this machine."""
    return "linux VmHWM" if _linux_peak_reset() else f"psutil sampling every {RSS_SAMPLE_SECONDS} s"


@contextmanager
def measure_peak() -> Iterator[list[int]]:
    """Yield a list that holds ``[rss_before, peak_rss]`` in bytes once the block has run."""
    before = _rss_bytes()
    out = [before, before]
    if _linux_peak_reset():
        yield out
        out[1] = max(_linux_peak_bytes(), before)
        return
    done = threading.Event()

    def sample() -> None:
        while not done.wait(RSS_SAMPLE_SECONDS):
            out[1] = max(out[1], _rss_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield out
    finally:
        done.set()
        sampler.join()
        out[1] = max(out[1], _rss_bytes())


@dataclass(frozen=True)
class _Measured:
    """Wall seconds and RSS before/peak of one call."""

    seconds: float
    rss_before_bytes: int
    peak_rss_bytes: int

    def result(self, name: str, bars: int) -> StageResult:
        """The stage's report for ``bars`` input bars."""
        increase = self.peak_rss_bytes - self.rss_before_bytes
        return StageResult(
            name, self.seconds, bars / self.seconds, self.rss_before_bytes, self.peak_rss_bytes, increase
        )


def _measured(work: Callable[[], T]) -> tuple[T, _Measured]:
    """Run ``work`` and measure its wall time and peak resident set."""
    with measure_peak() as memory:
        started = time.perf_counter()
        value = work()
        seconds = time.perf_counter() - started
    return value, _Measured(seconds, memory[0], memory[1])


def _segments(bars: pd.DataFrame) -> tuple[str, str, dict[str, tuple[str, str]]]:
    """Start, end and a 70/15/15 split of the sessions the bars cover."""
    stamps = np.asarray([bars["timestamp"].min().value, bars["timestamp"].max().value], dtype=np.int64)
    first, last = (str(d) for d in session_day_numbers(stamps).astype("datetime64[D]"))
    dates = [str(d.date()) for d in calendar_grid("1d", first, last).session_dates]
    train_stop = min(max(1, int(len(dates) * SEGMENT_SHARES[0])), len(dates) - 2)
    validation_stop = min(max(train_stop + 1, int(len(dates) * sum(SEGMENT_SHARES))), len(dates) - 1)
    segments = {
        "train": (dates[0], dates[train_stop - 1]),
        "validation": (dates[train_stop], dates[validation_stop - 1]),
        "backtest": (dates[validation_stop], dates[-1]),
    }
    return first, last, segments


def _finished(panel: Panel) -> Panel:
    """``panel`` once the device has finished building it (CUDA kernels run asynchronously)."""
    if panel.device.type == "cuda":
        torch.cuda.synchronize(panel.device)
    return panel


def run_data_bench(
    *, symbols: int, days: int, seed: int, device: torch.device, out: Path | None = None
) -> DataBenchResult:
    """Run the four stages at ``symbols x days`` minute bars.

    Args:
        symbols: synthetic stocks ``M`` (>= 1).
        days: XNAS sessions (>= 3: one per segment).
        seed: the synthetic market's seed.
        device: where the panel's tensors go.
        out: folder for the dataset (must not exist); None uses a temporary folder, removed after.

    Raises:
        SpecError: a count below its minimum.
    """
    if symbols < 1 or days < MIN_SESSIONS:
        raise SpecError(
            f"--symbols must be >= 1 and --days >= {MIN_SESSIONS} (one session per segment), "
            f"got {symbols} and {days}"
        )
    method = memory_method()
    with tempfile.TemporaryDirectory(prefix="finpod-bench-data-") as scratch:
        folder = out if out is not None else Path(scratch) / "dataset"
        bars, synth = _measured(lambda: synth_market(symbols, days, "1min", seed))
        count = len(bars)
        _, write = _measured(
            partial(
                write_dataset,
                bars,
                folder,
                source="synthetic",
                frequency="1min",
                adjustment="synthetic",
                repairs={},
                notes=[],
            )
        )
        del bars
        (read_bars, _), read = _measured(lambda: read_dataset(folder))
        start, end, segments = _segments(read_bars)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        panel, build = _measured(
            lambda: _finished(
                build_panel(
                    read_bars,
                    freq="1min",
                    start=start,
                    end=end,
                    segments=segments,
                    device=device,
                    universe="all",
                )
            )
        )
        cuda_peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None
    stages = [
        synth.result("synth", count),
        write.result("write", count),
        read.result("read", count),
        build.result("panel", count),
    ]
    return DataBenchResult(
        symbols=symbols,
        days=days,
        bars=count,
        device=str(device),
        torch_threads=torch.get_num_threads(),
        memory_method=method,
        stages=stages,
        panel_bars_per_second=stages[-1].bars_per_second,
        panel_bytes=panel.nbytes(),
        panel_shape=[panel.num_bars, panel.num_assets, panel.num_features],
        panel_peak_increase_ratio=stages[-1].peak_rss_increase_bytes / panel.nbytes(),
        cuda_peak_bytes=cuda_peak,
    )
