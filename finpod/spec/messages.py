"""A pydantic validation error as one line: ``file: field.path: problem (got X); fix: ...``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import (
    BaseModel,
    ValidationError,
)


def one_line(err: ValidationError, source: Path | None, root: type[BaseModel]) -> str:
    """The first validation problem as ``file: field.path: problem (got X); fix: ...``."""
    first = err.errors()[0]
    path = tuple(p for p in first["loc"] if isinstance(p, str) and "[" not in p)
    loc = ".".join(path)
    where = f"{source}: " if source else ""
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        parent = _model_at(root, path[:-1])
        known = ", ".join(parent.model_fields) if parent else "see the docs"
        return f"{where}{loc}: unknown field; fix: remove it or use one of: {known}"
    if first["type"] == "missing":
        return f"{where}{loc}: required field missing; fix: {_fix(root, path)}"
    if "fix:" in msg:  # our own validators: the message names the fix (and maybe the field)
        field_prefix = "" if not loc or msg.startswith(loc) else f"{loc}: "
        section = _model_at(root, path)
        if loc and section is not None and msg.split(":", 1)[0] in section.model_fields:
            field_prefix = f"{loc}."  # a section's own check names its field: env.horizon_bars: ...
        return f"{where}{field_prefix}{msg}"
    got = first.get("input")
    return f"{where}{loc}: {_short(msg)} (got {got!r}); fix: {_fix(root, path)}"


def _short(msg: str) -> str:
    msg = re.sub(r"a valid dictionary or instance of \w+", "a table", msg)
    return msg.replace("Input should be ", "must be ").replace("Input ", "value ")


def _model_at(root: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The pydantic model class addressed by a location path inside ``root``."""
    model: type[BaseModel] = root
    for part in loc:
        field = model.model_fields.get(part)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _fix(root: type[BaseModel], names: tuple[str, ...]) -> str:
    """``set <field> (<description>), e.g. <example>`` for the field at ``names``."""
    parent = _model_at(root, tuple(names[:-1])) if names else None
    field = parent.model_fields.get(names[-1]) if parent and names else None
    if field is None:
        return "see strategies/README.md for the spec format"
    example = f", e.g. {json.dumps(field.examples[0])}" if field.examples else ""
    if field.description is None and _model_at(root, names) is not None:
        return f"write [{'.'.join(names)}] as a table of settings (see strategies/README.md)"
    described = f" ({field.description})" if field.description else ""
    return f"set {'.'.join(names)}{described}{example}"
