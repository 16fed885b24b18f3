"""Op counts and model times shared by lookup and fitting (vectorized over rows).

``counts(op, cols, spec)`` returns FLOPs, bytes, the peak FLOP/s that applies to each row and, for
GEMM, the FLOPs of one padded row (2·n·k) so that ``pad_rows`` can be priced. ``cols`` maps every
key of ``schema.OP_KEYS[op]`` (comm excepted) to a broadcastable array or scalar.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeAlias

import numpy as np

from hardware.spec import GpuSpec
from kernels_db import fp8_scale
from kernels_db import roofline as rf
from kernels_db.fitted import RooflineParams
from kernels_db.ops import Column, Size

# which key names the dtype that selects the parameters and the peak of each family
PARAM_KEY: Final[dict[str, str]] = {
    "gemm": "dtype",
    "attention_prefill": "dtype",
    "attention_decode": "kv_dtype",
    "mla_prefill": "dtype",
    "mla_decode": "kv_dtype",
    "moe": "dtype",
    "memcpy": "",
}
DECODE_MATH_DTYPE: Final[str] = "bf16"  # decode kernels dequantize fp8 KV and compute in 16-bit
MEMCPY_KEY: Final[str] = "any"
# Multi-head (not grouped) decode attention runs other kernels than GQA (TRT-LLM: masked MHA vs
# XQA): its own parameters, under "<kv_dtype>_mha", falling back to "<kv_dtype>" where not fitted.
MHA_SUFFIX: Final[str] = "_mha"
KV_DRAM_SHARE: Final[str] = "kv_dram_share"
"""Optional decode attention column (not a table key): the share of the K + V bytes the kernel
reads from DRAM, 1 when absent. Only fitting and validation set it, for rows of a benchmark harness
that read less than a serving engine does (``kernels_db.harness``)."""
WORKING_SET: Final[str] = "working_set_bytes"
"""Optional GEMM column (not a table key): bytes that a benchmark cycles through between two runs
of the same GEMM, on which the L2-resident share is computed. Only fitting and validation set it
(``kernels_db.harness``: AIConfigurator runs up to 5 copies of the weights in turn). Absent, as in
serving, nothing is resident: a forward step reads every layer's weights before it reads this
one's again, far more than any L2 holds."""


def _constant(value: float) -> np.ndarray:
    """A read-only 0-d array (a default shared by every ``Counts``: nobody may write into it)."""
    arr = np.asarray(value)
    arr.setflags(write=False)
    return arr


_INF, _ZERO, _ONE = _constant(np.inf), _constant(0.0), _constant(1.0)


@dataclass(frozen=True)
class Counts:
    """Work of a batch of ops: FLOPs, bytes, applicable peak FLOP/s, FLOPs per padded GEMM row; the
    kernel's parallel work units and its issued / useful FLOPs ratio (decode attention); for a
    split-KV decode the blocks per unit (``roofline.decode_kv_splits``) and the bytes each further
    block adds (it reads the query and writes a partial output). GEMM: ``gemv`` is 1 on
    single-row products (a library may run a matrix-vector kernel, ``roofline.gemv_time``),
    ``cache_ratio`` is a harness's working set over the L2 size (0: none, as in serving), on
    which a fitted ``cache_cliff_power`` recomputes ``resident``, and ``scale_s`` the seconds of
    the dynamic per-tensor activation-scale passes ahead of it (``fp8_scale``; 0: none).
    ``launches``: kernels one op runs, each paying the fitted ``launch_s`` (a fused-MoE layer's
    ``MOE_GROUPED_GEMMS``; 1 elsewhere)."""

    flops: np.ndarray
    nbytes: np.ndarray
    peak_flops_per_s: np.ndarray
    row_flops: np.ndarray
    units: np.ndarray = field(default_factory=lambda: _INF)
    issue_scale: np.ndarray = field(default_factory=lambda: _ONE)
    resident: np.ndarray = field(default_factory=lambda: _ZERO)
    tiles: np.ndarray = field(default_factory=lambda: _ZERO)
    splits: np.ndarray = field(default_factory=lambda: _ONE)
    split_bytes: np.ndarray = field(default_factory=lambda: _ZERO)
    long_kv: np.ndarray = field(default_factory=lambda: _ZERO)
    streams: bool = False
    gemv: np.ndarray = field(default_factory=lambda: _ZERO)
    cache_ratio: np.ndarray = field(default_factory=lambda: _ZERO)
    scale_s: np.ndarray = field(default_factory=lambda: _ZERO)
    launches: np.ndarray | float = 1.0


