"""``section.key=value`` overrides of a spec (the CLI's ``--set``, the benches'), validated like the file.

A value is read as a TOML value (``2048``, ``1e-3``, ``true``, ``[64, 64]``, ``"text"``); anything
that is not valid TOML is taken as a plain string (``--set device=cpu``). Every override goes
through :meth:`finpod.spec.Spec.with_`, so a bad key or value is the spec's own one-line error.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from finpod.errors import SpecError
from finpod.spec.strategy import Spec


def parse_assignment(text: str) -> tuple[list[str], Any]:
    """``"tournament.budget_env_steps=2048"`` -> ``(["tournament", "budget_env_steps"], 2048)``.

    Raises:
        SpecError: no ``=``, or an empty key part.
    """
    key, sep, raw = text.partition("=")
    path = [part.strip() for part in key.split(".")]
    if not sep or not all(path):
        raise SpecError(
            f"--set {text!r}: write section.key=value, e.g. --set tournament.budget_env_steps=20000"
        )
    try:
        value = tomllib.loads(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        if raw.strip()[:1] in ("{", "["):
            raise SpecError(
                f"--set {text!r}: {raw.strip()} is not a TOML table or array; fix: write TOML, e.g. "
                "--set 'tournament.perturb_bounds={gamma = [0.9, 0.999]}' (key = value, not JSON)"
            ) from None
        value = raw.strip()
    return path, value


def apply_overrides(
    spec: Spec, assignments: Sequence[str], flags: Mapping[str, tuple[str, str, Any]] | None = None
) -> Spec:
    """``spec`` with every ``--set`` applied, then the command's own ``flags`` that set spec fields
    (by their spelling: ``{"--backend": ("tournament", "backend", "ray")}``; a flag wins over a
    ``--set`` of the same field), validated as a whole: settings that need each other may come from
    either (``--backend ray --set tournament.pods_per_worker=8``).

    Raises:
        SpecError: a malformed assignment, an unknown key or a bad value (one line, naming the
            ``--set`` assignments and flags).
    """
    flags = dict(flags or {})
    if not assignments and not flags:
        return spec
    tree: dict[str, Any] = {}
    for text in assignments:
        path, value = parse_assignment(text)
        node = tree
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SpecError(
                    f"--set {text!r}: {part} is set to a value and used as a section; fix: pick one"
                )
            node = child
        node[path[-1]] = value
    for name, (section, key, value) in flags.items():
        table = tree.setdefault(section, {})
        if not isinstance(table, dict):
            raise SpecError(f"{name}: --set gives {section} a value, not a table; fix: drop that --set")
        table[key] = value
    try:
        return spec.with_(**tree)
    except SpecError as err:
        said = [f"--set {' '.join(assignments)}"] if assignments else []
        said += [f"{name} {value}" for name, (_, _, value) in flags.items()]
        raise SpecError(f"{' '.join(said)}: {err}") from None
