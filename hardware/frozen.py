"""``FrozenSpec``: base of the immutable specs the planner caches on (GPU, model).

A frozen pydantic model hashes all its fields on every ``hash()`` (a ModelSpec with 80 layer specs:
~90 us; a GpuSpec not at all: its dict fields are unhashable), which made ``functools`` caches
keyed on specs cost more than the work they save. A ``FrozenSpec`` hashes its JSON once and keeps
the value (equality stays pydantic's, field by field); ``model_copy`` (the one way to change a
frozen model) drops it, so a copy with other values hashes afresh.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, ConfigDict


class FrozenSpec(BaseModel):
    """Frozen, extra fields forbidden; hashable at the cost of one field hash per instance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @functools.cached_property
    def field_hash(self) -> int:
        """Digest of the class name and the JSON of every field (computed once; dict fields
        included; the same in every process, so a pickled copy keeps a valid value)."""
        text = f"{type(self).__qualname__}:{self.model_dump_json()}".encode()
        return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)

    def __hash__(self) -> int:
        return self.field_hash

    def model_copy(self, *, update: Mapping[str, object] | None = None, deep: bool = False) -> Self:
        """``BaseModel.model_copy`` without the cached hash (the copy may hold other values)."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("field_hash", None)
        return copy
