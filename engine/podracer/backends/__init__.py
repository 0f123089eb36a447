"""Backends run pod rounds: :class:`LocalBackend` (threads in this process) is the embedded default.

:class:`Backend` is the interface a distributed backend (Ray: pods as actors) implements.
"""

from podracer.backends.base import Backend
from podracer.backends.local import LocalBackend

__all__ = ["Backend", "LocalBackend"]
