"""``planner capacity`` (GPUs per window of a timed trace) and ``planner gen-trace`` (synthetic traces)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from hardware.errors import PlannerInputError
from planner.cli.common import add_format, add_hardware_dir, positive_float, positive_int
from planner.cli.output import print_json, render_kv, render_table

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """argparse type: seconds from '900', '900s', '15m' or '1h' (> 0)."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration such as 900s, 15m or 1h, got '{text}'")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def non_negative_duration(text: str) -> float:
    """argparse type: like ``duration`` but 0 allowed."""
    return 0.0 if text.strip() in ("0", "0s", "0m", "0h") else duration(text)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("capacity", help="GPUs per window of a timed trace: autoscaled vs static peak / mean")
    p.add_argument("--trace", type=Path, required=True,
                   help="CSV arrival_s,isl,osl or BurstGPT (Timestamp, Request tokens, Response tokens, ...)")
    p.add_argument("--model", required=True, help="bundled name, HF id or path to config.json")
    p.add_argument("--gpu", required=True, help="GPU name(s), comma separated (see `planner gpus`)")
    add_hardware_dir(p)
    p.add_argument("--ttft-ms", type=positive_float, required=True, help="TTFT SLO (ms)")
    p.add_argument("--tpot-ms", type=positive_float, required=True, help="TPOT SLO (ms)")
    p.add_argument("--percentile", choices=("p50", "p90", "p99"), default="p90", help="SLO percentile per window")
    p.add_argument("--window", type=duration, default=900.0, help="window length: 900s, 15m, 1h (default 15m)")
    p.add_argument("--scale-up-s", type=non_negative_duration, default=0.0,
                   help="seconds a new replica needs before it serves (billed from then); 300s, 5m")
    p.add_argument("--max-gpus", type=positive_int, default=256, help="most GPUs in any window")
    p.add_argument("--worker-max-gpus", type=positive_int, default=16, help="most GPUs of one replica")
    p.add_argument("--min-replicas", type=int, default=1, help="replicas kept in every window (>= 0)")
    p.add_argument("--backend", default="vllm", choices=("vllm", "sglang", "trtllm"), help="engine calibration")
    p.add_argument("--price-per-gpu-hour", type=positive_float, default=None, help="override $/GPU-hour")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here (for simulate --deployment)")
    p.add_argument("--force", action="store_true", help="overwrite --out")
    add_format(p)
    p.set_defaults(func=cmd_capacity)

    g = sub.add_parser("gen-trace", help="write a synthetic timed trace (daily cycle, bursts; seedable)")
    g.add_argument("--out", type=Path, required=True, help="CSV to write (arrival_s,isl,osl)")
    g.add_argument("--force", action="store_true", help="overwrite --out")
    for name, kind, helptext in (
        ("hours", positive_float, "trace length, hours (default 24)"),
        ("peak-rate", positive_float, "daily peak rate outside bursts, requests/s (default 4)"),
        ("daily-ratio", float, "daily peak / trough rate (default 4)"),
        ("bursts-per-day", float, "bursts per 24 h (default 6)"),
        ("burst-minutes", positive_float, "length of a burst, minutes (default 10)"),
        ("burst-factor", float, "rate multiplier inside a burst (default 3)"),
        ("arrival-cv", positive_float, "CV of gaps at a constant rate, 1 = Poisson (default 1)"),
        ("isl-mean", positive_float, "mean prompt tokens (default 1024)"),
        ("isl-cv", float, "CV of prompt tokens, lognormal (default 0.5)"),
        ("osl-mean", positive_float, "mean answer tokens (default 256)"),
        ("osl-cv", float, "CV of answer tokens, lognormal (default 0.5)"),
    ):
        g.add_argument(f"--{name}", type=kind, default=None, help=helptext)
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_format(g)
    g.set_defaults(func=cmd_gen_trace)


