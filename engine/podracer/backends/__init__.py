"""Backends run pod rounds: :class:`LocalBackend` (threads in this process) is the embedded default.

:class:`Backend` is the interface; ``podracer.backends.ray_backend.RayBackend`` runs pods as Ray actors
(imported from its module, so that ``import podracer`` does not import Ray).
"""

from podracer.backends.base import Backend, RoundTask
from podracer.backends.local import LocalBackend

__all__ = ["Backend", "LocalBackend", "RoundTask"]
