"""docs/ARCHITECTURE.md's extension-point examples run as they are written, from the repository root."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from repo import REPO_ROOT

DOC = REPO_ROOT / "docs" / "ARCHITECTURE.md"
EXPECTED_OUTPUT = {
    "policy": r"reversal: equity [\d,]+ USD after 64 bars\nequal weight: equity [\d,]+ USD after 64 bars\n",
    "reward": r"(mean reward [+-]\d\.\d{4}\n){2}",
    "backend": r"\d+ rounds on one slot, best score -?\d\.\d{3}\n",
}


def _examples() -> dict[str, str]:
    """The page's Python blocks, named by the extension point whose paragraph they follow."""
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"\*\*A (\w+)\.\*\*.*?```python\n(.*?)```", text, flags=re.DOTALL)
    return {name: code for name, code in found}


def test_the_page_has_one_example_per_extension_point() -> None:
    assert set(_examples()) == set(EXPECTED_OUTPUT)


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTPUT))
def test_an_extension_example_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)  # the examples name strategies/demo.toml
    monkeypatch.setenv("FINPOD_HOME", str(tmp_path))  # the synthetic market is cached here
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(_examples()[name], f"ARCHITECTURE.md: {name}", "exec"), {"__name__": f"doc_{name}"})
    assert re.fullmatch(EXPECTED_OUTPUT[name], output.getvalue()), output.getvalue()
