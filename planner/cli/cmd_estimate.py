"""``planner estimate``, ``planner simulate``, ``planner validate e2e|throughput``."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from hardware.catalog import get_gpu
from hardware.spec import GpuSpec
from planner.cli.cmd_calibrate_e2e import add_calibration, calibration_from, use_profile
from planner.cli.cmd_capacity import add_replay_args
from planner.cli.cmd_power import add_power_args, power_rows
from planner.cli.common import (
    EXIT_SATURATED,
    add_model_arg,
    client_count,
    float_in,
    gpu_count,
    int_in,
    model_of,
    request_rate,
    shard_size,
    token_count,
)
from planner.cli.field_help import LOAD, add_worker_flags, engine_limits, flag_help
from planner.cli.output import print_json, render_kv, render_table, to_jsonable
from planner.cli.recipe_args import add_max_lengths, check_one_request, estimate_memory
from planner.cli.spec_args import add_spec_args, spec_decode_of
from planner.engines import DEFAULT_ENGINE, engine_names
from planner.errors import PlannerInputError
from planner.model.spec import ModelSpec
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS
from planner.perf.deployment import Parallelism, WorkerConfig
from planner.perf.estimate import Estimate, estimate
from planner.perf.power import cap_for, parse_power_caps
from planner.workload.spec import LengthSpec, Workload, max_lengths
from planner.workload.traces import trace_lengths

MAX_SIM_REQUESTS = 200_000
"""Most requests ``planner simulate`` replays (about a minute of simulation)."""
length_cv = float_in(0, 4)


def _add_common(p: argparse.ArgumentParser, required: bool = True, role_gpus: bool = False) -> None:
    add_model_arg(p, required)
    gpu_help = "GPU key or alias, e.g. h200"
    if role_gpus:
        gpu_help += " (disaggregated: of both roles unless --prefill-gpu/--decode-gpu say)"
    p.add_argument("--gpu", required=required and not role_gpus, help=gpu_help)
    if role_gpus:
        for role in ("prefill", "decode"):
            p.add_argument(
                f"--{role}-gpu",
                default=None,
                help=f"--mode disagg: GPU key or alias of the {role} workers (default: --gpu)",
            )
    p.add_argument("--backend", default=DEFAULT_ENGINE, choices=engine_names())
    add_worker_flags(p, WEIGHT_QUANTS, KV_DTYPES)
    p.add_argument("--isl", type=token_count, default=1024, help="prompt tokens (mean)")
    p.add_argument("--osl", type=token_count, default=256, help="output tokens (mean)")
    p.add_argument(
        "--isl-cv", type=length_cv, default=0.0, help="ISL coefficient of variation (lognormal)"
    )
    p.add_argument(
        "--osl-cv", type=length_cv, default=0.0, help="OSL coefficient of variation (lognormal)"
    )
    p.add_argument(
        "--trace",
        type=Path,
        help="CSV with isl,osl (or arrival_s,isl,osl, or BurstGPT) columns; only the "
        "lengths are used (overrides --isl/--osl)",
    )
    load = p.add_mutually_exclusive_group(required=required)
    load.add_argument("--concurrency", type=client_count, help=flag_help(LOAD, "--concurrency"))
    load.add_argument("--rate", type=request_rate, help=flag_help(LOAD, "--rate"))
    p.add_argument(
        "--bench-requests",
        type=client_count,
        default=None,
        help=flag_help(LOAD, "--bench-requests", "the engine's fitted lockstep share"),
    )
    p.add_argument(
        "--arrival",
        choices=("poisson", "gamma"),
        default="poisson",
        help=flag_help(LOAD, "--arrival"),
    )
    p.add_argument(
        "--arrival-cv",
        type=float_in(0, 10, lo_open=True),
        default=1.0,
        help=flag_help(LOAD, "--arrival-cv"),
    )
    p.add_argument(
        "--prefix-hit", type=float_in(0, 0.99), default=0.0, help=flag_help(LOAD, "--prefix-hit")
    )
    add_spec_args(p)
    p.add_argument("--mode", choices=("agg", "disagg"), default="agg")
    for flag in (
        "prefill-tp",
        "prefill-pp",
        "prefill-dp",
        "prefill-ep",
        "prefill-workers",
        "decode-workers",
        "decode-tp",
    ):
        kind = shard_size if flag.endswith(("-tp", "-pp")) else gpu_count
        p.add_argument(f"--{flag}", type=kind, default=None, help=f"disaggregated: {flag}")
    p.add_argument("--format", choices=("table", "json"), default="table")
    add_calibration(p)


def workload_from(args: argparse.Namespace, model: ModelSpec) -> Workload:
    """Workload from CLI flags (speculative decoding checked against ``model``)."""
    if args.trace is not None:
        try:
            isl, osl = trace_lengths(args.trace)
        except PlannerInputError as exc:  # the reader names file:line:field; say which flag too
            raise PlannerInputError("--trace", str(exc)) from exc
    else:
        isl = LengthSpec(
            mean=args.isl, dist="lognormal" if args.isl_cv else "fixed", cv=args.isl_cv
        )
        osl = LengthSpec(
            mean=args.osl, dist="lognormal" if args.osl_cv else "fixed", cv=args.osl_cv
        )
    sd = spec_decode_of(args, model)
    return Workload(
        isl=isl,
        osl=osl,
        concurrency=args.concurrency,
        rate_per_s=args.rate,
        arrival=args.arrival,
        arrival_cv=args.arrival_cv,
        prefix_hit=args.prefix_hit,
        spec_decode=sd,
        bench_requests=args.bench_requests,
    )


def _workers(args: argparse.Namespace) -> dict[str, WorkerConfig]:
    model = model_of(args)
    quant = args.weight_quant or (
        model.weight_dtype if model.weight_dtype in ("bf16", "fp8", "fp4", "int4") else "bf16"
    )
    common: dict[str, Any] = {
        **engine_limits(args),
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "kv_dtype": args.kv_dtype,
        "weight_quant": quant,
    }
    dec_par = Parallelism(tp=args.decode_tp or args.tp, pp=args.pp, dp=args.dp, ep=args.ep)
    if args.mode == "agg":
        return {"agg": WorkerConfig(parallel=dec_par, **common)}
    pre_par = Parallelism(
        tp=args.prefill_tp or args.tp,
        pp=args.prefill_pp or 1,
        dp=args.prefill_dp or 1,
        ep=args.prefill_ep or 1,
    )
    return {
        "prefill": WorkerConfig(parallel=pre_par, workers=args.prefill_workers or 1, **common),
        "decode": WorkerConfig(parallel=dec_par, workers=args.decode_workers or 1, **common),
    }


def fmt_sig(v: float, digits: int = 3) -> str:
    """``v`` to ``digits`` significant figures with thousands separators (1,250; 32.8; 0.512)."""
    if not math.isfinite(v):
        return "-"
    if v == 0:
        return "0"
    r = round(v, digits - 1 - int(math.floor(math.log10(abs(v)))))
    if abs(r) >= 10 ** (digits - 1):
        return f"{r:,.0f}"
    decimals = max(digits - 1 - int(math.floor(math.log10(abs(r)))), 0)
    return f"{r:,.{decimals}f}"


def fmt_band(v: float, lo: float, hi: float, unit: str = "") -> str:
    """``923 ms (700-1,250)``: the value and its band."""
    return f"{fmt_sig(v)}{' ' + unit if unit else ''} ({fmt_sig(lo)}-{fmt_sig(hi)})"


def band_rows(est: Estimate) -> list[dict[str, str]]:
    """TTFT and TPOT table rows: each statistic with its calibrated band."""
    rows = []
    for name, unit in (("ttft_ms", "ms"), ("tpot_ms", "ms")):
        p = getattr(est, name)
        row = {"metric": name}
        for stat in ("mean", "p50", "p90", "p99"):
            edge = getattr(p.band, stat) if p.band else None
            v = getattr(p, stat)
            row[stat] = fmt_band(v, edge.lo, edge.hi, unit) if edge else fmt_sig(v)
        rows.append(row)
    return rows


def role_gpus(args: argparse.Namespace) -> tuple[GpuSpec, GpuSpec]:
    """(decode or aggregated GPU, prefill GPU) of ``estimate``: ``--gpu`` for both roles unless
    ``--prefill-gpu`` / ``--decode-gpu`` (``--mode disagg`` only) name a role's own."""
    pre, dec = args.prefill_gpu, args.decode_gpu
    if (pre or dec) and args.mode != "disagg":
        flag = "--prefill-gpu" if pre else "--decode-gpu"
        raise PlannerInputError(flag, "names a role's GPU: only with --mode disagg")
    for flag, key in (("--decode-gpu", dec or args.gpu), ("--prefill-gpu", pre or args.gpu)):
        if key is None:
            raise PlannerInputError(flag, "required, or --gpu for both roles")
    return get_gpu(dec or args.gpu), get_gpu(pre or args.gpu)


