"""CLI flags that set a pydantic field take their ``--help`` text from the field's description, so
each setting is documented once (the UI's tooltips read the same descriptions)."""

from __future__ import annotations

import argparse

from pydantic import BaseModel

from planner.deployment import Parallelism, WorkerConfig
from planner.engine_calibration import engine
from planner.workload import SpecDecode, Workload

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
    "--spec-draft-len": (SpecDecode, "draft_len"),
    "--spec-acceptance": (SpecDecode, "acceptance"),
}
"""Flags of the offered load (``planner estimate``, ``simulate``)."""

MAPPED: dict[str, dict[str, tuple[type[BaseModel], str]]] = {
    "estimate": {**WORKER, **LOAD},
    "simulate": {**WORKER, **LOAD},
    "memory": WORKER,
}
"""Command -> flag -> the (model, field) it sets; the test checks each flag's help against it."""


def description(model: type[BaseModel], field: str) -> str:
    """The field's description (every field has one; a test checks it)."""
    text = model.model_fields[field].description
    if not text:
        raise ValueError(f"{model.__name__}.{field} has no description")
    return text


def flag_help(table: dict[str, tuple[type[BaseModel], str]], flag: str, default: str = "") -> str:
    """``--help`` text of ``flag``: its field's description, plus ``(default: ...)`` where the CLI
    default differs from the field's (argparse's ``%`` escaped)."""
    model, field = table[flag]
    text = description(model, field) + (f" (default: {default})" if default else "")
    return text.replace("%", "%%")


ENGINE_DEFAULT = "the --backend engine's own, from planner/calibration/engines.yaml"


def engine_limits(args: argparse.Namespace) -> dict[str, int]:
    """--max-num-seqs and --max-num-batched-tokens, each the engine's own default (engines.yaml)
    when not given: one source for what an engine does unless told otherwise."""
    cal = engine(args.backend)
    return {
        name: getattr(args, name) or int(getattr(cal, name).value)
        for name in ("max_num_seqs", "max_num_batched_tokens")
    }
