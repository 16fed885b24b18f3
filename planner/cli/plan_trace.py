"""``planner plan --trace`` / ``--prefix-hit``: the plan's load read from a trace, and prefix
caching (KV tiers, routing) searched with it (solvers.plan_prefix)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hardware.errors import PlannerInputError

HOST_DEFAULT = "0,128: none, or half of a DGX H200's 2 TB / 8 GPUs"


def _sizes(flag: str, high: float) -> Any:
    def parse(text: str) -> tuple[float, ...]:
        try:
            out = tuple(float(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: numbers separated by commas") from None
        if not out or any(not 0 <= v <= high for v in out):
            raise argparse.ArgumentTypeError(f"{text!r}: each in [0, {high:g}] GiB")
        return out

    parse.__name__ = flag
    return parse


def _routes(text: str) -> tuple[str, ...]:
    from planner.perf.prefix_cache import POLICIES

    out = tuple(v.strip() for v in text.split(",") if v.strip())
    bad = [v for v in out if v not in POLICIES]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"{text!r}: each one of {', '.join(POLICIES)}")
    return out


def add_plan_trace_args(p: argparse.ArgumentParser) -> None:
    """The flags of ``plan --trace`` and ``--prefix-hit``."""
    from planner.cli.common import positive_float
    from planner.cli.field_help import PLAN, flag_help

    g = p.add_argument_group(
        "trace and prefix caching (--trace: lengths and rate from the trace; a trace with "
        "hash_ids also prices prefix caching, searching the tiers and routing below)"
    )
    g.add_argument(
        "--trace",
        default=None,
        help="timed trace (CSV or Mooncake JSON lines): ISL/OSL are its means, the rate its "
        "mean rate, --max-isl/--max-osl its longest (default: none; give --isl/--osl)",
    )
    g.add_argument(
        "--host-kv-gib",
        type=_sizes("--host-kv-gib", 1e5),
        default=(0.0, 128.0),
        help=flag_help(PLAN, "--host-kv-gib", default=HOST_DEFAULT, note="comma separated"),
    )
    g.add_argument(
        "--ssd-kv-gib",
        type=_sizes("--ssd-kv-gib", 1e7),
        default=(0.0,),
        help=flag_help(PLAN, "--ssd-kv-gib", note="comma separated"),
    )
    g.add_argument(
        "--ssd-gbps",
        type=positive_float,
        default=None,
        help=flag_help(PLAN, "--ssd-gbps", default="the GPU spec's ssd_kv_bandwidth"),
    )
    g.add_argument(
        "--routing",
        type=_routes,
        default=(),
        help=flag_help(
            PLAN,
            "--routing",
            note="comma separated: round-robin, prefix (longest cached prefix), session (needs "
            "a session column)",
        ),
    )
    g.add_argument(
        "--prefix-hit",
        type=float,
        default=None,
        help=flag_help(
            PLAN, "--prefix-hit", note="0..0.99, a stated share for a trace without hash_ids"
        ),
    )


def trace_load(args: argparse.Namespace) -> Any:
    """Read ``--trace`` and put its means, rate and longest request into ``args`` (returned as a
    new Namespace); the trace kept (requests within the model's positions)."""
    from planner.cli.recipe_args import trace_within
    from planner.model.bundled import load_model
    from planner.workload.traces import read_trace

    for flag in ("isl", "osl", "rate", "concurrency"):
        if getattr(args, flag) is not None:
            raise PlannerInputError(f"--{flag}", "comes from --trace; give one or the other")
    limit = load_model(args.model, args.model_id or "").max_position_embeddings
    trace, too_long, max_isl, max_osl = trace_within(
        read_trace(args.trace), limit, args.max_isl, args.max_osl, args.model
    )
    if too_long:
        sys.stderr.write(
            f"plan: left out {too_long:,} requests longer than {args.model}'s {limit:,} positions\n"
        )
    if trace.duration_s <= 0:
        raise PlannerInputError("--trace", "needs requests at more than one time to read a rate")
    new = argparse.Namespace(**vars(args))
    new.isl, new.osl = round(float(trace.isl.mean())), round(float(trace.osl.mean()))
    new.rate = len(trace) / trace.duration_s
    new.max_isl, new.max_osl = max_isl, max_osl
    return trace, new


def plan_prefix_args(args: argparse.Namespace, request: Any, bands: Any) -> Any:
    """``plan`` with the trace's load and prefix caching priced (``args`` as ``trace_load``
    left it; ``request`` builds the PlanRequest from it)."""
    from solvers.plan_prefix import PrefixPlanRequest, plan_stated_hit, plan_with_prefix
    from solvers.spec_choice import plan_with_spec

    hit = args.prefix_hit
    if hit is not None and not 0 <= hit <= 0.99:
        raise PlannerInputError("--prefix-hit", f"must be in [0, 0.99], got {hit:g}")
    trace = None
    if args.trace is not None:
        trace, args = trace_load(args)
    elif args.isl is None or args.osl is None:
        raise PlannerInputError("--isl/--osl", "required unless --trace gives them")
    req = request(args)
    if trace is not None and trace.blocks is not None:
        if hit is not None:
            raise PlannerInputError(
                "--prefix-hit", "the trace has hash_ids: its hit rate is replayed, not stated"
            )
        preq = PrefixPlanRequest(
            host_kv_gib=args.host_kv_gib,
            ssd_kv_gib=args.ssd_kv_gib,
            ssd_gbps=args.ssd_gbps,
            routing=args.routing,
        )
        return plan_with_prefix(trace, req, preq, bands)
    return plan_stated_hit(req, hit, bands) if hit else plan_with_spec(req, bands)


def prefix_table(r: Any) -> str:
    """The options searched, the chosen one marked (empty without prefix caching)."""
    from planner.cli.output import render_table

    pc = r.prefix_cache
    if not pc:
        return ""
    pct = r.slo["percentile"]
    rows = []
    for k, o in enumerate(pc["options"]):
        by = {t["tier"]: t["hit_rate"] for t in (o["cache"] or {}).get("tiers", ())}
        rows.append(
            {
                "chosen": "yes" if k == pc["chosen"] else "",
                "routing": o["routing"],
                "host (GiB/GPU)": o["host_kv_gib"],
                "SSD (GiB/GPU)": o["ssd_kv_gib"],
                **{
                    f"hit {t} (share of prompt tokens)": by.get(t, "")
                    for t in ("hbm", "host", "ssd")
                },
                "hit priced": o["prefix_hit"],
                "prefill tokens saved": (o["cache"] or {}).get("prefill_tokens_saved", 0),
                f"load {pct} (ms)": o["prefix_load_ms"],
                "GPUs bought": o["gpus_bought"],
                "$ per hour": o["cost_per_hour_usd"],
                "configuration": o["config"],
            }
        )
    head = (
        f"Prefix caching ({pc['source']}): routing {pc['routing']}, host "
        f"{pc['host_kv_gib_per_gpu']:g} GiB/GPU, SSD {pc['ssd_kv_gib_per_gpu']:g} GiB/GPU; "
        f"TTFT searched against {r.slo.get('ttft_ms_searched', r.slo['ttft_ms']):.4g} ms "
        "(the SLO less the load time)"
    )
    return head + "\n" + render_table(rows)