def _summary_rows(res: Any) -> list[dict[str, Any]]:
    pct = res.slo["percentile"]
    rows = []
    for i, w in enumerate(res.windows):
        rows.append({"window": i, "start (h)": w.start_s / 3600.0, "requests": w.requests, "rate (req/s)": w.rate,
                     "design rate (req/s)": w.design_rate, "gap CV": w.arrival_cv, "replicas": w.replicas,
                     "GPUs": w.gpus, f"TTFT {pct} (ms)": getattr(w.ttft_ms, pct),
                     f"TPOT {pct} (ms)": getattr(w.tpot_ms, pct), "meets SLO": w.meets_slo})
    return rows


def _fleet_rows(res: Any) -> list[dict[str, Any]]:
    out = []
    for name, f in (("autoscaled", res.autoscaled), ("static peak", res.static_peak), ("static mean", res.static_mean)):
        out.append({"deployment": name, "GPUs (max)": f.gpus, "GPU-hours": f.gpu_hours, "cost ($)": f.cost,
                    "windows violating SLO": f.windows_violating})
    return out


def cmd_capacity(args: argparse.Namespace) -> int:
    from planner.traces import check_out, read_trace, write_text
    from solvers.capacity import CapacityRequest, capacity

    if args.min_replicas < 0:
        raise PlannerInputError("--min-replicas", f"must be >= 0, got {args.min_replicas}")
    req = CapacityRequest(
        model=args.model, gpus=tuple(g.strip() for g in args.gpu.split(",") if g.strip()), ttft_ms=args.ttft_ms,
        tpot_ms=args.tpot_ms, percentile=args.percentile, window_s=args.window, scale_up_s=args.scale_up_s,
        max_gpus=args.max_gpus, worker_max_gpus=args.worker_max_gpus, min_replicas=args.min_replicas,
        backend=args.backend, price_per_gpu_hour=args.price_per_gpu_hour, hardware_dirs=tuple(args.hardware_dir))
    if args.out is not None:
        check_out(args.out, args.force)
    res = capacity(read_trace(args.trace), req)
    if args.out is not None:
        import json

        from planner.cli.output import to_jsonable

        write_text(args.out, json.dumps(to_jsonable(res), indent=2) + "\n", force=args.force)
    if args.format == "json":
        print_json(res)
        return 0
    head = (f"{res.model} on {res.gpu} ({res.backend}): {res.trace['requests']:,} requests over "
            f"{float(res.trace['duration_s']) / 3600:.3g} h, windows of {res.window_s / 60:g} min, SLO "
            f"{res.slo['percentile']} TTFT <= {res.slo['ttft_ms']:g} ms, TPOT <= {res.slo['tpot_ms']:g} ms")
    print(head)
    gpw = res.deployment.total_gpus
    print(f"replica: {res.windows[0].config.split(' x ', 1)[1]} ({gpw} GPU{'s' if gpw > 1 else ''})")
    print(render_table(_summary_rows(res)))
    print()
    print(render_table(_fleet_rows(res)))
    if args.out is not None:
        print(f"wrote {args.out}")
    return 0


def cmd_gen_trace(args: argparse.Namespace) -> int:
    from planner.trace_gen import TraceSpec, generate
    from planner.traces import check_out, write_trace

    given = {k: getattr(args, k.replace("-", "_")) for k in (
        "hours", "peak_rate", "daily_ratio", "bursts_per_day", "burst_minutes", "burst_factor", "arrival_cv",
        "isl_mean", "isl_cv", "osl_mean", "osl_cv")}
    spec = TraceSpec(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    check_out(args.out, args.force)
    trace, gen = generate(spec)
    write_trace(trace, args.out, force=args.force)
    info = {"out": str(args.out), "requests": len(trace), "duration_h": trace.duration_s / 3600.0,
            "bursts": [list(b) for b in gen.bursts], "spec": spec.model_dump()}
    if args.format == "json":
        print_json(info)
    else:
        print(render_kv({"wrote": info["out"], "requests": info["requests"], "hours": info["duration_h"],
                         "bursts (start s)": ", ".join(f"{a:.0f}" for a, _ in gen.bursts) or "none"}))
    return 0
