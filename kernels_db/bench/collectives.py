"""Collectives through ``torch.distributed``: NCCL across the visible GPUs (2, 4, 8...), or gloo
between two local processes on a CPU-only machine. One process per rank via
``torch.multiprocessing.spawn``; rank 0 writes its rows to a JSON file the parent reads back.

Latency per call = max over ranks of each rank's median per-call time (CUDA events on GPUs).
``bytes`` is the per-GPU buffer: all_reduce the buffer, all_gather the gathered output,
reduce_scatter the input, all_to_all the send buffer (as nccl-tests counts sizes).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from kernels_db.bench.timing import cuda_event_median_s, wall_median_s
from kernels_db.schema import COLLECTIVES

# NCCL collectives of TP/EP serving; send_recv (PP) and engines' custom all-reduce are not timed
# here.
BENCH_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
assert set(BENCH_COLLECTIVES) <= set(COLLECTIVES)
Row = dict[str, object]


def gpu_counts(device: str) -> list[int]:
    """World sizes to sweep: 2, 4, 8 and the full node for CUDA (needs >1 GPU);
    2 gloo ranks on CPU."""
    if device != "cuda":
        return [2]
    n = torch.cuda.device_count()
    return sorted({w for w in (2, 4, 8) if w <= n} | ({n} if n > 1 else set()))


def link_kind(device: str) -> str:
    """``nvlink`` when nvidia-smi lists active NVLinks on GPU 0, ``pcie`` otherwise;
    ``local`` on CPU."""
    if device != "cuda":
        return "local"
    try:
        text = subprocess.run(
            ["nvidia-smi", "nvlink", "--status", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "pcie"
    return "nvlink" if "GB/s" in text else "pcie"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _op(name: str, n_bytes: int, world: int, device: torch.device) -> Callable[[], object]:
    """A zero-argument call of collective ``name`` over a buffer of about ``n_bytes``."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    elem = torch.tensor([], dtype=dtype).element_size()
    numel = max(world, n_bytes // elem // world * world)
    big = torch.ones(numel, dtype=dtype, device=device)
    small = torch.ones(numel // world, dtype=dtype, device=device)
    if name == "all_reduce":
        return lambda: dist.all_reduce(big)
    # torch 2.13 renames the *_tensor collectives to *_single; older versions have only the former
    if name == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(big, small)
    if name == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(small, big)
    out = torch.empty_like(big)
    return lambda: dist.all_to_all_single(out, big)


def _time_collective(fn: Callable[[], object], device: torch.device, iters: int) -> float:
    if device.type == "cuda":
        local = cuda_event_median_s(fn, iters)
    else:
        local = wall_median_s(fn, iters)
    worst = torch.tensor([local], dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return float(worst.item())


def _worker(
    rank: int,
    world: int,
    backend: str,
    sizes: list[int],
    port: int,
    out: str,
    link: str,
    iters: int,
) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(seconds=300))
    rows: list[Row] = []
    notes: list[str] = []
    for name in BENCH_COLLECTIVES:
        try:
            _op(name, 1024, world, device)()  # unsupported by this backend: every rank raises
        except (RuntimeError, NotImplementedError, ValueError) as exc:
            notes.append(f"{name} ({backend}): {str(exc).splitlines()[0][:100]}")
            continue
        for n_bytes in sizes:
            latency = _time_collective(_op(name, n_bytes, world, device), device, iters)
            if rank == 0:
                rows.append(
                    {
                        "collective": name,
                        "n_gpus": world,
                        "bytes": n_bytes,
                        "link": link,
                        "latency_s": latency,
                        "kernel_source": backend,
                    }
                )
                print(
                    f"  comm {name} n_gpus={world} bytes={n_bytes} {latency * 1e6:.1f} us",
                    file=sys.stderr,
                )
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps({"rows": rows, "notes": notes}))


def comm_rows(device: str, sizes: list[int], iters: int) -> tuple[list[Row], list[str]]:
    """Rows of the ``comm`` table for every world size, and notes on collectives skipped."""
    import torch.multiprocessing as mp

    backend = "nccl" if device == "cuda" else "gloo"
    link = link_kind(device)
    rows: list[Row] = []
    notes: list[str] = []
    for i, world in enumerate(gpu_counts(device), 1):
        print(
            f"[{i}/{len(gpu_counts(device))}] comm {backend} n_gpus={world} "
            f"({len(sizes)} sizes x {len(BENCH_COLLECTIVES)} collectives)",
            file=sys.stderr,
        )
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rows.json"
            mp.spawn(
                _worker,
                args=(world, backend, sizes, _free_port(), str(out), link, iters),
                nprocs=world,
                join=True,
            )
            result = json.loads(out.read_text())
        rows += result["rows"]
        notes += result["notes"]
    return rows, notes
