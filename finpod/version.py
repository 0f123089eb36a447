"""finpod's version: the installed distribution's (``pyproject.toml``'s ``version``), read once.

Its own module, which imports nothing of finpod, so that any module can record the version (a
dataset manifest, ``run.json``, ``finpod --version``) without importing the ``finpod`` package's
``__init__`` and closing an import circle through :mod:`finpod.api`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

UNKNOWN_VERSION = "0+unknown"
"""The version of a source tree imported without being installed (no distribution metadata)."""


def _installed_version() -> str:
    try:
        return version("finpod")
    except PackageNotFoundError:
        return UNKNOWN_VERSION


__version__ = _installed_version()
