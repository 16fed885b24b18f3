"""Column schemas of the per-kernel latency tables (``kernels_db/data/<gpu>/<op>.csv``).

One row = one measured op. ``latency_s`` is seconds. Size columns are integers; dtype columns are
strings from ``hardware.spec.DTYPES``. An optional ``kernel_source`` column says which kernel was
timed (e.g. ``torch.matmul``, ``triton``, ``trtllm``); an optional ``source`` column says where the
number comes from (URL or ``github:owner/repo path @commit``).
"""

from __future__ import annotations

from typing import Final

# op family -> (key columns in order, of which these are sizes interpolated in log space)
OP_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "gemm": ("m", "n", "k", "dtype"),
    "attention_prefill": (
        "batch",
        "seq",
        "prior",
        "heads",
        "kv_heads",
        "head_dim",
        "dtype",
        "kv_dtype",
        "window",
    ),
    "attention_decode": ("batch", "kv_len", "heads", "kv_heads", "head_dim", "kv_dtype"),
    "mla_prefill": ("batch", "seq", "prior", "heads", "kv_lora_rank", "rope_dim", "dtype"),
    "mla_decode": ("batch", "kv_len", "heads", "kv_lora_rank", "rope_dim", "kv_dtype"),
    "moe": ("tokens", "hidden", "inter", "topk", "experts", "ep", "dtype"),
    "comm": ("collective", "n_gpus", "bytes", "link"),
    "memcpy": ("bytes",),
}

# Size keys interpolated in log space; every other key must match a table row exactly.
SIZE_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "gemm": ("m", "n", "k"),
    "attention_prefill": ("batch", "seq", "prior"),
    "attention_decode": ("batch", "kv_len"),
    "mla_prefill": ("batch", "seq", "prior"),
    "mla_decode": ("batch", "kv_len"),
    "moe": ("tokens",),
    "comm": ("bytes",),
    "memcpy": ("bytes",),
}

STRING_COLUMNS: Final[frozenset[str]] = frozenset({"dtype", "kv_dtype", "collective", "link"})
LATENCY_COLUMN: Final[str] = "latency_s"
OPTIONAL_COLUMNS: Final[tuple[str, ...]] = ("kernel_source", "source")
# ``custom_all_reduce`` = the engines' own one-/two-shot NVLink all-reduce kernels (not NCCL).
COLLECTIVES: Final[tuple[str, ...]] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
    "custom_all_reduce",
)
LINKS: Final[tuple[str, ...]] = ("nvlink", "pcie", "xgmi", "ib", "nvls", "local")
OP_FAMILIES: Final[tuple[str, ...]] = tuple(OP_KEYS)


def category_keys(op: str) -> tuple[str, ...]:
    """Keys of ``op`` that are matched exactly (dtypes, head counts, collective...)."""
    return tuple(k for k in OP_KEYS[op] if k not in SIZE_KEYS[op])


def columns(op: str) -> tuple[str, ...]:
    """All required columns of op family ``op``: its keys then ``latency_s``."""
    return (*OP_KEYS[op], LATENCY_COLUMN)
