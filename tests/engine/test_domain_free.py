"""The engine knows nothing about finance: no finpod, pandas or broker import anywhere in it."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine" / "podracer"
TESTS = Path(__file__).resolve().parent
FORBIDDEN = ("finpod", "pandas", "alpaca", "empyrical", "pyfolio", "exchange_calendars")


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _offenders(folder: Path) -> list[str]:
    files = sorted(folder.rglob("*.py"))
    assert files, f"no Python files under {folder}"
    return [
        f"{path.relative_to(folder.parent)} imports {root}"
        for path in files
        for root in sorted(_imported_roots(path) & set(FORBIDDEN))
    ]


def test_engine_imports_nothing_domain_specific() -> None:
    assert _offenders(ENGINE) == []


def test_engine_tests_import_nothing_domain_specific() -> None:
    assert _offenders(TESTS) == []


def test_the_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "bad.py").write_text("import pandas as pd\nfrom finpod.data import schema\n")
    assert _offenders(pkg) == ["pkg/bad.py imports finpod", "pkg/bad.py imports pandas"]