FEW_DISTINCT: Final[int] = 8
"""``distinct`` finds up to this many names by vectorized comparisons before it sorts
(np.unique)."""
SMALL_ARRAY: Final[int] = 64
"""``distinct`` reads arrays up to this size as Python lists (cheaper than any numpy call there)."""


@dataclass(frozen=True)
class Labels:
    """A string column as its distinct names and each row's index into them (``factorize``)."""

    names: list[str]
    index: np.ndarray


Value: TypeAlias = "Column | Labels"
"""A key column as the formulas read it: a number, a name, an array, or factorized names."""
Cols: TypeAlias = Mapping[str, Value]
"""Key columns by name (``schema.OP_KEYS``)."""


def _sizes(c: Cols) -> dict[str, Size]:
    """The size columns of ``c`` (numbers or arrays; the name columns left out)."""
    return {k: v for k, v in c.items() if not isinstance(v, (str, Labels))}


def _same(words: np.ndarray, row: int) -> np.ndarray:
    """Rows of ``words`` (fixed-width strings as integer columns) equal to row ``row``."""
    hit = words[:, 0] == words[row, 0]
    for j in range(1, words.shape[1]):
        hit &= words[:, j] == words[row, j]
    return hit


def distinct(values: Column) -> tuple[list[str], np.ndarray]:
    """Distinct strings of array ``values`` and each entry's index into them (shape of ``values``).

    Label columns (dtypes) hold a handful of names over many rows: one comparison per name (of the
    strings' code words as integers) is far cheaper than np.unique's sort of the whole string array,
    which is kept for many names."""
    arr = np.asarray(values)
    if arr.dtype.kind != "U":
        arr = arr.astype(str)
    flat = np.ascontiguousarray(arr.reshape(-1))
    if flat.size <= SMALL_ARRAY:
        index: dict[str, int] = {}
        inv = [index.setdefault(v, len(index)) for v in flat.tolist()]
        return list(index), np.array(inv, dtype=np.intp).reshape(arr.shape)
    size = flat.dtype.itemsize  # NUL-padded UCS4: equal strings have equal code words
    words = flat.view(np.uint64 if size % 8 == 0 else np.uint32).reshape(flat.size, -1)
    inverse = np.full(flat.shape, -1, dtype=np.intp)
    names: list[str] = []
    first = 0
    while len(names) < FEW_DISTINCT:
        inverse[_same(words, first)] = len(names)
        names.append(str(flat[first]))
        left = np.flatnonzero(inverse < 0)
        if not left.size:
            return names, inverse.reshape(arr.shape)
        first = int(left[0])
    uniq, inv_all = np.unique(flat, return_inverse=True)
    return [str(n) for n in uniq], inv_all.reshape(arr.shape)


def factorize(cols: Cols) -> dict[str, Value]:
    """``cols`` with every string array replaced by its ``Labels`` (by its one name when all rows
    share it), so that the formulas below resolve each label column once."""
    out: dict[str, Value] = dict(cols)
    for key, v in cols.items():
        if isinstance(v, np.ndarray) and v.ndim and v.dtype.kind == "U":
            names, index = distinct(v)
            out[key] = names[0] if len(names) == 1 else Labels(names, index)
    return out


