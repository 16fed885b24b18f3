"""Types of decoded JSON/YAML and the checks that narrow them at the input boundary.

A file is decoded into ``object`` (:mod:`hardware.input_files`); the reader that knows the
expected shape narrows it here, one level at a time, so a wrong shape is one clear line naming
``where`` instead of a ``KeyError`` or ``TypeError`` deep inside the planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from hardware.errors import PlannerInputError

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = "JSONScalar | list[JSONValue] | dict[str, JSONValue]"
"""A decoded JSON document: scalars, lists and string-keyed objects, nested."""


def type_name(value: object) -> str:
    """The JSON name of ``value``'s type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "mapping"
    return type(value).__name__


def as_mapping(value: object, where: str) -> dict[str, object]:
    """``value`` as a string-keyed mapping (a copy), or a :class:`PlannerInputError`."""
    if not isinstance(value, Mapping):
        raise PlannerInputError(where, f"must be a mapping, got {type_name(value)}")
    out: dict[str, object] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise PlannerInputError(where, f"keys must be strings, got {key!r}")
        out[key] = item
    return out


def as_list(value: object, where: str) -> list[object]:
    """``value`` as a list, or a :class:`PlannerInputError`."""
    if not isinstance(value, list | tuple):
        raise PlannerInputError(where, f"must be a list, got {type_name(value)}")
    return list(value)
