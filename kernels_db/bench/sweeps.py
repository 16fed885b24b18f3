"""Sweep one op family over its shape grid: build the cases of each shape, time every kernel
source, print one progress line per shape to stderr, and return rows grouped by table file
(``<op>.csv`` for the production reference, ``triton/<op>.csv`` for our Triton kernels)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import torch

from kernels_db.bench import cases as C
from kernels_db.bench import shapes as S

Row = dict[str, object]
TRITON = "triton"


@dataclass
class SweepContext:
    """What every sweep needs: the device, the timer, and the wall-clock deadline."""

    device: str  # "cpu" or "cuda"
    timer: Callable[[Callable[[], object]], float]
    quick: bool
    sm_count: int = 0
    fp8: bool = False
    triton: bool = False
    """Also time our Triton kernels (GPU runs; tests set it on CPU under the interpreter)."""
    deadline: float = float("inf")
    """``time.monotonic()`` after which remaining shapes are skipped."""
    truncated: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def dtype(self) -> str:
        """Compute dtype of the sweep: bf16 on GPUs, fp32 on CPUs."""
        return "bf16" if self.device == "cuda" else "fp32"


def table_of(op: str, source: str) -> str:
    """Table file for rows of ``op`` timed with ``source``."""
    return f"triton/{op}.csv" if source == TRITON else f"{op}.csv"


def _label(keys: Row) -> str:
    return " ".join(f"{k}={v}" for k, v in keys.items())


def _free(device: str) -> None:
    if device == "cuda":
        torch.cuda.empty_cache()


def sweep(
    op: str,
    items: list[tuple[Row, Callable[[], C.Cases]]],
    ctx: SweepContext,
) -> dict[str, list[Row]]:
    """Time every case of every item; rows carry the keys, ``latency_s`` and ``kernel_source``."""
    tables: dict[str, list[Row]] = {}
    for i, (keys, build) in enumerate(items, 1):
        if time.monotonic() > ctx.deadline:
            ctx.truncated.append(f"{op}: stopped at {i - 1}/{len(items)} shapes (time budget)")
            print(f"[{op}] time budget spent: {len(items) - i + 1} shapes skipped", file=sys.stderr)
            break
        parts = []
        try:
            cases = build()
        except Exception as exc:  # noqa: BLE001 -- out of memory, unsupported shape: skip it
            ctx.skipped.append(f"{op} {_label(keys)}: {str(exc).splitlines()[0][:120]}")
            cases = {}
        for source, fn in cases.items():
            try:
                latency = ctx.timer(fn)
            except Exception as exc:  # noqa: BLE001 -- a failed shape must not end the sweep
                ctx.skipped.append(
                    f"{op} {source} {_label(keys)}: {str(exc).splitlines()[0][:120]}"
                )
                continue
            tables.setdefault(table_of(op, source), []).append(
                {**keys, "latency_s": latency, "kernel_source": source}
            )
            parts.append(f"{source} {latency * 1e3:.4g} ms")
        del cases
        print(f"[{i}/{len(items)}] {op} {_label(keys)}  " + "  ".join(parts), file=sys.stderr)
        if i % 16 == 0:
            _free(ctx.device)
    _free(ctx.device)
    return tables


def _gemm_items(ctx: SweepContext) -> Iterable[tuple[Row, Callable[[], C.Cases]]]:
    grid = S.gpu_gemm(ctx.quick) if ctx.device == "cuda" else S.cpu_gemm(ctx.quick)
    dtypes = [ctx.dtype] + (["fp8"] if ctx.fp8 else [])
    for dtype in dtypes:
        for s in grid:
            yield (
                {**s._asdict(), "dtype": dtype},
                partial(C.gemm_cases, s, dtype, ctx.device, ctx.triton),
            )


def _prefill_items(ctx: SweepContext) -> Iterable[tuple[Row, Callable[[], C.Cases]]]:
    grid = S.gpu_prefill(ctx.quick) if ctx.device == "cuda" else S.cpu_prefill(ctx.quick)
    for s in grid:
        keys: Row = {
            "batch": s.batch,
            "seq": s.seq,
            "prior": s.prior,
            "heads": s.heads,
            "kv_heads": s.kv_heads,
            "head_dim": s.head_dim,
            "dtype": ctx.dtype,
            "kv_dtype": ctx.dtype,
            "window": s.window,
        }
        yield keys, partial(C.prefill_cases, s, ctx.dtype, ctx.device, ctx.triton)


def _decode_items(ctx: SweepContext) -> Iterable[tuple[Row, Callable[[], C.Cases]]]:
    grid = S.gpu_decode(ctx.quick) if ctx.device == "cuda" else S.cpu_decode(ctx.quick)
    for s in grid:
        yield (
            {**s._asdict(), "kv_dtype": ctx.dtype},
            partial(C.decode_cases, s, ctx.dtype, ctx.device, ctx.sm_count, ctx.triton),
        )


def _moe_items(ctx: SweepContext) -> Iterable[tuple[Row, Callable[[], C.Cases]]]:
    grid = S.gpu_moe(ctx.quick) if ctx.device == "cuda" else S.cpu_moe(ctx.quick)
    for s in grid:
        yield (
            {**s._asdict(), "dtype": ctx.dtype},
            partial(C.moe_cases, s, ctx.dtype, ctx.device, ctx.triton),
        )


def _memcpy_items(ctx: SweepContext) -> Iterable[tuple[Row, Callable[[], C.Cases]]]:
    for n in S.memcpy_bytes(ctx.device, ctx.quick):
        yield {"bytes": n}, partial(C.memcpy_cases, n, ctx.device, ctx.triton)


ITEMS: dict[str, Callable[[SweepContext], Iterable[tuple[Row, Callable[[], C.Cases]]]]] = {
    "gemm": _gemm_items,
    "attention_prefill": _prefill_items,
    "attention_decode": _decode_items,
    "moe": _moe_items,
    "memcpy": _memcpy_items,
}


def sweep_op(op: str, ctx: SweepContext) -> dict[str, list[Row]]:
    """Sweep one compute op family (``comm`` lives in ``collectives``)."""
    return sweep(op, list(ITEMS[op](ctx)), ctx)