def per_value(values: Value, fn: Callable[[str], float]) -> np.ndarray:
    """Apply ``fn`` to each distinct string of ``values``
    (scalar, array or ``Labels``) and broadcast back."""
    if isinstance(values, str):
        return np.asarray(fn(values))
    if isinstance(values, Labels):
        return np.array([fn(n) for n in values.names])[values.index]
    arr = np.asarray(values)
    if arr.ndim == 0:
        return np.asarray(fn(str(arr)))
    names, inverse = distinct(arr)
    return np.array([fn(n) for n in names])[inverse]


@functools.lru_cache(maxsize=256)
def peak_flops(spec: GpuSpec, dtype: str) -> float:
    """``spec.peak_flops(dtype)``, cached per (spec, dtype): a GpuSpec is frozen and hashes its
    fields once (``hardware.frozen.FrozenSpec``), the lookup resolves the math dtype each call."""
    return spec.peak_flops(dtype)


def _peak(spec: GpuSpec, dtype: Value) -> np.ndarray:
    return per_value(dtype, functools.partial(peak_flops, spec))


def _elem_bytes(dtype: Value) -> np.ndarray:
    """Bytes per element of each dtype name (``roofline.dtype_bytes`` without its sort)."""
    return per_value(dtype, rf.DTYPE_BYTES.__getitem__)


MOE_GROUPED_GEMMS: Final[float] = 2.0
"""Grouped GEMM kernels of one fused-MoE layer (gate-up, then down after the activation), each
paying the GEMM fit's fixed ``launch_s``: ``invoke_fused_moe_kernel`` twice in the Triton
path (``fused_experts_impl``, ``python/sglang/srt/layers/moe/fused_moe_triton/fused_moe.py``
of the sglang 0.5.6.post2 wheel), two CUTLASS grouped GEMMs in TensorRT-LLM's. The layer's other
kernels (routing, activation, quantization, combine) are priced with the step's memory-bound
kernels (``planner.perf.opgraph.moe_aux_ops``; the activation in ``elementwise_op``)."""


def _scale_seconds(z: Mapping[str, Size], spec: GpuSpec) -> np.ndarray:
    """Seconds of a GEMM row's dynamic per-tensor activation-scale passes (``fp8_scale``): the
    ``TENSOR_SCALE`` column's passes, each over the row's m x k input (a merged op's second input,
    e.g. the O projection's, is priced at the first one's width: an approximation of a pass that
    is mostly its fixed cost at decode sizes); 0 where the column is absent."""
    passes = z.get(fp8_scale.TENSOR_SCALE)
    if passes is None or not np.any(np.asarray(passes) > 0):
        return _ZERO
    sp = fp8_scale.for_gpu(spec.key)
    return np.asarray(passes, dtype=float) * fp8_scale.seconds(z["m"], z["k"], spec, sp)


def _block_share(z: Mapping[str, Size], spec: GpuSpec) -> np.ndarray | float:
    """Per GEMM row, the share of the per-tensor FP8 GEMM's compute rate it runs at: the GPU's
    ``block_compute_share`` where ``fp8_scale.BLOCK_SCALE`` is set (128 x 128 block scales applied
    while accumulating), else 1."""
    flag = z.get(fp8_scale.BLOCK_SCALE)
    if flag is None or not np.any(np.asarray(flag) > 0):
        return 1.0
    share = fp8_scale.for_gpu(spec.key).block_compute_share
    return np.where(np.asarray(flag) > 0, share, 1.0)


