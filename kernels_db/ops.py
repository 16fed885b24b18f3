"""Typed descriptions of the ops ``KernelDB.price`` prices: one frozen dataclass per op family.

    db.price(Gemm(m=np.array([1, 64, 4096]), n=8192, k=8192, dtype="bf16"))

Each field is a column of the family's table (``kernels_db.schema.OP_KEYS``, same names, same
order): sizes are numbers or arrays (broadcast together), dtypes are names or arrays of names.
Collectives are priced by ``KernelDB.comm`` (collective, GPUs, bytes, link), not by a shape.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Protocol, TypeAlias

import numpy as np

from hardware.errors import PlannerInputError
from kernels_db.schema import OP_KEYS

Size: TypeAlias = "np.ndarray | float"
"""A size column: a number or an array of numbers (one per row)."""
Label: TypeAlias = "np.ndarray | str"
"""A name column (dtype, collective, link): a name or an array of names (one per row)."""
Column: TypeAlias = "np.ndarray | float | str"
"""A key column of a kernel table, of either kind (``Size`` or ``Label``)."""


@dataclass(frozen=True, eq=False)
class KernelShape:
    """Base of the op descriptions: ``family`` names the table, the fields are its key columns."""

    family: ClassVar[str] = ""

    def columns(self) -> dict[str, Column]:
        """The fields by name: the key columns in ``OP_KEYS`` order (the tables' and the model's
        form), then any model-only columns (``EXTRA_COLUMNS``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, eq=False)
class Gemm(KernelShape):
    """(m x k) @ (k x n) in ``dtype``; output 16-bit. Not table keys (``EXTRA_COLUMNS``):
    ``tensor_scale``, dynamic per-tensor activation-scale passes over the m x k input ahead of it,
    and ``block_scale``, 1 where it applies 128 x 128 block scales as it accumulates (both
    ``kernels_db.fp8_scale``; 0 = none)."""

    family: ClassVar[str] = "gemm"
    m: Size
    n: Size
    k: Size
    dtype: Label = "bf16"
    tensor_scale: Size = 0.0
    block_scale: Size = 0.0


@dataclass(frozen=True, eq=False)
class AttentionPrefill(KernelShape):
    """Causal attention of ``seq`` new tokens over ``prior`` cached ones, per sequence of
    ``batch``; ``window`` 0 = full attention."""

    family: ClassVar[str] = "attention_prefill"
    batch: Size
    seq: Size
    prior: Size
    heads: Size
    kv_heads: Size
    head_dim: Size
    dtype: Label = "bf16"
    kv_dtype: Label = "bf16"
    window: Size = 0


@dataclass(frozen=True, eq=False)
class AttentionDecode(KernelShape):
    """One decode step of ``batch`` sequences of ``kv_len`` cached tokens each."""

    family: ClassVar[str] = "attention_decode"
    batch: Size
    kv_len: Size
    heads: Size
    kv_heads: Size
    head_dim: Size
    kv_dtype: Label = "bf16"


@dataclass(frozen=True, eq=False)
class MlaPrefill(KernelShape):
    """Multi-head latent attention (DeepSeek) prefill."""

    family: ClassVar[str] = "mla_prefill"
    batch: Size
    seq: Size
    prior: Size
    heads: Size
    kv_lora_rank: Size
    rope_dim: Size
    dtype: Label = "bf16"


@dataclass(frozen=True, eq=False)
class MlaDecode(KernelShape):
    """Multi-head latent attention decode (weight-absorbed)."""

    family: ClassVar[str] = "mla_decode"
    batch: Size
    kv_len: Size
    heads: Size
    kv_lora_rank: Size
    rope_dim: Size
    kv_dtype: Label = "bf16"


@dataclass(frozen=True, eq=False)
class Moe(KernelShape):
    """Grouped expert GEMMs of one MoE layer on one GPU (its ``experts/ep`` share), no
    all-to-all."""

    family: ClassVar[str] = "moe"
    tokens: Size
    hidden: Size
    inter: Size
    topk: Size
    experts: Size
    ep: Size = 1
    dtype: Label = "bf16"


@dataclass(frozen=True, eq=False)
class Memcpy(KernelShape):
    """Device-local copy of ``bytes`` bytes."""

    family: ClassVar[str] = "memcpy"
    bytes: Size


SHAPES: dict[str, type[KernelShape]] = {
    c.family: c
    for c in (Gemm, AttentionPrefill, AttentionDecode, MlaPrefill, MlaDecode, Moe, Memcpy)
}
"""Op family -> its description class (every family of ``OP_KEYS`` but ``comm``): its fields are
the family's table keys, in order, then optional model-only columns (``EXTRA_COLUMNS``)."""
EXTRA_COLUMNS: dict[str, tuple[str, ...]] = {"gemm": ("tensor_scale", "block_scale")}
"""Shape fields that are not table keys: they price the op (``kernels_db.costs``) but no table
has them, and interpolation ignores them."""
assert all(
    tuple(f.name for f in fields(c)) == OP_KEYS[k] + EXTRA_COLUMNS.get(k, ())
    for k, c in SHAPES.items()
)


def shape_of(family: str, cols: dict[str, Column]) -> KernelShape:
    """The description of ``family`` from its key columns by name (a table row, CLI arguments);
    a family or column name that does not exist is a ``PlannerInputError``."""
    cls = SHAPES.get(family)
    if cls is None:
        raise PlannerInputError("op", f"unknown '{family}'; allowed: {', '.join(SHAPES)}")
    unknown = sorted(set(cols) - set(OP_KEYS[family]))
    if unknown:
        allowed = ", ".join(OP_KEYS[family])
        raise PlannerInputError(unknown[0], f"not a key of {family}; allowed: {allowed}")
    return cls(**cols)


class StepOp(Protocol):
    """An op of a serving step as the step pricer (``kernels_db.lookup.StepPricer``) reads it:
    ``planner.perf.opgraph.Op`` is one. Work arrays have one row per candidate."""

    @property
    def family(self) -> str:
        """'comm' for a collective; otherwise the serving model's family name."""
        ...

    @property
    def shape(self) -> KernelShape | None:
        """The kernels_db description of the kernel; None when kernels_db has no family for it."""
        ...

    @property
    def flops(self) -> np.ndarray:
        """FLOPs per instance (an op with neither FLOPs nor bytes costs 0 s)."""
        ...

    @property
    def nbytes(self) -> np.ndarray:
        """Bytes per instance (a collective's message bytes)."""
        ...

    @property
    def kernels(self) -> float:
        """Kernels (collective messages) per instance."""
        ...

    @property
    def collective(self) -> str:
        """Collective of a comm op (``schema.COLLECTIVES``) or 'none'."""
        ...

    @property
    def n_gpus(self) -> np.ndarray | float:
        """Ranks of the collective."""
        ...

    def spread(self) -> np.ndarray | float:
        """GPUs whose placement decides the link (inside the scale-up domain or not)."""
        ...
