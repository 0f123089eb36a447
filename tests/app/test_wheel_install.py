"""A built wheel, installed into a fresh virtualenv, runs from a folder outside the repository.

From an empty temporary folder: ``finpod init``, ``finpod run strategies/demo.toml --json`` (a tiny
budget through ``--set``) and the README's Python API example (its budget shrunk the same way), all
without error; ``finpod`` is imported from the fresh venv, never from the checkout; nothing is
written inside site-packages.

The wheel goes into the fresh venv (made without pip) with ``--no-deps``, by the test venv's pip
(``pip --python``): its dependencies are the ones already installed in the venv running the tests
(CI's, from ``constraints.txt``), linked in by a ``.pth`` line written AFTER the install, so pip
never sees them and nothing is downloaded (tests talk to 127.0.0.1 only; a full resolve would
unpack ~1.7 GB of torch and friends again). ``pip check`` then proves that every requirement the wheel
declares is met from that environment. What the test proves is the wheel itself: its package data
(specs, templates, membership tables), its entry point, and that nothing resolves against the
package's folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

import pytest

from repo import REPO_ROOT

TEST_TIMEOUT_S = 900
"""Build, install (no download) and three short runs: about 2 min on a loaded 2-core box."""
TINY_BUDGET = 2048
"""Env steps: two PPO rounds of the demo spec (32 envs x 32 steps), enough for one leaderboard entry."""
IGNORED_EVERYWHERE = shutil.ignore_patterns(".git", ".venv*", "*.egg-info", "__pycache__", ".*_cache")
IGNORED_AT_TOP = {"build", "dist", "reports", "data"}
"""Run outputs and build leftovers of the checkout (``finpod/data`` is code and is copied)."""


def _ignored(folder: str, names: list[str]) -> set[str]:
    top = IGNORED_AT_TOP if Path(folder) == REPO_ROOT else set()
    return set(IGNORED_EVERYWHERE(folder, names)) | (top & set(names))


def _run(
    args: list[str], cwd: Path, env: dict[str, str], timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


def _dependency_folders() -> list[str]:
    """The test venv's site-packages folders (purelib and platlib)."""
    paths = sysconfig.get_paths()
    return [paths["purelib"], paths["platlib"]]


def _readme_example() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "README: no python block under '## Python API'"
    example = code.group(1)
    assert '"budget_env_steps": 100_000' in example
    return example.replace('"budget_env_steps": 100_000', f'"budget_env_steps": {TINY_BUDGET}')


@pytest.mark.slow
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_wheel_installs_and_runs_outside_the_repository() -> None:
    # Not pytest's tmp_path: concurrent pytest sessions prune old numbered temp folders, and this
    # test runs for minutes.
    with tempfile.TemporaryDirectory(prefix="finpod-wheel-") as scratch:
        _install_and_run(Path(scratch))


def _install_and_run(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(REPO_ROOT, source, symlinks=True, ignore=_ignored)
    dist = tmp_path / "dist"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "FINPOD_HOME")}
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(source),
        ],
        tmp_path,
        env,
    )
    (wheel,) = dist.glob("finpod-*.whl")

    prefix = tmp_path / "venv"
    # No pip or setuptools of its own (ensurepip's setuptools is older than torch requires): the
    # test venv's pip installs into it (``--python``), before the dependencies are linked in.
    venv.create(prefix, with_pip=False)
    python = prefix / "bin" / "python"
    pip_into_fresh = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip_into_fresh, "install", "-q", "--no-deps", str(wheel)], tmp_path, env)
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env
        ).stdout.strip()
    )
    # The dependencies: the test venv's installed packages, after the fresh venv's own site-packages
    # on sys.path (a plain path line: the test venv's own .pth files, such as an editable finpod
    # install pointing at the checkout, are not processed).
    (site / "zz_finpod_test_deps.pth").write_text(
        "".join(f"{folder}\n" for folder in sorted(set(_dependency_folders()))), encoding="utf-8"
    )
    _run([*pip_into_fresh, "check"], tmp_path, env)
    for package in ("finpod", "podracer"):  # the wheel's packages, not the checkout's
        where = _run([str(python), "-c", f"import {package}; print({package}.__file__)"], tmp_path, env)
        assert Path(where.stdout.strip()).is_relative_to(site), where.stdout
    before = {path: path.stat().st_mtime_ns for path in site.rglob("*") if "__pycache__" not in path.parts}

    work = tmp_path / "work"
    work.mkdir()
    finpod = str(prefix / "bin" / "finpod")
    _run([finpod, "init"], work, env)
    assert (work / "strategies" / "demo.toml").is_file()
    ran = _run(
        [
            finpod,
            "run",
            "strategies/demo.toml",
            "--json",
            "--set",
            f"tournament.budget_env_steps={TINY_BUDGET}",
        ],
        work,
        env,
    )
    summary = json.loads(ran.stdout)
    assert Path(summary["run_dir"]).parent == work / "reports"
    assert Path(summary["report_html"]).is_file()
    assert "best" in summary["traders"]

    (work / "example.py").write_text(_readme_example(), encoding="utf-8")
    _run([str(python), "example.py"], work, env)
    assert (work / "best.pt2").is_file()

    after = {path: path.stat().st_mtime_ns for path in site.rglob("*") if "__pycache__" not in path.parts}
    assert after == before, f"written inside site-packages: {sorted(set(after) ^ set(before))[:5]}"
    assert (work / "data").is_dir()  # the synthetic market is cached under the current folder
