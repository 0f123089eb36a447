"""Where finpod reads and writes when the user does not say: the current folder, or ``FINPOD_HOME``.

Nothing is ever resolved against the package's own folder (in a ``pip install`` that is
site-packages). Relative paths in a spec file resolve against that file's folder
(:meth:`finpod.spec.Spec.dataset_path`); every other relative path against the current folder.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

HOME_ENV = "FINPOD_HOME"
"""Environment variable: the folder that holds ``reports/`` and ``data/`` (default: the current one)."""
REPORTS_DIR = "reports"
DATA_DIR = "data"
EXAMPLES_PACKAGE_DIR = "strategies"
"""The example specs shipped inside the package (``finpod/strategies/*.toml``)."""


def home() -> Path:
    """``$FINPOD_HOME`` (absolute) when set, else the current working folder."""
    configured = os.environ.get(HOME_ENV, "").strip()
    return Path(configured).expanduser().resolve() if configured else Path.cwd().resolve()


def default_reports_root() -> Path:
    """``<home>/reports``: where runs go unless ``--out`` (or ``out=``) says otherwise."""
    return home() / REPORTS_DIR


def default_data_root() -> Path:
    """``<home>/data``: where generated synthetic datasets are cached."""
    return home() / DATA_DIR


def from_cwd(path: str | Path) -> Path:
    """``path`` made absolute against the current folder (``~`` expanded)."""
    return Path(path).expanduser().resolve()


def example_specs() -> list[Path]:
    """The example strategy files shipped in the package (TOML specs and their README), sorted."""
    folder = resources.files("finpod") / EXAMPLES_PACKAGE_DIR
    return sorted(
        Path(str(entry))
        for entry in folder.iterdir()
        if entry.is_file() and entry.name.endswith((".toml", ".md"))
    )