def counts(op: str, c: Cols, spec: GpuSpec) -> Counts:
    """FLOPs, bytes and peak of each row of op family ``op``."""
    zero = np.asarray(0.0)
    z = _sizes(c)
    if op == "gemm":
        eb = _elem_bytes(c["dtype"])
        b = rf.gemm_bytes(z["m"], z["n"], z["k"], eb)
        harness = WORKING_SET in z and bool(spec.l2_cache_bytes)
        return Counts(
            rf.gemm_flops(z["m"], z["n"], z["k"]),
            b,
            _peak(spec, c["dtype"]) * _block_share(z, spec),
            np.asarray(2.0 * z["n"] * z["k"], dtype=float),
            units=rf.gemm_units(z["m"], z["n"], z["k"], spec.sm_count),
            resident=(
                rf.l2_resident_fraction(z[WORKING_SET], spec.l2_cache_bytes)
                if WORKING_SET in z
                else np.zeros(np.shape(b))
            ),
            gemv=np.asarray(np.asarray(z["m"]) == 1, dtype=float),
            cache_ratio=(
                np.asarray(z[WORKING_SET], dtype=float) / float(spec.l2_cache_bytes or 1.0)
                if harness
                else _ZERO
            ),
            scale_s=_scale_seconds(z, spec),
        )
    if op == "attention_prefill":
        f = rf.prefill_attention_flops(
            z["batch"], z["seq"], z["prior"], z["heads"], z["head_dim"], z["window"]
        )
        b = rf.prefill_attention_bytes(
            z["batch"],
            z["seq"],
            z["prior"],
            z["heads"],
            z["kv_heads"],
            z["head_dim"],
            _elem_bytes(c["dtype"]),
            _elem_bytes(c["kv_dtype"]),
        )
        tiles = np.maximum(rf.prefill_tiles(z["batch"], z["seq"], z["heads"]), 1.0)
        return Counts(
            f,
            b,
            _peak(spec, c["dtype"]),
            np.asarray(4.0 * z["batch"] * z["heads"] * z["head_dim"] * z["seq"], dtype=float),
            units=tiles,
            resident=rf.l2_resident_fraction(b, spec.l2_cache_bytes),
            tiles=tiles,
        )
    if op == "attention_decode":
        f = rf.decode_attention_flops(z["batch"], z["kv_len"], z["heads"], z["head_dim"])
        b = rf.decode_attention_bytes(
            z["batch"],
            z["kv_len"],
            z["heads"],
            z["kv_heads"],
            z["head_dim"],
            _elem_bytes(c["kv_dtype"]) * np.asarray(z.get(KV_DRAM_SHARE, 1.0)),
        )
        units = np.maximum(np.asarray(z["batch"] * z["kv_heads"], dtype=float), 1.0)
        grouped = np.asarray(z["heads"]) != np.asarray(z["kv_heads"])
        splits = rf.decode_kv_splits(units, z["kv_len"], spec.sm_count, grouped)
        heads = np.maximum(np.asarray(z["heads"], dtype=float), 1.0)
        return Counts(
            f,
            b,
            np.asarray(peak_flops(spec, DECODE_MATH_DTYPE)),
            np.asarray(4.0 * z["batch"] * z["heads"] * z["head_dim"], dtype=float),
            units,
            rf.decode_issued_heads(z["heads"], z["kv_heads"]) / heads,
            rf.l2_resident_fraction(b, spec.l2_cache_bytes),
            units,
            splits=splits,
            split_bytes=rf.decode_attention_bytes(
                z["batch"], 0.0, z["heads"], z["kv_heads"], z["head_dim"], 0.0
            ),
            long_kv=np.asarray(np.asarray(z["kv_len"]) > rf.DECODE_KV_CHUNK, dtype=float),
            streams=True,
        )
    if op == "mla_prefill":
        f = rf.mla_prefill_flops(
            z["batch"], z["seq"], z["prior"], z["heads"], z["kv_lora_rank"], z["rope_dim"]
        )
        b = rf.mla_prefill_bytes(
            z["batch"],
            z["seq"],
            z["prior"],
            z["heads"],
            z["kv_lora_rank"],
            z["rope_dim"],
            _elem_bytes(c["dtype"]),
        )
        tiles = np.maximum(rf.prefill_tiles(z["batch"], z["seq"], z["heads"]), 1.0)
        return Counts(f, b, _peak(spec, c["dtype"]), zero, units=tiles, tiles=tiles)
    if op == "mla_decode":
        f = rf.mla_decode_flops(
            z["batch"], z["kv_len"], z["heads"], z["kv_lora_rank"], z["rope_dim"]
        )
        b = rf.mla_decode_bytes(
            z["batch"], z["kv_len"], z["kv_lora_rank"], z["rope_dim"], _elem_bytes(c["kv_dtype"])
        )
        return Counts(
            f,
            b,
            np.asarray(peak_flops(spec, DECODE_MATH_DTYPE)),
            zero,
            issue_scale=rf.mla_decode_issue_scale(z["heads"]),
        )
    if op == "moe":
        eb = _elem_bytes(c["dtype"])
        f = rf.moe_flops(z["tokens"], z["hidden"], z["inter"], z["topk"], z["ep"])
        b = rf.moe_bytes(z["tokens"], z["hidden"], z["inter"], z["topk"], z["experts"], z["ep"], eb)
        return Counts(f, b, _peak(spec, c["dtype"]), zero, launches=MOE_GROUPED_GEMMS)
    if op == "memcpy":
        return Counts(zero, rf.memcpy_bytes(z["bytes"]), np.asarray(peak_flops(spec, "bf16")), zero)
    raise KeyError(op)


