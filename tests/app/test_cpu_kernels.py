"""torch's CPU kernels are pinned to AVX2 on x86-64 (the same figures on AVX2 and AVX-512 machines)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from finpod.cpu_kernels import KERNEL_PINS, X86_64, machine_record, pin_cpu_kernels


def test_pins_are_set_on_x86_64_where_unset() -> None:
    environ: dict[str, str] = {}
    assert pin_cpu_kernels(environ, "x86_64") == KERNEL_PINS
    assert environ == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def test_a_users_setting_wins() -> None:
    environ = {"ATEN_CPU_CAPABILITY": "avx512"}
    assert pin_cpu_kernels(environ, "AMD64") == {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    assert environ["ATEN_CPU_CAPABILITY"] == "avx512"


def test_other_architectures_are_left_alone() -> None:
    environ: dict[str, str] = {}
    assert pin_cpu_kernels(environ, "aarch64") == {}
    assert environ == {}


def test_importing_finpod_makes_torch_run_avx2_kernels_and_the_record_says_so() -> None:
    """A fresh process: finpod first, then torch's first kernel runs the AVX2 set (on x86-64)."""
    probe = (
        "import json, finpod, torch; from finpod.cpu_kernels import machine_record; "
        "torch.ones(8).sum(); print(json.dumps(machine_record()))"
    )
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_PINS}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    record = json.loads(done.stdout)
    assert record["arch"] == platform.machine()
    if platform.machine().lower() in X86_64:
        assert record["torch_cpu_capability"] == "AVX2"
        assert record["env"]["ATEN_CPU_CAPABILITY"] == "avx2"
    else:
        assert "ATEN_CPU_CAPABILITY" not in record["env"]


def test_machine_record_names_what_figures_depend_on() -> None:
    record = machine_record()
    assert set(record) == {
        "cpu_model",
        "arch",
        "cpu_count",
        "torch_cpu_capability",
        "blas",
        "torch_threads",
        "env",
    }
    assert isinstance(record["cpu_model"], str)
    assert record["cpu_model"]
    assert isinstance(record["torch_threads"], int)
    assert record["torch_threads"] >= 1
    json.dumps(record)
