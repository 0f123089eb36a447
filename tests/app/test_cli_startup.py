"""The CLI starts without the benchmarks, the pipeline or alpaca-py, and its help without torch or pandas:
the commands that use them load them (``finpod --help`` took about 1.9 s on a 2-core box when the
CLI's modules imported the data layer and the engine at the top, 0.3 s without)."""

from __future__ import annotations

import subprocess
import sys

from finpod.bench import skill_bench
from finpod.bench.skill_names import CASE_NAMES, CONTENDERS, DEFAULT_CASES, HYPER_SETS

HEAVY = (
    "finpod.bench.skill_bench",
    "finpod.pipeline.main",
    "finpod.report",
    "empyrical",
    "matplotlib",
    "alpaca",  # `finpod data fetch` and `finpod paper` load it (about 0.6 s)
)


def test_importing_the_cli_loads_no_benchmark_pipeline_report_or_alpaca() -> None:
    probe = f"import sys, finpod.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


ENGINE_AND_FRAMES = ("torch", "pandas", "pyarrow", "podracer.api")


def test_help_loads_neither_torch_nor_pandas() -> None:
    probe = (
        "import sys\n"
        "from finpod.cli import app\n"
        "try:\n"
        "    app(['--help'], standalone_mode=False)\n"
        "    app(['data', 'synth', '--help'], standalone_mode=False)\n"
        "    app(['run', '--help'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {ENGINE_AND_FRAMES!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "data synth" in done.stdout or "--out" in done.stdout  # the helps were printed
    assert done.stdout.strip().splitlines()[-1] == "LOADED []"


def test_skill_choices_offered_by_the_cli_are_the_bench_s_own() -> None:
    assert tuple(skill_bench.CASES) == CASE_NAMES
    assert set(DEFAULT_CASES) <= set(CASE_NAMES)
    assert skill_bench.CONTENDERS == CONTENDERS
    assert skill_bench.HYPER_SETS == HYPER_SETS
