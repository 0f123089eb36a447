"""The import graph of ``finpod/`` and ``engine/podracer/``: no circles between modules, none between
the parts of a package (no arrow back up from a lower layer), and finpod sees the engine only through
``podracer.api`` (and ``podracer.errors``, the exception types alone, which load no torch: the CLI's
error handler needs them before any command has loaded the engine).

The graph is built statically with :mod:`ast` from every ``import`` statement in every module,
wherever it stands: at the top, inside a function (a lazy import is still an arrow between two
modules), and inside ``if TYPE_CHECKING:`` blocks. Type-only imports count: a type-level circle is
still a circle a reader has to untangle, and it becomes a runtime circle the day someone moves the
import out of the block.

Conventions (those of grimp / import-linter): ``from a.b import c`` is an arrow to ``a.b.c`` when
``c`` is a module and to ``a.b`` otherwise; ``import a.b`` is an arrow to ``a.b``. The implicit
imports of parent packages (``a`` when importing ``a.b``) are not arrows: a package's
``__init__`` importing its own submodules would otherwise make every package a circle. Only arrows
between modules of the two trees are kept.

The parts of a package are its subpackages and top-level modules (``finpod.pipeline``,
``finpod.trader``, ``podracer.backends``); collapsing each module to its part, a circle that no two
modules close can still appear, e.g. ``finpod.trader`` importing ``finpod.pipeline.rundir`` while
``finpod.pipeline.main`` imports ``finpod.trader``: a lower layer reaching up into the one above it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from repo import REPO_ROOT

SOURCE_ROOTS = (REPO_ROOT, REPO_ROOT / "engine")
"""Where module names start: ``finpod`` lives at the repo root, ``podracer`` under ``engine/``."""
PACKAGES = ("finpod", "podracer")
ENGINE_FACE = "podracer.api"
ENGINE_ERRORS = "podracer.errors"


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` imports ``target``, at ``path:line``; ``written`` is the module named
    in the statement (``podracer`` for ``from podracer import X``)."""

    source: str
    target: str
    written: str
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"


def _modules(roots: Iterable[Path], packages: Iterable[str]) -> dict[str, Path]:
    """Every module of ``packages`` under ``roots``: dotted name -> file."""
    found: dict[str, Path] = {}
    for root in roots:
        for package in packages:
            for path in sorted((root / package).rglob("*.py")):
                parts = path.relative_to(root).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                found[name] = path
    return found