def cmd_estimate(args: argparse.Namespace) -> int:
    gpu, prefill_gpu = role_gpus(args)
    consts, bands = calibration_from(args, gpu.key)
    model = model_of(args)
    wl = workload_from(args, model)
    max_isl, max_osl = max_lengths(
        wl.isl.mean,
        wl.osl.mean,
        args.max_isl,
        args.max_osl,
        model.max_position_embeddings,
        model.name,
    )
    est = estimate(
        model,
        gpu,
        wl.model_copy(update={"max_isl": max_isl, "max_osl": max_osl}),
        backend=consts.policy(args.backend),
        bands=bands,
        prefill_gpu=prefill_gpu,
        power_cap_w=cap_for(gpu, parse_power_caps(args.power_cap)),
        electricity_price=args.electricity_price,
        pue=args.pue,
        **_workers(args),  # type: ignore[arg-type]
    )
    check_one_request(estimate_memory(est), {"max_isl": max_isl, "max_osl": max_osl})
    rc = EXIT_SATURATED if est.saturated else 0
    if args.format == "json":
        print_json(to_jsonable(est) | {"max_isl": max_isl, "max_osl": max_osl})
        return rc
    if est.saturated:
        print(
            f"saturated: {est.offered_requests_per_s:,.4g} requests/s offered, capacity "
            f"{est.capacity_requests_per_s:,.3g} requests/s; at capacity "
            f"{est.output_tok_s_per_gpu:,.4g} output tok/s per GPU (TTFT/TPOT grow without "
            "bound; exit code 3)"
        )
    print(render_table(band_rows(est)))
    if est.ttft_ms.band:
        print(
            f"(in brackets: the {est.ttft_ms.band.level:.0%} band, calibrated on measured "
            f"deployments; {est.provenance.get('bands', '')})"
        )
    tok = est.output_tok_s_per_gpu_band
    per_gpu = est.output_tok_s_per_gpu
    tok_s = fmt_band(per_gpu, tok.lo, tok.hi) if tok else fmt_sig(per_gpu)
    print(
        render_kv(
            {
                "output tok/s per GPU": tok_s,
                "output tok/s per user": est.output_tok_s_per_user,
                "requests/s": est.requests_per_s,
                "decode batch": est.decode_batch,
                "GPUs": est.gpus,
                **kv_rows(est),
            },
            title=f"{est.model} ({est.model_id or 'no model id'}) on {gpu_label(est)} "
            f"({est.backend}, {est.mode})",
        )
    )
    for role, kinds in est.step_breakdown.items():
        total = sum(kinds.values()) or 1.0
        name = role.removesuffix("_ms").replace("_", " ")
        print(
            render_kv(
                {k: f"{v:.4g} ms ({v / total:.1%})" for k, v in kinds.items()},
                title=f"{name} by op kind ({total:.4g} ms)",
            )
        )
    if est.power is not None:
        print(render_kv(power_rows(est.power), title="power and energy (GPU boards)"))
    if consts.label:
        print(f"engine constants: {consts.label}")
    return rc


