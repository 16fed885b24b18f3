"""Narrowing decoded JSON/YAML at the input boundary (hardware.jsontypes)."""

from __future__ import annotations

import pytest

from hardware.errors import PlannerInputError
from hardware.jsontypes import as_list, as_mapping, type_name


def test_mapping_is_copied_with_string_keys() -> None:
    src = {"a": 1, "b": [2]}
    out = as_mapping(src, "plan: best")
    assert out == src and out is not src


@pytest.mark.parametrize(
    ("value", "why"),
    [([1], "must be a mapping, got list"), (None, "got null"), ({1: "x"}, "keys must be strings")],
)
def test_mapping_refuses_other_shapes_naming_where(value: object, why: str) -> None:
    with pytest.raises(PlannerInputError, match=why) as err:
        as_mapping(value, "capacity: slo")
    assert "capacity: slo" in str(err.value)


def test_list_accepts_lists_and_tuples_only() -> None:
    assert as_list((1, 2), "x") == [1, 2]
    with pytest.raises(PlannerInputError, match="must be a list, got string"):
        as_list("ab", "capacity: windows")


@pytest.mark.parametrize(
    ("value", "name"),
    [(True, "boolean"), (3, "number"), (2.5, "number"), ("s", "string"), ({}, "mapping")],
)
def test_type_names_are_json_words(value: object, name: str) -> None:
    assert type_name(value) == name
