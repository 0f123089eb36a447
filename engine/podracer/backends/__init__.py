"""Backends run pod rounds: :class:`LocalBackend` (threads in this process) is the embedded default;
:class:`PopulationBackend` trains the pool in lockstep as one batched computation.

:class:`Backend` is the interface; ``podracer.backends.ray_backend.RayBackend`` runs pods as Ray actors
and ``podracer.backends.ray_population.RayPopulationBackend`` a population on each actor (imported
from their modules, so that ``import podracer`` does not import Ray).
"""

from podracer.backends.base import Backend, LockstepBackend, RoundTask
from podracer.backends.local import LocalBackend
from podracer.backends.population import PopulationBackend
from podracer.backends.processes import ProcessBackend

__all__ = ["Backend", "LocalBackend", "LockstepBackend", "PopulationBackend", "ProcessBackend", "RoundTask"]