def model_time(
    cnt: Counts, p: np.ndarray, bandwidth_bytes_per_s: float, pad_rows: np.ndarray | float = 0.0
) -> np.ndarray:
    """Seconds under parameters ``p`` (rows of ``RooflineParams.as_array``). A kernel that splits
    the KV (``p[8]`` = ``split_kv``) runs ``cnt.splits`` thread blocks per unit: each block pays
    the tile cost, pads its own key range (decode ``pad_rows`` are per block) and moves
    ``cnt.split_bytes`` more, and the blocks add parallel streams (``streams``). Merging the
    partial results (and zeroing the counters the blocks sync on, a memset before the launch in
    TensorRT-LLM) costs one more ``launch_s`` whenever the KV spans more than one chunk, at any
    batch, so that the time never falls as the batch grows past the SM-filling cap. With the
    per-block padding and bytes, each further block adds time, and the time is monotone in the KV
    and the batch (it was not: 17.0 us at 129 tokens fell to 14.3 us at 1,024 on h200)."""
    split_kernel = np.asarray(p[8]) > 0.5
    blocks: np.ndarray | float
    kernels: np.ndarray | float
    if split_kernel.ndim:
        blocks = np.where(split_kernel, cnt.splits, 1.0)
        kernels = np.where(split_kernel & (cnt.long_kv > 0.0), 2.0, 1.0)
    elif split_kernel:  # one parameter set (every row): the same values, no per-row select
        blocks = np.asarray(cnt.splits, dtype=float)
        kernels = np.where(cnt.long_kv > 0.0, 2.0, 1.0)
    else:
        blocks, kernels = 1.0, 1.0
    pad = pad_rows * blocks if cnt.streams else pad_rows
    flops = (cnt.flops + cnt.row_flops * pad) * cnt.issue_scale
    resident = cnt.resident
    if len(p) > rf.CLIFF_ROW and np.any(
        cnt.cache_ratio > 0.0
    ):  # a fitted cliff (GEMM harness rows)
        power = np.asarray(p[rf.CLIFF_ROW])
        fitted_share = rf.resident_share(cnt.cache_ratio, np.where(power > 0.0, power, 1.0))
        resident = np.where((power > 0.0) & (cnt.cache_ratio > 0.0), fitted_share, resident)
    return cnt.scale_s + rf.roofline_time(
        flops,
        cnt.nbytes + cnt.split_bytes * (blocks - 1.0),
        cnt.peak_flops_per_s,
        bandwidth_bytes_per_s,
        p,
        cnt.units * blocks,
        resident,
        cnt.tiles * blocks,
        kernels * np.asarray(cnt.launches),
        cnt.streams,
        cnt.gemv,
    )


def param_labels(op: str, c: Cols) -> Value:
    """Name of the parameter set of each row: its dtype (``PARAM_KEY``), ``+ MHA_SUFFIX`` for
    multi-head decode attention; a string when every row takes the same set (always for scalar
    inputs), else a string array."""
    labels = param_label_set(op, c)
    return np.array(labels.names)[labels.index] if isinstance(labels, Labels) else labels


