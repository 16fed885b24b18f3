"""``planner calibrate run``: sweep the shape grid on this machine's GPU (or CPU) and write kernel
tables in the ``kernels_db.schema`` layout: ``OUT/<op>.csv`` + ``OUT/meta.yaml`` for the production
reference kernels (cuBLAS/torch.matmul, SDPA, torch grouped_mm, copy_, NCCL). On a GPU our Triton
kernels are timed on the same shapes and written to a sibling folder ``OUT-triton/`` in the same
layout: a table holds one kernel source (the readers refuse duplicate keys), and a sibling rather
than a subfolder keeps ``OUT``'s recursive readers from mixing the two.
"""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

import torch
import yaml

from hardware.errors import PlannerInputError
from kernels_db.bench import collectives, meta, shapes
from kernels_db.bench.sweeps import SweepContext, sweep_op
from kernels_db.bench.timing import CpuTimer, CudaTimer
from kernels_db.schema import LATENCY_COLUMN, OP_KEYS

SUPPORTED_OPS: tuple[str, ...] = (
    "gemm",
    "attention_decode",
    "attention_prefill",
    "moe",
    "memcpy",
    "comm",
)
OP_ALIASES: dict[str, tuple[str, ...]] = {
    "attention": ("attention_prefill", "attention_decode"),
    "all": SUPPORTED_OPS,
}
# One thread by default: in CI the two cores are shared with the other test worker, and a 2-thread
# OpenMP GEMM then waits on a descheduled peer every call (measured at load 6 on 2 cores:
# 64x1024x1024 fp32 GEMM 26 ms with 2 threads vs 2 ms with 1). Set KERNELS_BENCH_CPU_THREADS on a
# quiet host.
CPU_THREADS = int(os.environ.get("KERNELS_BENCH_CPU_THREADS", "1"))
COMM_ITERS = {"cuda": 20, "cpu": 10}
Row = dict[str, object]


def resolve_ops(ops: list[str]) -> tuple[str, ...]:
    """Expand aliases (``attention``, ``all``; empty = all) and check the names, in sweep order."""
    wanted: set[str] = set()
    for name in ops or ["all"]:
        name = name.strip()
        if name in OP_ALIASES:
            wanted |= set(OP_ALIASES[name])
        elif name in SUPPORTED_OPS:
            wanted.add(name)
        elif name:
            allowed = ", ".join((*SUPPORTED_OPS, *OP_ALIASES))
            raise PlannerInputError("--ops", f"cannot benchmark '{name}'; choose from {allowed}")
    return tuple(op for op in SUPPORTED_OPS if op in wanted)


def _gpu_key(device_name: str) -> str:
    """Catalog key of the CUDA device, or a slug of its name when the catalog lacks it."""
    from hardware.catalog import get_gpu, normalize

    for candidate in (device_name, device_name.replace("NVIDIA", "").strip()):
        try:
            return get_gpu(candidate).key
        except PlannerInputError:
            continue
    return normalize(device_name) or "unknown_gpu"


def resolve_device(gpu: str) -> tuple[str, str, str]:
    """(device, gpu_key, device_name) for ``--gpu auto|cpu|<catalog key>``."""
    want = gpu.strip().lower()
    has_cuda = torch.cuda.is_available()
    if want == "cpu" or (want == "auto" and not has_cuda):
        if want == "auto":
            print("no CUDA device visible: timing the CPU references (--gpu cpu)", file=sys.stderr)
        return "cpu", "cpu", meta.cpu_name()
    if not has_cuda:
        raise PlannerInputError(
            "--gpu", f"'{gpu}' needs a CUDA device and none is visible; use --gpu cpu"
        )
    name = torch.cuda.get_device_name(0)
    key = _gpu_key(name)
    if want != "auto":
        from hardware.catalog import get_gpu

        asked = get_gpu(gpu).key
        if asked != key:
            print(
                f"warning: --gpu {gpu} but the visible device is '{name}' ({key}); "
                f"tables are labelled {asked}",
                file=sys.stderr,
            )
        key = asked
    return "cuda", key, name


