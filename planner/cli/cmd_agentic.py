"""``planner gen-trace --agentic``: multi-turn agent sessions written as Mooncake JSON lines."""

from __future__ import annotations

import argparse
from typing import Any

from hardware.errors import PlannerInputError
from planner.cli.common import positive_float, positive_int
from planner.cli.output import print_json, render_kv

_AGENTIC_FLAGS: tuple[tuple[str, Any, str], ...] = (
    ("sessions", positive_int, "sessions generated"),
    ("session-rate", positive_float, "session starts per second, Poisson"),
    ("turns-mean", positive_float, "mean turns per session, geometric"),
    ("think-s", float, "mean seconds from one turn's arrival to the next, exponential"),
    ("system-tokens", int, "tokens of the system prompt and tool definitions shared by sessions"),
    ("system-prompts", positive_int, "distinct system prompts, one per session"),
    ("user-tokens", positive_float, "mean tokens of a user message, lognormal"),
    ("tool-tokens", positive_float, "mean tokens of a tool output, lognormal"),
    ("tool-share", float, "share of later turns that add a tool output (the rest: a user message)"),
    ("length-cv", float, "CV of message, tool-output and answer lengths"),
    ("max-context-tokens", positive_int, "a session ends before its context would exceed this"),
)
"""Flags of ``--agentic`` (AgenticSpec fields); ``--osl-mean`` and ``--seed`` are shared."""
_CYCLE_ONLY = (
    "hours",
    "peak_rate",
    "daily_ratio",
    "bursts_per_day",
    "burst_minutes",
    "burst_factor",
    "arrival_cv",
    "isl_mean",
    "isl_cv",
    "osl_cv",
    "length_daily_swing",
)
"""gen-trace flags of the daily-cycle generator that --agentic does not take."""


def add_agentic_args(g: argparse.ArgumentParser) -> None:
    """The ``--agentic`` flags of ``planner gen-trace`` (defaults: AgenticSpec's)."""
    from planner.workload.trace_gen import AgenticSpec

    g.add_argument(
        "--agentic",
        action="store_true",
        help="write multi-turn agent sessions as Mooncake JSON lines (timestamp ms, "
        "input_length, output_length, hash_ids of 512-token blocks, session) instead of a CSV; "
        "--osl-mean sets the mean answer",
    )
    for name, kind, text in _AGENTIC_FLAGS:
        default = AgenticSpec.model_fields[name.replace("-", "_")].default
        g.add_argument(
            f"--{name}", type=kind, default=None, help=f"with --agentic: {text} (default {default})"
        )


