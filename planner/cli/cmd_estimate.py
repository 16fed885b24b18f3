"""``planner estimate``, ``planner simulate``, ``planner validate e2e|throughput``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hardware.catalog import get_gpu
from planner.cli.cmd_calibrate_e2e import add_calibration, use_profile
from planner.cli.common import add_model_arg, model_of
from planner.cli.output import print_json, render_kv, render_table
from planner.deployment import Parallelism, WorkerConfig
from planner.estimate import estimate
from planner.workload import LengthSpec, SpecDecode, Workload, read_trace


def _add_common(p: argparse.ArgumentParser) -> None:
    add_model_arg(p)
    p.add_argument("--gpu", required=True, help="GPU key or alias, e.g. h200")
    p.add_argument("--backend", default="vllm", choices=("vllm", "sglang", "trtllm"))
    for flag in ("tp", "pp", "dp", "ep"):
        p.add_argument(f"--{flag}", type=int, default=1, help=f"{flag.upper()} size of the (decode) worker")
    p.add_argument("--isl", type=int, default=1024, help="prompt tokens (mean)")
    p.add_argument("--osl", type=int, default=256, help="output tokens (mean)")
    p.add_argument("--isl-cv", type=float, default=0.0, help="ISL coefficient of variation (lognormal)")
    p.add_argument("--osl-cv", type=float, default=0.0, help="OSL coefficient of variation (lognormal)")
    p.add_argument("--trace", type=Path, help="CSV with isl,osl columns (overrides --isl/--osl)")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--concurrency", type=int, help="closed loop: concurrent clients")
    load.add_argument("--rate", type=float, help="open loop: requests/s")
    p.add_argument("--bench-requests", type=int, default=None,
                   help="closed loop: requests the benchmark run sends in all (e.g. vllm bench serve --num-prompts); "
                        "its clients start together, so N/P of them arrive in one lockstep wave (default: the engine's fitted share)")
    p.add_argument("--arrival", choices=("poisson", "gamma"), default="poisson")
    p.add_argument("--arrival-cv", type=float, default=1.0, help="gamma arrivals: CV of gaps")
    p.add_argument("--prefix-hit", type=float, default=0.0, help="prefix-cache hit fraction of prompt tokens")
    p.add_argument("--spec-draft-len", type=int, default=0, help="speculative decoding: draft tokens per step")
    p.add_argument("--spec-acceptance", type=float, default=0.7, help="speculative decoding: acceptance rate")
    p.add_argument("--weight-quant", default=None, choices=("bf16", "fp8", "fp4", "int4"))
    p.add_argument("--kv-dtype", default="bf16", choices=("bf16", "fp8"))
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--max-num-batched-tokens", type=int, default=8192)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--mode", choices=("agg", "disagg"), default="agg")
    for flag in ("prefill-tp", "prefill-pp", "prefill-dp", "prefill-ep", "prefill-workers", "decode-workers", "decode-tp"):
        p.add_argument(f"--{flag}", type=int, default=None, help=f"disaggregated: {flag}")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_calibration(p)


def workload_from(args: argparse.Namespace) -> Workload:
    """Workload from CLI flags."""
    if args.trace is not None:
        isl, osl = read_trace(args.trace)
    else:
        isl = LengthSpec(mean=args.isl, dist="lognormal" if args.isl_cv else "fixed", cv=args.isl_cv)
        osl = LengthSpec(mean=args.osl, dist="lognormal" if args.osl_cv else "fixed", cv=args.osl_cv)
    sd = SpecDecode(draft_len=args.spec_draft_len, acceptance=args.spec_acceptance) if args.spec_draft_len else None
    return Workload(isl=isl, osl=osl, concurrency=args.concurrency, rate_per_s=args.rate, arrival=args.arrival,
                    arrival_cv=args.arrival_cv, prefix_hit=args.prefix_hit, spec_decode=sd,
                    bench_requests=args.bench_requests)


def _workers(args: argparse.Namespace) -> dict[str, WorkerConfig]:
    model = model_of(args)
    quant = args.weight_quant or (model.weight_dtype if model.weight_dtype in ("bf16", "fp8", "fp4", "int4") else "bf16")
    common: dict[str, Any] = {"max_num_seqs": args.max_num_seqs, "max_num_batched_tokens": args.max_num_batched_tokens,
                              "gpu_memory_utilization": args.gpu_memory_utilization, "kv_dtype": args.kv_dtype, "weight_quant": quant}
    dec_par = Parallelism(tp=args.decode_tp or args.tp, pp=args.pp, dp=args.dp, ep=args.ep)
    if args.mode == "agg":
        return {"agg": WorkerConfig(parallel=dec_par, **common)}
    pre_par = Parallelism(tp=args.prefill_tp or args.tp, pp=args.prefill_pp or 1, dp=args.prefill_dp or 1, ep=args.prefill_ep or 1)
    return {"prefill": WorkerConfig(parallel=pre_par, workers=args.prefill_workers or 1, **common),
            "decode": WorkerConfig(parallel=dec_par, workers=args.decode_workers or 1, **common)}


def cmd_estimate(args: argparse.Namespace) -> int:
    label = use_profile(args, get_gpu(args.gpu).key)
    est = estimate(model_of(args), get_gpu(args.gpu), workload_from(args), backend=args.backend, **_workers(args))
    if args.format == "json":
        print_json(est)
        return 0
    rows = [{"metric": k, **getattr(est, k).model_dump()} for k in ("ttft_ms", "tpot_ms")]
    print(render_table(rows))
    print(render_kv({"output tok/s per GPU": est.output_tok_s_per_gpu, "output tok/s per user": est.output_tok_s_per_user,
                     "requests/s": est.requests_per_s, "decode batch": est.decode_batch, "GPUs": est.gpus}, title=f"{est.model} ({est.model_id or 'no model id'}) on {est.gpu} ({est.backend}, {est.mode})"))
    print(render_kv({k: f"{v:.1%}" for k, v in est.step_breakdown.items()}, title="step time by op kind"))
    if label:
        print(f"engine constants: {label}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from planner.simulator import simulate_cli

    use_profile(args, get_gpu(args.gpu).key)
    return simulate_cli(args, workload_from(args), _workers(args))


def cmd_validate_e2e(args: argparse.Namespace) -> int:
    from planner.validation.e2e import validate_e2e

    label = use_profile(args)
    report = validate_e2e(args.data, args.predictions_out)
    report["calibration"] = label or "planner/calibration/engines.yaml"
    _print_report(report, args.format, ("ttft", "tpot"))
    if args.format == "table":
        print(f"engine constants: {report['calibration']}")
    return 0


def cmd_validate_throughput(args: argparse.Namespace) -> int:
    from planner.validation.throughput import validate_throughput

    report = validate_throughput(args.data, args.predictions_out)
    _print_report(report, args.format, ("throughput",))
    return 0


def _print_report(report: dict[str, Any], fmt: str, metrics: tuple[str, ...]) -> None:
    if fmt == "json":
        print_json(report)
        return
    print(render_kv({"rows": report["rows"], "modelled": report["modelled"], **{f"skipped {k}": v for k, v in report["skipped"].items()}}))
    rows = [{"by": g["by"], "key": g["key"], "n": g["n"], **{f"{m} {s}": g[m][s] for m in metrics for s in ("median_ape_pct", "p90_ape_pct")}} for g in report["groups"]]
    print(render_table(rows))


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("estimate", help="predict TTFT/TPOT/throughput of a deployment under a workload")
    _add_common(p)
    p.set_defaults(func=cmd_estimate)
    s = sub.add_parser("simulate", help="discrete-event simulation of the same step model (cross-check)")
    _add_common(s)
    s.add_argument("--requests", type=int, default=2000, help="requests to simulate (with --bench-requests: that run, no warm-up dropped)")
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_simulate)
    for verb, func, helptext in (("e2e", cmd_validate_e2e, "replay measured TTFT/TPOT rows"),
                                 ("throughput", cmd_validate_throughput, "replay max-throughput rows")):
        v = groups["validate"].add_parser(verb, help=helptext)
        v.add_argument("--data", type=Path, required=True)
        v.add_argument("--predictions-out", type=Path, default=None)
        v.add_argument("--format", choices=("table", "json"), default="table")
        if verb == "e2e":
            add_calibration(v)
        v.set_defaults(func=func)
