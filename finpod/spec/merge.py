"""Nested spec trees: drop unset values, merge overrides into a base."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def drop_none(tree: dict[str, Any]) -> dict[str, Any]:
    return {k: drop_none(v) if isinstance(v, dict) else v for k, v in tree.items() if v is not None}


def deep_merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
