"""A built wheel, installed into a fresh virtualenv, runs from a folder outside the repository.

From an empty temporary folder: ``finpod init``, ``finpod run strategies/demo.toml --json`` (a tiny
budget through ``--set``) and the README's Python API example (its budget shrunk the same way), all
without error; nothing is written inside site-packages. pip resolves the pinned dependencies from
its cache (``-c constraints.txt``), so the install takes a minute or two.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

import pytest

from repo import REPO_ROOT

INSTALL_TIMEOUT_S = 1800
"""The fresh install unpacks torch and friends (~1.7 GB): 1-3 min on a quiet machine, 10+ on a loaded one."""
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


def _readme_example() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Python API") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "README: no python block under '## Python API'"
    example = code.group(1)
    assert '"budget_env_steps": 100_000' in example
    return example.replace('"budget_env_steps": 100_000', f'"budget_env_steps": {TINY_BUDGET}')


@pytest.mark.slow
@pytest.mark.timeout(INSTALL_TIMEOUT_S)
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
    venv.create(prefix, with_pip=True)
    python = prefix / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "-q", "-c", str(REPO_ROOT / "constraints.txt"), str(wheel)],
        tmp_path,
        env,
        timeout=900,
    )
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env
        ).stdout.strip()
    )
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
