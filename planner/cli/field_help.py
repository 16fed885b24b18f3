"""CLI flags that set a pydantic field take their ``--help`` text from the field's description, so
each setting is documented once (the UI's tooltips read the same descriptions)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from pydantic import BaseModel

from planner.cli.common import (
    chunk_tokens,
    client_count,
    gpu_count,
    memory_fraction,
    shard_size,
)
from planner.engines.calibration import engine
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.workload.spec import Workload
from solvers.plan import PlanRequest
from solvers.plan_prefix import PrefixPlanRequest

WORKER: dict[str, tuple[type[BaseModel], str]] = {
    "--tp": (Parallelism, "tp"),
    "--pp": (Parallelism, "pp"),
    "--dp": (Parallelism, "dp"),
    "--ep": (Parallelism, "ep"),
    "--weight-quant": (WorkerConfig, "weight_quant"),
    "--kv-dtype": (WorkerConfig, "kv_dtype"),
    "--max-num-seqs": (WorkerConfig, "max_num_seqs"),
    "--max-num-batched-tokens": (WorkerConfig, "max_num_batched_tokens"),
    "--gpu-memory-utilization": (WorkerConfig, "gpu_memory_utilization"),
}
"""Flags of one worker's engine settings (``planner estimate``, ``simulate``, ``memory``)."""

LOAD: dict[str, tuple[type[BaseModel], str]] = {
    "--concurrency": (Workload, "concurrency"),
    "--rate": (Workload, "rate_per_s"),
    "--bench-requests": (Workload, "bench_requests"),
    "--arrival": (Workload, "arrival"),
    "--arrival-cv": (Workload, "arrival_cv"),
    "--prefix-hit": (Workload, "prefix_hit"),
}
"""Flags of the offered load (``planner estimate``, ``simulate``)."""

PLAN: dict[str, tuple[type[BaseModel], str]] = {
    f"--{flag}": (PlanRequest, field)
    for flag, field in (
        ("gpu", "gpus"),
        ("max-gpus", "max_gpus"),
        ("isl", "isl"),
        ("osl", "osl"),
        ("rate", "rate_per_s"),
        ("concurrency", "concurrency"),
        ("ttft-ms", "ttft_ms"),
        ("tpot-ms", "tpot_ms"),
        ("percentile", "percentile"),
        ("confidence", "confidence"),
        ("mode", "mode"),
        ("backend", "backend"),
        ("price-per-gpu-hour", "price_per_gpu_hour"),
        ("objective", "objective"),
        ("electricity-price", "electricity_price"),
        ("pue", "pue"),
        ("weight-quant", "weight_quants"),
        ("node-gpus", "node_gpus"),
        ("max-isl", "max_isl"),
        ("max-osl", "max_osl"),
        ("prefix-hit", "prefix_hit"),
    )
} | {
    f"--{flag}": (PrefixPlanRequest, field)
    for flag, field in (
        ("host-kv-gib", "host_kv_gib"),
        ("ssd-kv-gib", "ssd_kv_gib"),
        ("ssd-gbps", "ssd_gbps"),
        ("routing", "routing"),
    )
}
"""Flags of ``planner plan`` that set a ``solvers.plan.PlanRequest`` field (or, for prefix
caching, a ``solvers.plan_prefix.PrefixPlanRequest`` field)."""

MAPPED: dict[str, dict[str, tuple[type[BaseModel], str]]] = {
    "estimate": {**WORKER, **LOAD},
    "simulate": {**WORKER, **LOAD},
    "memory": WORKER,
    "plan": PLAN,
}
"""Command -> flag -> the (model, field) it sets; the test checks each flag's help against it."""


def description(model: type[BaseModel], field: str) -> str:
    """The field's description (every field has one; a test checks it)."""
    text = model.model_fields[field].description
    if not text:
        raise ValueError(f"{model.__name__}.{field} has no description")
    return text


def flag_help(
    table: dict[str, tuple[type[BaseModel], str]], flag: str, default: str = "", note: str = ""
) -> str:
    """``--help`` text of ``flag``: its field's description, plus ``(default: ...)`` where the CLI
    default differs from the field's and ``(note)`` for how the flag spells it (argparse's ``%``
    escaped)."""
    model, field = table[flag]
    text = description(model, field) + (f" (default: {default})" if default else "")
    text += f" ({note})" if note else ""
    return text.replace("%", "%%")


ENGINE_DEFAULT = "the --backend engine's own, from planner/engines/<backend>/constants.yaml"


def engine_limits(args: argparse.Namespace) -> dict[str, int]:
    """--max-num-seqs and --max-num-batched-tokens, each the engine's own default (its
    constants.yaml) when not given: one source for what an engine does unless told otherwise."""
    cal = engine(args.backend)
    return {
        name: getattr(args, name) or int(getattr(cal, name).value)
        for name in ("max_num_seqs", "max_num_batched_tokens")
    }


def add_worker_flags(
    p: argparse.ArgumentParser, weight_quants: Sequence[str], kv_dtypes: Sequence[str]
) -> None:
    """One worker's flags (``WORKER``: parallelism, weight and KV formats, engine limits, memory
    fraction), shared by ``planner estimate``, ``simulate`` and ``memory``; ``weight_quants`` and
    ``kv_dtypes`` are the formats the command accepts."""
    for flag in ("tp", "pp", "dp", "ep"):
        size = shard_size if flag in ("tp", "pp") else gpu_count
        p.add_argument(f"--{flag}", type=size, default=1, help=flag_help(WORKER, f"--{flag}"))
    p.add_argument(
        "--weight-quant",
        choices=weight_quants,
        default=None,
        help=flag_help(WORKER, "--weight-quant", "the checkpoint's"),
    )
    p.add_argument(
        "--kv-dtype", choices=kv_dtypes, default="bf16", help=flag_help(WORKER, "--kv-dtype")
    )
    p.add_argument(
        "--max-num-seqs",
        type=client_count,
        default=None,
        help=flag_help(WORKER, "--max-num-seqs", ENGINE_DEFAULT),
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=chunk_tokens,
        default=None,
        help=flag_help(WORKER, "--max-num-batched-tokens", ENGINE_DEFAULT),
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=memory_fraction,
        default=0.9,
        help=flag_help(WORKER, "--gpu-memory-utilization"),
    )