def _imports(name: str, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """``(written module, candidate targets, line)`` for each import statement in the module."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [alias.name], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield module, [f"{module}.{alias.name}" for alias in node.names] or [module], node.lineno


def import_graph(roots: Iterable[Path] = SOURCE_ROOTS, packages: Iterable[str] = PACKAGES) -> list[Arrow]:
    """Every arrow between two modules of ``packages`` found under ``roots``."""
    packages = tuple(packages)
    modules = _modules(roots, packages)
    arrows: list[Arrow] = []
    for name, path in modules.items():
        for written, candidates, line in _imports(name, path):
            if written.split(".")[0] not in packages:
                continue
            targets = {c for c in candidates if c in modules} or {written}
            arrows.extend(Arrow(name, target, written, path, line) for target in sorted(targets))
    return [arrow for arrow in arrows if arrow.target in modules and arrow.target != arrow.source]


@dataclass(frozen=True)
class Circle:
    """Modules that import each other round a circle: all the ``members`` of one strongly
    connected set, and one shortest circle (``arrows``, in order) through the first of them."""

    members: tuple[str, ...]
    arrows: tuple[Arrow, ...]

    def describe(self) -> str:
        """The members, then the circle with the line of each arrow."""
        steps = "\n".join(f"    {a.source} -> {a.target}  ({a.where()})" for a in self.arrows)
        return f"  {len(self.members)} tangled: {', '.join(self.members)}; one circle:\n{steps}"


def cycles(arrows: Iterable[Arrow]) -> list[Circle]:
    """One :class:`Circle` for each strongly connected set of two or more modules."""
    graph: dict[str, list[Arrow]] = {}
    for arrow in arrows:
        graph.setdefault(arrow.source, []).append(arrow)
        graph.setdefault(arrow.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; the graph is small enough to recurse
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for arrow in graph[node]:
            if arrow.target not in index:
                connect(arrow.target)
                low[node] = min(low[node], low[arrow.target])
            elif arrow.target in on_stack:
                low[node] = min(low[node], index[arrow.target])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    circles = [Circle(tuple(sorted(c)), tuple(_circle_in(graph, c))) for c in components]
    return sorted(circles, key=lambda circle: circle.members)


def _circle_in(graph: dict[str, list[Arrow]], component: set[str]) -> list[Arrow]:
    """A shortest circle through the alphabetically first module of ``component``."""
    start = min(component)
    paths: dict[str, list[Arrow]] = {start: []}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for arrow in graph[node]:
                if arrow.target == start:
                    return [*paths[node], arrow]
                if arrow.target in component and arrow.target not in paths:
                    paths[arrow.target] = [*paths[node], arrow]
                    following.append(arrow.target)
        frontier = following
    raise AssertionError(f"no circle through {start}")  # a strongly connected set always has one


def between_parts(arrows: Iterable[Arrow]) -> list[Arrow]:
    """The arrows between the top-level parts of each package (``finpod.pipeline``, ``finpod.trader``,
    ``podracer.backends``, ...): a circle among these is an arrow back up from a lower layer."""

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    collapsed = (replace(arrow, source=part(arrow.source), target=part(arrow.target)) for arrow in arrows)
    return [arrow for arrow in collapsed if arrow.source != arrow.target]


def engine_reaches(arrows: Iterable[Arrow]) -> list[str]:
    """finpod imports of podracer that do not go through ``podracer.api``, as ``file:line``."""
    return [
        f"{arrow.where()}: {arrow.source} imports {arrow.written}"
        for arrow in arrows
        if arrow.source.split(".")[0] == "finpod"
        and arrow.written.split(".")[0] == "podracer"
        and arrow.written not in (ENGINE_FACE, ENGINE_ERRORS)
    ]


@pytest.fixture(scope="module")
def arrows() -> list[Arrow]:
    found = import_graph()
    assert len({a.source for a in found}) > 100, "the walk found too few modules: wrong roots?"
    return found


def test_no_import_circles(arrows: list[Arrow]) -> None:
    found = cycles(arrows)
    assert not found, "import circles:\n" + "\n".join(circle.describe() for circle in found)


def test_no_circles_between_the_parts_of_a_package(arrows: list[Arrow]) -> None:
    found = cycles(between_parts(arrows))
    assert not found, "circles between packages (an arrow back up):\n" + "\n".join(
        circle.describe() for circle in found
    )


def test_finpod_uses_the_engine_only_through_its_api(arrows: list[Arrow]) -> None:
    found = engine_reaches(arrows)
    assert not found, f"finpod must import podracer only through {ENGINE_FACE}:\n" + "\n".join(found)


def _plant(root: Path, files: dict[str, str]) -> list[Arrow]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return import_graph([root], PACKAGES)


def test_the_checks_catch_planted_violations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("test_import_graph.REPO_ROOT", tmp_path)
    planted = _plant(
        tmp_path,
        {
            "finpod/__init__.py": "",
            "finpod/api.py": "def run() -> None:\n    from .pipeline import main  # a lazy import counts\n",
            "finpod/pipeline/__init__.py": "",
            "finpod/pipeline/main.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from finpod import api\n"
                "from podracer.api import Tournament\nfrom podracer import ppo\nimport finpod.trader\n"
            ),
            "finpod/pipeline/rundir.py": "",
            "finpod/trader.py": "from finpod.pipeline.rundir import RunDir\n",
            "podracer/__init__.py": "from podracer.api import Tournament\n",
            "podracer/api.py": "from podracer.ppo import PPOAgent\n",
            "podracer/ppo.py": "import podracer.api\n",
        },
    )
    circles = cycles(planted)
    assert [circle.members for circle in circles] == [
        ("finpod.api", "finpod.pipeline.main"),
        ("podracer.api", "podracer.ppo"),
    ]
    assert [(a.source, a.target, a.line) for a in circles[0].arrows] == [
        ("finpod.api", "finpod.pipeline.main", 2),
        ("finpod.pipeline.main", "finpod.api", 3),
    ]
    # no module circle runs through the trader, but its package imports the one above it
    assert [circle.members for circle in cycles(between_parts(planted))] == [
        ("finpod.api", "finpod.pipeline", "finpod.trader"),
        ("podracer.api", "podracer.ppo"),
    ]
    assert engine_reaches(planted) == ["finpod/pipeline/main.py:5: finpod.pipeline.main imports podracer"]