def gpu_label(est: Estimate) -> str:
    """The GPU type, or each role's where the roles run on two types."""
    return f"prefill {est.prefill_gpu}, decode {est.gpu}" if est.prefill_gpu else est.gpu


def kv_rows(est: Estimate) -> dict[str, str]:
    """The KV transfer per request and its link, for a disaggregated estimate."""
    if est.mode != "disagg":
        return {}
    link = "scale-out NIC, the slower of the two types" if est.prefill_gpu else "its link"
    return {
        "KV transfer per request, ms (mean)": fmt_sig(est.kv_transfer_ms),
        "KV link per GPU, GB/s": f"{fmt_sig(est.kv_link_gb_per_s)} ({link})",
    }


def cmd_simulate(args: argparse.Namespace) -> int:
    from planner.cli.simulate_report import simulate_cli

    if args.deployment is not None:
        from planner.cli.cmd_capacity import cmd_simulate_trace

        return cmd_simulate_trace(args)
    for flag, val in (("--model", args.model), ("--gpu", args.gpu)):
        if val is None:
            raise PlannerInputError(
                flag, "required (or replay a timed trace: --trace FILE --deployment JSON)"
            )

    if args.bench_requests is not None and args.bench_requests > MAX_SIM_REQUESTS:
        raise PlannerInputError(
            "--bench-requests",
            f"simulate replays at most {MAX_SIM_REQUESTS:,} requests, got {args.bench_requests:,}",
        )
    policy = use_profile(args, get_gpu(args.gpu).key).policy(args.backend)
    wl = workload_from(args, model_of(args))
    if wl.spec_decode is not None:
        raise PlannerInputError(
            "--spec-method", "simulate does not replay speculative decoding; use estimate"
        )
    return simulate_cli(args, wl, _workers(args), policy)


def cmd_validate_e2e(args: argparse.Namespace) -> int:
    from planner.replay_e2e.e2e import validate_e2e

    consts = use_profile(args)
    report = validate_e2e(
        args.data,
        args.predictions_out,
        holdout=args.holdout,
        folds=args.folds,
        overrides=dict(consts.engines),
    )
    report["calibration"] = consts.label or "planner/engines/*/constants.yaml"
    _print_report(report, args.format, ("ttft", "tpot"))
    if args.format == "table":
        print(f"engine constants: {report['calibration']}")
    return 0