def cmd_gen_agentic(args: argparse.Namespace) -> int:
    """Generate, check the output path, write whole, report."""
    from pydantic import ValidationError

    from planner.workload.mooncake import to_jsonl
    from planner.workload.trace_gen import AgenticSpec, generate_agentic
    from planner.workload.traces import check_out, write_bytes

    for k in _CYCLE_ONLY:
        if getattr(args, k, None) is not None:
            raise PlannerInputError(f"--{k.replace('_', '-')}", "not used with --agentic")
    given = {n.replace("-", "_"): getattr(args, n.replace("-", "_")) for n, _, _ in _AGENTIC_FLAGS}
    given["osl_mean"] = args.osl_mean
    try:
        spec = AgenticSpec(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        flag = "--" + str(err["loc"][0]).replace("_", "-")
        raise PlannerInputError(flag, str(err["msg"])) from None
    check_out(args.out, args.force)
    trace = generate_agentic(spec)
    assert trace.blocks is not None
    write_bytes(
        args.out,
        to_jsonl(trace.arrival_s, trace.isl, trace.osl, trace.blocks, trace.session),
        force=args.force,
    )
    info = {
        "out": str(args.out),
        "requests": len(trace),
        "sessions": spec.sessions,
        "duration_h": trace.duration_s / 3600.0,
        "isl_mean_tokens": float(trace.isl.mean()),
        "osl_mean_tokens": float(trace.osl.mean()),
        "spec": spec.model_dump(),
    }
    if args.format == "json":
        print_json(info)
    else:
        print(
            render_kv(
                {
                    "wrote": info["out"],
                    "requests": info["requests"],
                    "sessions": info["sessions"],
                    "hours": info["duration_h"],
                    "mean prompt (tokens)": info["isl_mean_tokens"],
                    "mean answer (tokens)": info["osl_mean_tokens"],
                }
            )
        )
    return 0


def add_prefix_args(p: argparse.ArgumentParser) -> None:
    """``planner capacity`` flags of prefix caching (solvers.prefix_tiers)."""
    from planner.perf.prefix_cache import POLICIES
    from solvers.prefix_tiers import DEFAULT_HOST_KV_GIB

    g = p.add_argument_group(
        "prefix caching (a trace with hash_ids: Mooncake JSON lines or a hash_ids column)"
    )
    g.add_argument(
        "--host-kv-gib",
        type=float,
        default=DEFAULT_HOST_KV_GIB,
        help="host memory for offloaded KV per GPU, GiB; 0: no host tier "
        f"(default {DEFAULT_HOST_KV_GIB:g}: half of a DGX H200's 2 TB / 8 GPUs)",
    )
    g.add_argument(
        "--ssd-kv-gib", type=float, default=0.0, help="SSD for KV per GPU, GiB (default 0: none)"
    )
    g.add_argument(
        "--ssd-gbps",
        type=positive_float,
        default=None,
        help="SSD read bandwidth per GPU, GB/s (default: the GPU spec's ssd_kv_bandwidth)",
    )
    g.add_argument(
        "--routing",
        choices=POLICIES,
        default="prefix",
        help="how requests pick a replica: round-robin; prefix (longest cached prefix, least "
        "loaded when imbalanced); session (sticky per session column) (default prefix)",
    )
    g.add_argument(
        "--prefix-hit",
        type=float,
        default=None,
        help="share of prompt tokens served from cache for a trace without hash_ids, 0..0.99 "
        "(default: none)",
    )


def prefix_capacity_args(trace: Any, req: Any, args: argparse.Namespace) -> Any:
    """Size with prefix caching priced: the flags checked at the boundary, then
    ``solvers.prefix_tiers.prefix_capacity``."""
    from solvers.prefix_tiers import PrefixRequest, prefix_capacity

    for flag, v, high in (
        ("--host-kv-gib", args.host_kv_gib, 1e5),
        ("--ssd-kv-gib", args.ssd_kv_gib, 1e7),
        ("--prefix-hit", args.prefix_hit, 0.99),
    ):
        if v is not None and not 0 <= v <= high:
            raise PlannerInputError(flag, f"must be in [0, {high:g}], got {v:g}")
    if args.prefix_hit is not None and trace.blocks is not None:
        raise PlannerInputError(
            "--prefix-hit", "the trace has hash_ids: its hit rate is replayed, not stated"
        )
    if args.routing == "session" and trace.session is None:
        raise PlannerInputError("--routing", "session affinity needs a session column or field")
    preq = PrefixRequest(
        host_kv_gib=args.host_kv_gib,
        ssd_kv_gib=args.ssd_kv_gib,
        ssd_gbps=args.ssd_gbps,
        routing=args.routing,
        prefix_hit=args.prefix_hit,
    )
    return prefix_capacity(trace, req, preq)


def print_prefix(res: Any) -> None:
    """The table of scenarios of a capacity answer with prefix caching (nothing without)."""
    from planner.cli.output import render_table

    pc = res.prefix_cache
    if not pc or "scenarios" not in pc:
        if pc:
            print(f"prefix hit stated: {pc['stated_prefix_hit']:.3g} of prompt tokens")
        return
    tiers = ("hbm", "host", "ssd")
    rows = []
    for s in pc["scenarios"]:
        by = {t["tier"]: t["hit_rate"] for t in (s["cache"] or {}).get("tiers", ())}
        rows.append(
            {
                "tiers": s["name"],
                **{f"hit {t} (share of prompt tokens)": by.get(t) for t in tiers},
                "prefill tokens saved": (s["cache"] or {}).get("prefill_tokens_saved", 0),
                f"load {res.slo['percentile']} (ms)": s["prefix_load_ms"],
                "replicas (peak)": s["replicas_peak"],
                "GPU-hours (autoscaled)": s["gpu_hours_autoscaled"],
                "cost ($)": s["cost_autoscaled_usd"],
                "windows violating SLO": s["windows_violating"],
            }
        )
    print()
    print(f"prefix caching, routing {pc['routing']} (the sizing above is the last row):")
    print(render_table(rows))
    rates = ", ".join(f"{k} {v:.3g}" for k, v in pc["routing_hit_rates"].items())
    print(f"hit share of prompt tokens by routing on the last row's replicas: {rates}")
