"""The same figures on every x86 machine: torch's CPU kernels pinned to AVX2, and the machine recorded.

A run's CPU figures depended on two things besides the commit and the spec, measured on the demo
(one 2-core AMD EPYC box that has AVX-512; each setting reproduced itself bit for bit):

* torch's vectorised CPU kernels (sums, softmax, exp/log, the Adam step...), which torch picks by
  the CPU's widest instruction set: AVX-512 on one machine, AVX2 on the next (AMD Zen 4 vs Zen 3,
  two Intel generations rented as "the same kind"). They add in another order, the last bit of a
  float differs, and training amplifies it: ensemble Sharpe 2.65 with AVX-512 kernels, 2.27 with
  AVX2 ones (``ATEN_CPU_CAPABILITY``; best trader 3.21 vs 3.28);
* the thread count at agent creation (orthogonal initialisation runs LAPACK on all cores: 2.65 at
  one thread, 2.39 at two, AVX-512): fixed in :func:`finpod.pipeline.training.agent_factory`,
  which builds agents on one thread (1, 2 and 4 threads now give one leaderboard).

So finpod sets ``ATEN_CPU_CAPABILITY=avx2`` (and caps MKL at AVX2 with ``MKL_ENABLE_INSTRUCTIONS``)
when it is imported, before torch runs its first kernel, on x86-64 machines, unless the user set
them: every x86-64 server CPU of the last decade runs AVX2, so two such machines run the same
kernels. Set ``ATEN_CPU_CAPABILITY=avx512`` (or ``default``) yourself to choose others; ``run.json``
records what a run's figures depend on (:func:`machine_record`). Other architectures (ARM) and GPUs
are left alone, and MKL does not promise the same bits on Intel and AMD CPUs.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import MutableMapping
from typing import Final

KERNEL_PINS: Final[dict[str, str]] = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
"""Environment variables set (when unset) on x86-64 so torch and MKL pick AVX2 kernels everywhere."""
X86_64: Final[frozenset[str]] = frozenset({"x86_64", "amd64"})
RECORDED_ENV: Final[tuple[str, ...]] = (
    *KERNEL_PINS,
    "MKL_CBWR",
    "ONEDNN_MAX_CPU_ISA",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)
"""Environment variables a run's CPU figures can depend on, recorded as set (or absent)."""


def pin_cpu_kernels(environ: MutableMapping[str, str], machine: str | None = None) -> dict[str, str]:
    """Set :data:`KERNEL_PINS` in ``environ`` where unset, on x86-64 only.

    Args:
        environ: the process environment (``os.environ``), changed in place.
        machine: the architecture, ``platform.machine()`` when ``None``.

    Returns:
        The variables this call set (empty when the user set them or the machine is not x86-64).
    """
    arch = (machine if machine is not None else platform.machine()).lower()
    if arch not in X86_64:
        return {}
    pinned = {name: value for name, value in KERNEL_PINS.items() if name not in environ}
    environ.update(pinned)
    return pinned


def _cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _blas() -> str:
    """The BLAS torch was built with (``BLAS_INFO``, e.g. ``mkl``) and its version line when torch has one."""
    import torch

    config = torch.__config__.show()
    found = re.search(r"BLAS_INFO=([^,\s]+)", config)
    blas = found.group(1) if found else "unknown"
    library = next((line.strip(" -") for line in config.splitlines() if "Math Kernel Library" in line), "")
    return f"{blas} ({library})" if library else blas


def machine_record() -> dict[str, object]:
    """What a run's CPU figures depend on, for ``run.json``.

    Returns:
        ``cpu_model``, ``arch``, ``cpu_count``, ``torch_cpu_capability`` (the kernel set torch uses,
        e.g. ``AVX2``), ``blas``, ``torch_threads`` (intra-op threads of this process) and ``env``
        (the variables of :data:`RECORDED_ENV` that are set).
    """
    import torch

    return {
        "cpu_model": _cpu_model(),
        "arch": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": _blas(),
        "torch_threads": torch.get_num_threads(),
        "env": {name: os.environ[name] for name in RECORDED_ENV if name in os.environ},
    }
