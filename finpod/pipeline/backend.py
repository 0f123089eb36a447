"""Where a run's pods train: the spec's ``[tournament] backend`` as a podracer backend.

``auto`` (the default) is ``population`` on a CUDA device and ``processes`` on a CPU (``local``
where worker processes would start as fresh interpreters: off Linux, or with learner fusion).
``local`` is podracer's own thread pool (the tournament makes it; nothing to do here).
``processes`` trains each pod in its own worker process on this machine
(:class:`podracer.ProcessBackend`, forked on Linux): the same leaderboard as ``local``, bit for bit,
without the pod threads taking turns in one interpreter.
``population`` trains the whole pool in lockstep as one batched computation in this process
(:class:`podracer.PopulationBackend`). ``ray`` joins
the Ray cluster at ``tournament.address`` (or starts a private Ray on 127.0.0.1) and runs each pod
on a Ray actor reserving ``cpus_per_pod`` CPUs and ``gpus_per_pod`` of a GPU; the pool follows the
cluster, capped at ``pool_size``; with ``pods_per_worker`` > 1 each actor trains that many pods in
lockstep as one population (reserving that many pods' CPUs and GPU shares). Ray is imported only
for a Ray run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from finpod.errors import SpecError
from finpod.spec import Spec
from podracer.api import (
    Backend,
    PopulationBackend,
    ProcessBackend,
    TournamentError,
    default_start_method,
    ray_backend,
)


def population_threads(spec: Spec) -> int:
    """Torch threads of a population run's one computation: ``torch_threads_per_pod``, at most the cores.

    One thread by default: on a small CPU a second thread helps a batched matmul less than a busy
    core stalls it (OpenMP waits for the slowest thread), and one thread gives the same numbers on
    every machine. Raise ``torch_threads_per_pod`` on a big idle CPU.
    """
    return max(1, min(os.cpu_count() or 1, spec.tournament.torch_threads_per_pod))


def population_workers(spec: Spec, device: torch.device) -> int:
    """Sub-populations a population run trains side by side in threads (the pods' numbers do not
    depend on it; ``run.json`` records it): on a CPU the cores over its torch threads; on a GPU one,
    the whole pool as one batched computation (threads there would split it into small populations
    that take turns launching small kernels: on an H200 at the paper's shape, 16 cores made four
    one-pod populations, 139k env steps/s against 400k+ for one population of four)."""
    if device.type != "cpu":
        return 1
    return max(1, (os.cpu_count() or 1) // population_threads(spec))


def resolved_backend(spec: Spec, device: torch.device) -> str:
    """The backend a run uses: the spec's, with ``auto`` as

    * ``population`` on a CUDA device (one batched computation fills a GPU that many small pods
      leave idle);
    * ``processes`` on a CPU where workers fork (Linux): pods in threads take turns holding one
      interpreter, pods in processes do not (BENCHMARKS "Pods in processes": the demo's training
      phase in 0.6x the time, the same leaderboard);
    * ``local`` elsewhere (a fresh interpreter per worker costs seconds a pod; workers of several
      torch threads are not forked) and with learner fusion (which trains each pod alone: threads
      keep those pods parallel).
    """
    backend = spec.tournament.backend
    if backend != "auto":
        return backend
    if spec.tournament.learners > 1:
        return "local"
    if device.type == "cuda":
        return "population"
    return "processes" if default_start_method(spec.tournament.torch_threads_per_pod) == "fork" else "local"


def training_threads(spec: Spec, device: torch.device) -> int:
    """Torch intra-op threads a pod's training computation runs with, as ``run.json`` records them.

    ``population``: :func:`population_threads` for the whole pool; ``local``: ``torch_threads_per_pod``
    per pod thread; ``processes``: the same, in each pod's own process; ``ray``: each actor's CPU
    reservation, rounded (at least 1): ``cpus_per_pod``, times ``pods_per_worker`` (at most the pool)
    for a population.
    """
    backend = resolved_backend(spec, device)
    if backend == "population":
        return population_threads(spec)
    if backend == "ray":
        settings = spec.tournament
        pods = min(settings.pods_per_worker, settings.pool_size)
        return max(1, round(settings.cpus_per_pod * pods))
    return spec.tournament.torch_threads_per_pod


@contextmanager
def pod_backend(spec: Spec, device: torch.device) -> Iterator[Backend | None]:
    """The backend the spec asks for (``None``: the tournament's own local one), shut down on exit.

    Raises:
        SpecError: a CUDA run on Ray with no GPU share per pod, or Ray cannot be reached.
    """
    settings = spec.tournament
    backend = resolved_backend(spec, device)
    if backend == "local":
        yield None
        return
    if backend == "processes":
        processes = ProcessBackend(settings.pool_size, settings.torch_threads_per_pod)
        try:
            yield processes
        finally:
            processes.shutdown()
        return
    if backend == "population":
        population = PopulationBackend(
            settings.pool_size, population_threads(spec), population_workers(spec, device)
        )
        try:
            yield population
        finally:
            population.shutdown()
        return
    if device.type == "cuda" and settings.gpus_per_pod == 0:
        raise SpecError(
            'tournament.gpus_per_pod: 0 with device "cuda" leaves Ray pods no GPU; fix: set gpus_per_pod '
            '(e.g. 0.25 for four pods a GPU) or device = "cpu"'
        )
    try:
        ray = ray_backend(
            settings.address,
            cpus_per_pod=settings.cpus_per_pod,
            gpus_per_pod=settings.gpus_per_pod,
            max_slots=settings.pool_size,
            pods_per_worker=settings.pods_per_worker,
        )
    except TournamentError as exc:
        raise SpecError(f"tournament.backend = 'ray': {exc}") from None
    try:
        yield ray
    finally:
        ray.shutdown()