def _context(device: str, quick: bool, budget_s: float | None) -> SweepContext:
    deadline = time.monotonic() + budget_s if budget_s else float("inf")
    if device == "cpu":
        return SweepContext(
            "cpu", CpuTimer(target_s=0.02 if quick else 0.1), quick, deadline=deadline
        )
    props = torch.cuda.get_device_properties(0)
    fp8 = (props.major, props.minor) >= (8, 9)
    timer = CudaTimer(warmup_ms=2.0, rep_ms=8.0) if quick else CudaTimer()
    return SweepContext(
        "cuda",
        timer,
        quick,
        sm_count=props.multi_processor_count,
        fp8=fp8,
        triton=True,
        deadline=deadline,
    )


def write_csv(path: Path, op: str, rows: list[Row]) -> None:
    """One table in schema column order, then ``kernel_source``;
    latency with 6 significant digits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = [*OP_KEYS[op], LATENCY_COLUMN, "kernel_source"]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(cols)
        for r in rows:
            writer.writerow([f"{r[c]:.6g}" if c == LATENCY_COLUMN else r[c] for c in cols])


def write_folder(folder: Path, tables: dict[str, list[Row]], meta_doc: dict[str, object]) -> None:
    """Write ``<op>.csv`` per table and ``meta.yaml`` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        write_csv(folder / name, Path(name).stem, rows)
    (folder / "meta.yaml").write_text(yaml.safe_dump(meta_doc, sort_keys=False, width=100))


def _sweep_all(ops: tuple[str, ...], ctx: SweepContext, notes: list[str]) -> dict[str, list[Row]]:
    tables: dict[str, list[Row]] = {}
    for op in ops:
        t0 = time.monotonic()
        if op == "comm":
            if ctx.device == "cuda" and torch.cuda.device_count() < 2:
                notes.append("comm: one GPU visible, no collectives measured")
                continue
            rows, skipped = collectives.comm_rows(
                ctx.device, shapes.comm_bytes(ctx.device, ctx.quick), COMM_ITERS[ctx.device]
            )
            notes.extend(skipped)
            got = {"comm.csv": rows} if rows else {}
        else:
            got = sweep_op(op, ctx)
        for name, rows in got.items():
            tables.setdefault(name, []).extend(rows)
        print(
            f"== {op}: {sum(len(r) for r in got.values())} rows in {time.monotonic() - t0:.1f} s",
            file=sys.stderr,
        )
    return tables


def run(gpu: str, ops: list[str], quick: bool, out: Path, budget_s: float | None = None) -> Path:
    """Measure the ops on ``gpu`` (``auto``, ``cpu`` or a catalog key), write tables to ``out``.

    Returns ``out``. Triton tables (GPU only) go to ``out``'s sibling ``<name>-triton``.
    ``budget_s`` stops sweeping new shapes after that many seconds (recorded in meta.yaml).
    """
    op_list = resolve_ops(ops)
    device, gpu_key, device_name = resolve_device(gpu)
    if device == "cpu":
        torch.set_num_threads(CPU_THREADS)
    torch.manual_seed(0)
    ctx = _context(device, quick, budget_s)
    notes: list[str] = []
    print(
        f"calibrate run: {gpu_key} ({device_name}), ops {', '.join(op_list)}"
        f"{' (quick)' if quick else ''} -> {out}",
        file=sys.stderr,
    )
    tables = _sweep_all(op_list, ctx, notes)
    notes += ctx.truncated + [f"skipped: {s}" for s in ctx.skipped]
    timer = (
        "triton.testing.do_bench median (CUDA events, L2 flushed)"
        if device == "cuda"
        else f"time.perf_counter p25 of repeats after warm-up, torch threads={CPU_THREADS}"
    )
    groups = {
        out: {k: v for k, v in tables.items() if not k.startswith("triton/")},
        out.with_name(out.name + "-triton"): {
            k.removeprefix("triton/"): v for k, v in tables.items() if k.startswith("triton/")
        },
    }
    for folder, group in groups.items():
        if group or folder == out:
            doc = meta.build_meta(
                gpu_key, device, device_name, group, quick=quick, timer=timer, notes=notes
            )
            write_folder(folder, group, doc)
            print(
                f"wrote {len(group)} tables, {sum(len(r) for r in group.values())} rows -> "
                f"{folder}",
                file=sys.stderr,
            )
    return out
