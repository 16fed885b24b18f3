"""`planner memory`: per-GPU memory plan for one deployment."""

from __future__ import annotations

import argparse
from typing import Any

from planner.cli.common import add_format, add_model_gpu, resolve_model_gpu, token_count
from planner.cli.field_help import add_worker_flags, engine_limits
from planner.cli.output import print_json, render_kv
from planner.engines import DEFAULT_ENGINE, engine_names
from planner.perf.deployment import Parallelism
from planner.perf.memory_plan import KV_BYTES, WEIGHT_BYTES, MemoryPlan, plan_memory


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("memory", help="per-GPU memory plan: weights, KV cache, capacity")
    add_model_gpu(p)
    add_worker_flags(p, sorted(WEIGHT_BYTES), sorted(KV_BYTES))
    p.add_argument(
        "--backend",
        default=DEFAULT_ENGINE,
        choices=engine_names(),
        help="engine whose default --max-num-seqs and --max-num-batched-tokens apply",
    )
    p.add_argument("--isl", type=token_count, default=None, help="input tokens per request")
    p.add_argument("--osl", type=token_count, default=None, help="output tokens per request")
    add_format(p)
    p.set_defaults(func=cmd_memory)


def memory_table(plan: MemoryPlan, title: str) -> str:
    gb = 1e9
    rows = {
        "device memory (GB)": plan.gpu_memory_bytes / gb,
        "engine budget (GB)": plan.budget_bytes_per_gpu / gb,
        "weights (GB)": plan.weights_bytes_per_gpu / gb,
        "activations (GB)": plan.activation_bytes_per_gpu / gb,
        "reserved (GB)": plan.reserved_bytes_per_gpu / gb,
        "KV cache budget (GB)": plan.kv_budget_bytes_per_gpu / gb,
        "KV bytes / token / GPU": plan.kv_bytes_per_token_per_gpu,
        "KV capacity (tokens)": plan.kv_capacity_tokens,
    }
    if plan.max_concurrency is not None:
        rows[f"max concurrency ({plan.tokens_per_seq} tok/seq)"] = plan.max_concurrency
    return render_kv(rows, title)


def cmd_memory(args: argparse.Namespace) -> int:
    model, gpu = resolve_model_gpu(args)
    par = Parallelism(tp=args.tp, pp=args.pp, dp=args.dp, ep=args.ep)
    plan = plan_memory(
        model,
        gpu,
        par,
        weight_quant=args.weight_quant,
        kv_dtype=args.kv_dtype,
        **engine_limits(args),
        gpu_memory_utilization=args.gpu_memory_utilization,
        isl=args.isl,
        osl=args.osl,
    )
    if args.format == "json":
        print_json({"model": model.name, "gpu": gpu.key, **plan.model_dump(mode="json")})
    else:
        title = (
            f"{model.name} on {par.gpus} x {gpu.name} "
            f"(tp={par.tp} pp={par.pp} dp={par.dp} ep={par.ep}), "
            f"{plan.weight_quant} weights, {plan.kv_dtype} KV"
        )
        print(memory_table(plan, title))
    return 0
