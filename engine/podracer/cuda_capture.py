"""Recording a block of tensor work as a CUDA graph, safely: warm-up and capture on one side stream,
one capture at a time in the process, the generators it draws from registered first.

A capture that fails part-way leaves torch's state unusable (the generators it registered stay "in
capture" and refuse eager draws; the thread can stay on the capture stream), so there is no
fallback after a failed capture here: a caller that wants one must rule out host syncs before
recording (for example by running the warm-up under ``torch.cuda.set_sync_debug_mode("error")``).

Shapes and units: none of its own; the body's tensors are the caller's static buffers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import torch

CAPTURE_LOCK = threading.Lock()
"""Held while a graph is recorded: torch records through one capture stream per process, and the
device-wide synchronize that starts a capture is illegal while another thread is capturing."""


def warm_up_then_record(
    warm_up: Callable[[], None],
    body: Callable[[], None],
    generators: Sequence[torch.Generator],
    device: torch.device,
) -> torch.cuda.CUDAGraph:
    """Run ``warm_up`` (real work that launches the same kernels as ``body``) on a side stream, then
    record ``body`` as a CUDA graph on that stream (not run: the first replay runs it).

    Args:
        warm_up: eager work first, so that lazy initialisation (library handles, workspaces,
            kernel loading) happens outside the capture, on the stream the capture will use.
        body: the work to record; it must read and write only static tensors (allocated before the
            capture) and make no host sync.
        generators: the CUDA generators ``body`` draws from, registered with the graph so that each
            replay draws what the eager work would (torch versions that register a generator on its
            first use inside a capture have no registration call; then nothing is done here).
        device: the CUDA device.

    Raises:
        RuntimeError: the capture failed (a host sync or an unsupported call inside ``body``).
    """
    with CAPTURE_LOCK:
        caller = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(caller)
        with torch.cuda.stream(side):
            warm_up()
        graph = torch.cuda.CUDAGraph()
        register = getattr(graph, "register_generator_state", None)
        if register is not None:
            for generator in generators:
                register(generator)
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            body()
        caller.wait_stream(side)
        return graph


__all__ = ["CAPTURE_LOCK", "warm_up_then_record"]
