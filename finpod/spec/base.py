"""The base of every spec section: unknown keys refused, scalars kept to their type."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    model_validator,
)

DateRange = tuple[dt.date, dt.date]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _strict_scalars(cls, raw: Any) -> Any:
        """``seed = true`` or ``seed = "3"`` is a typo, not the number 1 or 3: scalars keep their type."""
        if not isinstance(raw, Mapping):
            return raw
        for name, field in cls.model_fields.items():
            if name not in raw or field.annotation not in _SCALAR_KINDS:
                continue
            value = raw[name]
            kind = _SCALAR_KINDS[field.annotation]
            if field.annotation is bool:
                ok = isinstance(value, bool)
            elif field.annotation is int:
                ok = isinstance(value, int) and not isinstance(value, bool)
            else:
                ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok:
                raise ValueError(
                    f"{name}: must be {kind}, got {json.dumps(value, default=str)}; fix: write {kind}"
                )
        return raw


_SCALAR_KINDS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false"}


def default_of(config: type[Any], name: str) -> Any:
    """The default of field ``name`` of the dataclass ``config``, where that setting's default is
    defined (a spec section reads it from there rather than writing it again).

    Raises:
        TypeError: ``config`` has no such field, or the field has no default (a programming error).
    """
    for field in dataclasses.fields(config):
        if field.name == name:
            if field.default is not dataclasses.MISSING:
                return field.default
            if field.default_factory is not dataclasses.MISSING:
                return field.default_factory()
            raise TypeError(f"{config.__name__}.{name} has no default")
    raise TypeError(f"{config.__name__} has no field {name!r}")