def param_label_set(op: str, c: Cols) -> Value:
    """``param_labels`` as a string, a string array or ``Labels`` (when ``c`` holds ``Labels``, or
    for decode attention whose rows differ in being multi-head), for ``gather_params``."""
    key = PARAM_KEY[op]
    if not key:
        return MEMCPY_KEY
    if op != "attention_decode":
        return c[key]
    mha = np.asarray(c["heads"]) == np.asarray(c["kv_heads"])
    kv = c[key]
    if isinstance(kv, str) and mha.ndim:  # one KV dtype: one name when every row agrees on mha
        if not mha.any():
            return kv
        if mha.all():
            return kv + MHA_SUFFIX
    if isinstance(kv, Labels):
        names, inverse = kv.names, kv.index
    elif np.ndim(kv) == 0:
        if mha.ndim == 0:
            return str(kv) + (MHA_SUFFIX if mha else "")
        names, inverse = [str(kv)], np.zeros((), dtype=np.intp)
    else:
        names, inverse = distinct(kv)
    return Labels(names + [n + MHA_SUFFIX for n in names], np.asarray(inverse + len(names) * mha))


def peak_bound(cnt: Counts, bandwidth_bytes_per_s: float) -> np.ndarray:
    """Plain roofline at 100% of peak and no launch cost (a lower bound), seconds."""
    return np.asarray(
        np.maximum(cnt.flops / cnt.peak_flops_per_s, cnt.nbytes / bandwidth_bytes_per_s)
    )


ParamEntry = tuple[np.ndarray, float, bool]


def param_entry(
    table: Mapping[str, RooflineParams], default: RooflineParams, name: str
) -> ParamEntry:
    """(parameter array (12,), pad rows, fitted or not) of parameter set ``name``: its own entry,
    the entry without ``MHA_SUFFIX``, else ``default``."""
    base = name.removesuffix(MHA_SUFFIX)
    prm = table.get(name) or table.get(base, default)
    arr = prm.as_array()
    arr.setflags(write=False)  # entries are cached and shared: nobody may write into them
    return arr, prm.pad_rows, name in table or base in table


ParamStack = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Parameter arrays of several sets side by side (12, n), their pad rows (n,) and fitted flags
(n,): ``stack_entries``."""


def stack_entries(entries: list[ParamEntry]) -> ParamStack:
    """``param_entry`` results of several parameter sets side by side (read-only: cacheable)."""
    stack = np.stack([e[0] for e in entries], axis=1)  # (12, n_names)
    pads = np.array([e[1] for e in entries])
    found = np.array([e[2] for e in entries])
    for arr in (stack, pads, found):
        arr.setflags(write=False)
    return stack, pads, found


def gather_params(
    table: Mapping[str, RooflineParams],
    default: RooflineParams,
    keys: Value,
    entry: Callable[[str], ParamEntry] | None = None,
    stacked: Callable[[tuple[str, ...]], ParamStack] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row parameter array (12, ...), pad rows, and a mask of rows that found a fitted entry;
    ``entry`` (name -> ``param_entry``) may be a cached version of ``param_entry`` on these
    tables, ``stacked`` (names -> ``stack_entries`` of their entries) a cached version of the
    stack."""
    pick = entry or (lambda name: param_entry(table, default, name))
    if isinstance(keys, str) or (not isinstance(keys, Labels) and np.ndim(keys) == 0):
        prm, pad, has = pick(str(keys))
        return prm, np.asarray(pad), np.asarray(has)
    names, inv = (keys.names, keys.index) if isinstance(keys, Labels) else distinct(keys)
    if len(names) == 1:  # one set for every row: scalars broadcast to the same values
        prm, pad, has = pick(names[0])
        return prm, np.asarray(pad), np.asarray(has)
    stack, pads, found = (
        stacked(tuple(names)) if stacked else stack_entries([pick(n) for n in names])
    )
    return np.take(stack, inv, axis=1), pads[inv], found[inv]