def cmd_validate_throughput(args: argparse.Namespace) -> int:
    from planner.replay_e2e.throughput import validate_throughput

    report = validate_throughput(args.data, args.predictions_out)
    _print_report(report, args.format, ("throughput",))
    return 0


def _print_report(report: dict[str, Any], fmt: str, metrics: tuple[str, ...]) -> None:
    if fmt == "json":
        print_json(report)
        return
    head = {"rows": report["rows"]}
    if "duplicates_dropped" in report:
        head["duplicates dropped"] = report["duplicates_dropped"]
    if "layout_read_from_id" in report:
        head["layouts read from row ids"] = report["layout_read_from_id"]
    if "layout_read_from_columns" in report:
        head["layouts read from flattened columns"] = report["layout_read_from_columns"]
    head["modelled"] = report["modelled"]
    head |= {f"skipped {k}": v for k, v in report["skipped"].items()}
    if "holdout" in report:
        h = report["holdout"]
        head["held out"] = (
            f"by GPU: {h['folds']} folds ({', '.join(h['fold_gpus'])}), each priced with "
            "constants fitted on the others"
            if h["scheme"] == "gpu"
            else f"{h['folds']} folds of {h['campaigns']} measurement campaigns"
        )
    off = report.get("off_by_3x")
    if isinstance(off, dict):
        head["rows off by > 3x (TTFT, TPOT, either)"] = (
            f"{off['ttft']}, {off['tpot']}, {off['either']} ({off['share_pct']}% of modelled)"
        )
        if "named" in off:
            head["of them named unmodellable (the rows' unmodellable column)"] = (
                f"{off['named']}; not named {off['not_named']}; the list is "
                f"{off['named_share_pct']}% of modelled rows (cap {off['named_cap_pct']}%)"
            )
    print(render_kv(head))
    stats = ("median_ape_pct", "p90_ape_pct", "band_coverage_pct")
    rows = [
        {
            "by": g["by"],
            "key": g["key"],
            "n": g["n"],
            **{f"{m} {s}": g[m][s] for m in metrics for s in stats if s in g[m]},
        }
        for g in report["groups"]
    ]
    print(render_table(rows))
    calibration = report.get("quantile_calibration")
    if isinstance(calibration, list):
        print("share (%) of rows at or below the predicted quantile, each GPU banded by a table")
        print("fitted on the other GPUs' held-out residuals (calibrated: the quantile x 100)")
        print(
            render_table(
                [
                    {
                        "by": g["by"],
                        "key": g["key"],
                        "n": g["n"],
                        **{
                            f"{m} {c.removeprefix('at_or_below_')}": v
                            for m in metrics
                            for c, v in g[m].items()
                        },
                    }
                    for g in calibration
                ]
            )
        )


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser(
        "estimate", help="predict TTFT/TPOT/throughput of a deployment under a workload"
    )
    _add_common(p, role_gpus=True)
    add_max_lengths(p, "2x the mean, capped at the model's maximum positions")
    add_power_args(p)
    p.set_defaults(func=cmd_estimate)
    s = sub.add_parser(
        "simulate", help="discrete-event simulation of the same step model (cross-check)"
    )
    _add_common(s, required=False)
    add_replay_args(s)
    s.add_argument(
        "--requests",
        type=int_in(1, MAX_SIM_REQUESTS),
        default=2000,
        help="requests to simulate (with --bench-requests: that run, no warm-up dropped)",
    )
    s.add_argument("--seed", type=int_in(0, 2**32 - 1), default=0)
    s.set_defaults(func=cmd_simulate)
    for verb, func, helptext in (
        ("e2e", cmd_validate_e2e, "replay measured TTFT/TPOT rows"),
        ("throughput", cmd_validate_throughput, "replay max-throughput rows"),
    ):
        v = groups["validate"].add_parser(verb, help=helptext)
        if verb == "e2e":
            v.add_argument(
                "--data",
                type=Path,
                required=True,
                action="append",
                help="measured rows in the e2e layout; give it more than once to validate the "
                "files together (a measurement in two files counts once)",
            )
        else:
            v.add_argument("--data", type=Path, required=True)
        v.add_argument("--predictions-out", type=Path, default=None)
        v.add_argument("--format", choices=("table", "json"), default="table")
        if verb == "e2e":
            v.add_argument(
                "--holdout",
                choices=("gpu", "campaign", "none"),
                default="none",
                help="gpu: each GPU's rows priced with constants refitted on the other GPUs' "
                "rows (needs rows of two GPUs or more); campaign: each fold of measurement "
                "campaigns priced with constants refitted on the other folds; none: the shipped "
                "constants (in-sample) (default: none)",
            )
            v.add_argument(
                "--folds", type=int, default=5, help="--holdout campaign: number of folds (2-50)"
            )
            add_calibration(v)
        v.set_defaults(func=func)
