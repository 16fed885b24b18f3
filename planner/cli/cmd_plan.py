"""`planner plan`, `planner fleet` and `planner validate decisions`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from planner.cli.cmd_calibrate_e2e import add_calibration, calibration_from
from planner.cli.cmd_power import add_energy_args, power_rows
from planner.cli.common import (
    add_format,
    add_hardware_dir,
    add_model_arg,
    client_count,
    float_in,
    gpu_count,
    request_rate,
    shard_size,
    slo_ms,
    token_count,
)
from planner.cli.field_help import PLAN, flag_help
from planner.cli.output import print_json, render_kv, render_table, to_jsonable
from planner.cli.plan_trace import add_plan_trace_args, plan_prefix_args, prefix_table
from planner.cli.recipe_args import add_listen_host, add_max_lengths, check_one_request
from planner.cli.spec_args import add_spec_args, spec_options
from planner.engines import DEFAULT_ENGINE, engine_names


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("plan", help="recommend a deployment that meets TTFT/TPOT SLOs")
    add_model_arg(p)
    p.add_argument("--gpu", required=True, help=flag_help(PLAN, "--gpu", note="comma separated"))
    add_hardware_dir(p)
    p.add_argument("--max-gpus", type=gpu_count, default=8, help=flag_help(PLAN, "--max-gpus"))
    p.add_argument("--isl", type=token_count, default=None, help=flag_help(PLAN, "--isl"))
    p.add_argument("--osl", type=token_count, default=None, help=flag_help(PLAN, "--osl"))
    add_max_lengths(
        p,
        "2x the mean, capped at the model's maximum positions",
        (flag_help(PLAN, "--max-isl"), flag_help(PLAN, "--max-osl")),
    )
    load = p.add_mutually_exclusive_group()
    load.add_argument("--rate", type=request_rate, default=None, help=flag_help(PLAN, "--rate"))
    load.add_argument(
        "--concurrency", type=client_count, default=None, help=flag_help(PLAN, "--concurrency")
    )
    p.add_argument("--ttft-ms", type=slo_ms, required=True, help=flag_help(PLAN, "--ttft-ms"))
    p.add_argument("--tpot-ms", type=slo_ms, required=True, help=flag_help(PLAN, "--tpot-ms"))
    p.add_argument(
        "--percentile",
        choices=("p50", "p90", "p99"),
        default="p90",
        help=flag_help(PLAN, "--percentile"),
    )
    p.add_argument("--confidence", type=float, default=0.8, help=flag_help(PLAN, "--confidence"))
    p.add_argument(
        "--mode", choices=("agg", "disagg", "auto"), default="auto", help=flag_help(PLAN, "--mode")
    )
    p.add_argument(
        "--backend",
        default=DEFAULT_ENGINE,
        choices=engine_names(),
        help=flag_help(PLAN, "--backend"),
    )
    p.add_argument(
        "--price-per-gpu-hour",
        type=float_in(0, 1e6, lo_open=True),
        default=None,
        help=flag_help(
            PLAN, "--price-per-gpu-hour", default="each GPU's price in its spec, see `planner gpus`"
        ),
    )
    p.add_argument(
        "--objective",
        choices=("cost", "throughput-per-gpu", "gpus", "energy"),
        default="cost",
        help=flag_help(PLAN, "--objective"),
    )
    add_energy_args(p)
    p.add_argument(
        "--weight-quant",
        action="append",
        default=[],
        choices=("bf16", "fp8", "fp4", "int4"),
        help=flag_help(PLAN, "--weight-quant", note="one per flag; may repeat"),
    )
    p.add_argument(
        "--node-gpus", type=shard_size, default=None, help=flag_help(PLAN, "--node-gpus")
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="write plan.json and the engine configs here (an empty or new folder)",
    )
    p.add_argument("--force", action="store_true", help="with --out: write into a non-empty folder")
    p.add_argument(
        "--target",
        choices=("bundle", "k8s"),
        default="bundle",
        help="with --out: the engine bundle, or Kubernetes manifests under k8s/ (default: bundle)",
    )
    add_listen_host(p)
    add_format(p)
    add_calibration(p)
    add_plan_trace_args(p)
    add_spec_args(p)
    p.set_defaults(func=cmd_plan)

    f = sub.add_parser(
        "fleet", help="cheapest fleet for several workload classes and GPU types (MILP)"
    )
    f.add_argument("--spec", required=True, help="fleet YAML (see solvers/examples/fleet.yaml)")
    add_format(f)
    f.set_defaults(func=cmd_fleet)

    v = groups["validate"].add_parser(
        "decisions", help="is our top pick the measured best (or within 5%%)?"
    )
    v.add_argument(
        "--data",
        type=Path,
        required=True,
        action="append",
        help="measured rows in the e2e layout (`python -m lab.prepare_e2e` writes the shared "
        "data in it); give it more than once to judge the files together",
    )
    v.add_argument(
        "--holdout",
        choices=("gpu", "campaign", "none"),
        default="none",
        help="price the rows as `validate e2e --holdout` does: gpu (constants refitted on the "
        "other GPUs' rows), campaign (on the other campaign folds) or none (the shipped "
        "constants) (default: none)",
    )
    v.add_argument(
        "--folds", type=int, default=5, help="--holdout campaign: number of folds (2-50)"
    )
    v.add_argument(
        "--ttft-ms",
        type=slo_ms,
        default=None,
        help="stated TTFT SLO (default from solvers.decisions)",
    )
    v.add_argument(
        "--tpot-ms",
        type=slo_ms,
        default=None,
        help="stated TPOT SLO (default from solvers.decisions)",
    )
    add_format(v)
    v.set_defaults(func=cmd_decisions)


def _request(args: argparse.Namespace) -> Any:
    from planner.emitters.capabilities import shape_rules
    from planner.model.bundled import load_model
    from planner.workload.spec import max_lengths
    from solvers.plan import PlanRequest

    model = load_model(args.model, args.model_id or "")
    limit = model.max_position_embeddings
    max_isl, max_osl = max_lengths(
        args.isl, args.osl, args.max_isl, args.max_osl, limit, args.model
    )
    return PlanRequest(
        model=args.model,
        model_id=args.model_id or "",
        shape_rules=shape_rules(args.backend),
        gpus=tuple(g.strip() for g in args.gpu.split(",") if g.strip()),
        max_gpus=args.max_gpus,
        isl=args.isl,
        osl=args.osl,
        max_isl=max_isl,
        max_osl=max_osl,
        rate_per_s=args.rate,
        concurrency=args.concurrency,
        ttft_ms=args.ttft_ms,
        tpot_ms=args.tpot_ms,
        percentile=args.percentile,
        confidence=args.confidence,
        mode=args.mode,
        backend=args.backend,
        price_per_gpu_hour=args.price_per_gpu_hour,
        objective=args.objective,
        electricity_price=args.electricity_price,
        pue=args.pue,
        weight_quants=tuple(args.weight_quant),
        node_gpus=args.node_gpus,
        hardware_dirs=tuple(args.hardware_dir),
        spec_options=spec_options(args, model),
    )


def _write_out(
    plan_dict: dict[str, Any],
    backend: str,
    out_dir: str,
    force: bool,
    target: str = "bundle",
    host: str = "",
) -> list[str]:
    """plan.json and the engine bundle (or k8s manifests), all built in memory first, then
    written together."""
    from planner.emitters.bundle import build_bundle
    from planner.emitters.k8s import K8S_DIR, build_k8s
    from planner.emitters.plan_file import parse_plan
    from planner.safe_files import prepare_out_dir, write_all_new

    plan_file = parse_plan(to_jsonable(plan_dict))
    if target == "k8s":
        files = build_k8s(plan_file, backend)
    else:
        files = build_bundle(plan_file, backend, host=host)
    out = prepare_out_dir(out_dir, force)
    if target == "k8s":
        prepare_out_dir(out / K8S_DIR, force)
    outputs = {out / "plan.json": (json.dumps(to_jsonable(plan_dict), indent=2) + "\n").encode()}
    outputs |= {out / f.name: f.text.encode() for f in files}
    written = write_all_new(outputs, force)
    for f in files:
        if f.executable:
            (out / f.name).chmod((out / f.name).stat().st_mode | 0o111)
    return [str(p) for p in written]


def _choice_rows(c: Any, pct: str) -> dict[str, Any]:
    from planner.reports.present import config_sentence, num

    pr = c.predicted
    return {
        "configuration": config_sentence(c.deployment.model_dump(mode="json"), c.gpus),
        f"TTFT {pct} / mean (ms)": f"{num(pr['ttft_ms'][pct])} / {num(pr['ttft_ms']['mean'])}",
        f"TPOT {pct} / mean (ms)": f"{num(pr['tpot_ms'][pct])} / {num(pr['tpot_ms']['mean'])}",
        "Output tokens/s per GPU": pr["output_tok_s_per_gpu"],
        "Output tokens/s per user": pr["output_tok_s_per_user"],
        "Requests/s": pr["requests_per_s"],
        **_kv_row(c),
        "GPUs used / bought": (
            f"{c.gpus:,} / {c.gpus_bought:,} (units of {c.purchase_unit['gpus']})"
        ),
        "Cost per hour of the GPUs bought ($)": c.cost_per_hour_usd,
        "Cost per 1M output tokens ($)": c.cost_per_million_output_tokens,
        "Cost per 1M total tokens, input + output ($)": c.cost_per_million_total_tokens,
    }


def _kv_row(c: Any) -> dict[str, Any]:
    """A disaggregated choice's KV transfer per request, with its link between two GPU types."""
    if c.mode != "disagg":
        return {}
    link = c.predicted.get("provenance", {}).get("kv_link")
    via = " (scale-out NIC, the slower of the two types)" if link else ""
    return {f"KV transfer per request, mean (ms){via}": c.predicted["kv_transfer_ms"]}


def _headroom_rows(h: dict[str, Any]) -> dict[str, Any]:
    """SLO headroom at the point prediction and at the band edge (the SLO must hold at the edge)."""
    if not h:
        return {}
    conf = (
        f"{h['confidence']:.0%} one-sided quantile"
        if h["confidence"]
        else "80% one-sided quantile (not required: --confidence 0)"
    )
    out = {
        f"{m.upper()} headroom: SLO/predicted, SLO/{conf}": (
            f"{h[m]['slo_over_predicted']:.2f}, {h[m]['slo_over_band_edge']:.2f}"
        )
        for m in ("ttft", "tpot")
    }
    out |= {
        f"P({m.upper()} {h['percentile']} <= SLO)": f"{h[m]['probability_met']:.1%}"
        for m in ("ttft", "tpot")
        if "probability_met" in h[m]
    }
    return {**out, "this plan's least headroom (band edge)": h["tightest_at_band_edge"]}


def request_line(r: Any) -> str:
    """The answer's first line: the request with every setting, defaults included."""
    from planner.reports.present import num

    q, pct = r.request, r.slo["percentile"]
    load = (
        f"rate {num(q.rate_per_s)} requests/s"
        if q.rate_per_s is not None
        else f"{num(q.concurrency)} clients"
        if q.concurrency is not None
        else "no load (each plan at its best throughput)"
    )
    conf = f"confidence {q.confidence:g}" + (" (point prediction)" if q.confidence == 0 else "")
    return (
        f"{r.model} on {', '.join(q.gpus)}: ISL {num(q.isl)}, OSL {num(q.osl)}, {load}; "
        f"SLO {pct} TTFT <= {num(r.slo['ttft_ms'])} ms, TPOT <= {num(r.slo['tpot_ms'])} ms; "
        f"{conf}; budget --max-gpus {num(q.max_gpus)}; objective {q.objective}; mode {q.mode}; "
        f"backend {q.backend}"
    )


def per_gpu_rows(r: Any) -> list[dict[str, Any]]:
    """One row per GPU type asked for: its best plan, GPUs, $/hour, $/1M total tokens and what
    binds it, or why it cannot meet the request."""
    from planner.reports.present import gpu_name

    rows = []
    for gpu, e in r.per_gpu_type.items():
        b = e.get("best") or {}
        bind = e.get("binding") or {}
        rows.append(
            {
                "GPU type": gpu_name(gpu),
                "recommended": "yes" if e.get("chosen") else "no",
                "GPUs used": b.get("gpus"),
                "GPUs bought": b.get("gpus_bought", b.get("gpus")),
                "$ per hour": b.get("cost_per_hour_usd"),
                "$ per 1M total tokens": b.get("cost_per_million_total_tokens"),
                "binds / why not": bind.get("constraint") or e.get("reason"),
                "configuration": b.get("config", ""),
            }
        )
    return rows


def uses_pp(dep: Any) -> bool:
    """Whether any worker of deployment ``dep`` splits the model into pipeline stages."""
    roles = (dep.agg, dep.prefill, dep.decode)
    return any(w is not None and w.parallel.pp > 1 for w in roles)


def gpus_label(c: Any) -> str:
    """'8 x H200-SXM', or '8 GPUs (prefill on H100-SXM, decode on H200-SXM)' for a choice whose
    roles run on two GPU types."""
    from planner.reports.present import gpu_name

    if c.prefill_gpu and c.prefill_gpu != c.gpu:
        pair = f"prefill on {gpu_name(c.prefill_gpu)}, decode on {gpu_name(c.gpu)}"
        return f"{c.gpus} GPUs ({pair})"
    return f"{c.gpus} x {gpu_name(c.gpu)}"


def plan_table(r: Any) -> str:
    """The human-readable recommendation."""
    from planner.reports.present import config_words

    pct = r.slo["percentile"]

    parts = [request_line(r), ""]
    rows = {
        "mode": r.best.mode,
        **_choice_rows(r.best, pct),
        "binding constraint (what stops a better plan)": config_words(
            str(r.binding.get("sentence") or r.binding_constraint)
        ),
        **_headroom_rows(r.best.headroom),
    }
    if r.speculative_decision:
        rows["speculative decoding"] = r.speculative_decision["why"]
    parts.append(render_kv(rows, "Recommended deployment"))
    if r.best.power is not None:
        parts += ["", render_kv(power_rows(r.best.power), "Power and energy (GPU boards)")]
    if r.at_prediction is not None:
        c = r.at_prediction
        title = (
            f"At the point prediction (--confidence 0) the plan would be: {gpus_label(c)}, "
            f"${c.cost_per_hour_usd:,.4g} per hour, "
            f"${c.cost_per_million_total_tokens:,.4g} per 1M total tokens"
        )
        parts += ["", render_kv(_choice_rows(c, pct) | _headroom_rows(c.headroom), title)]
    for mode, c in r.alternatives.items():
        if c is not None and c.mode != r.best.mode:
            title = f"Best {mode} alternative"
            if uses_pp(c.deployment) and not uses_pp(r.best.deployment):
                title += (
                    " (pipeline parallel: recommended only when no plan without pipeline "
                    "parallelism meets the request)"
                )
            parts += ["", render_kv(_choice_rows(c, pct), title)]
    front = [
        {
            "mode": p.mode,
            "Output tokens/s per GPU": p.output_tok_s_per_gpu,
            "Output tokens/s per user": p.output_tok_s_per_user,
            f"TTFT {pct} (ms)": p.ttft_ms,
            f"TPOT {pct} (ms)": p.tpot_ms,
            "GPUs": p.gpus,
            "configuration": p.config,
        }
        for p in r.pareto
    ]
    if len(r.per_gpu_type) > 1:
        parts += ["", "Each GPU type asked for", render_table(per_gpu_rows(r))]
    if r.role_types is not None:
        said = config_words(str(r.role_types["sentence"]))
        parts += ["", f"Prefill and decode on two GPU types: {said}"]
    parts += ["", f"Pareto front ({len(front)} points)", render_table(front)]
    parts += ["", f"{r.candidates_evaluated:,} candidates evaluated in {r.search_seconds:.3g} s"]
    return "\n".join(parts)


def cmd_plan(args: argparse.Namespace) -> int:
    from hardware.catalog import get_gpu

    gpus = [g.strip() for g in args.gpu.split(",") if g.strip()]
    gpu = get_gpu(gpus[0], args.hardware_dir).key if len(gpus) == 1 else None
    consts, bands = calibration_from(args, gpu)

    def request(a: argparse.Namespace) -> Any:
        return _request(a).model_copy(update={"engine_constants": consts})

    result = plan_prefix_args(args, request, bands)
    check_one_request(result.best.predicted, result.workload)  # --max-isl/--max-osl fit
    plan_dict = result.to_plan_dict()
    written = (
        _write_out(plan_dict, args.backend, args.out, args.force, args.target, args.host)
        if args.out
        else []
    )
    if args.format == "json":
        print_json(plan_dict)
    else:
        print(plan_table(result))
        if result.prefix_cache:
            print("\n" + prefix_table(result))
        for path in written:
            print(f"wrote {path}")
    return 0


def _by_type(counts: dict[str, int]) -> str:
    """'H100-SXM 5, H200-SXM 1' (types with none left out; '0' when all are)."""
    from planner.reports.present import gpu_name

    return ", ".join(f"{gpu_name(g)} {n:,}" for g, n in counts.items() if n) or "0"


def fleet_rows(result: Any) -> list[dict[str, object]]:
    """One row per assignment, for people: GPU names, units, the configuration in words."""
    from planner.reports.present import config_words, gpu_name

    rows: list[dict[str, object]] = []
    for a in result.assignments:
        gpu = gpu_name(a.gpu)
        if a.prefill_gpu:
            gpu = f"prefill {gpu_name(a.prefill_gpu)} ({a.prefill_gpus_per_replica}), decode {gpu}"
        rows.append(
            {
                "class": a.workload_class,
                "GPU type": gpu,
                "replicas": a.replicas,
                "GPUs per replica": a.gpus_per_replica,
                "requests/s per replica": a.requests_per_s_per_replica,
                "$ per hour": a.cost_per_hour_usd,
                "board power (kW)": a.board_kw,
                "TTFT at the class percentile (ms)": a.ttft_ms,
                "TPOT at the class percentile (ms)": a.tpot_ms,
                "configuration": config_words(a.config),
            }
        )
    return rows


def cmd_fleet(args: argparse.Namespace) -> int:
    from solvers.fleet import load_spec, solve_fleet

    result = solve_fleet(load_spec(args.spec))
    if args.format == "json":
        print_json(result)
        return 0
    print(render_table(fleet_rows(result)))
    print(
        render_kv(
            {
                "$ per hour": result.cost_per_hour_usd,
                "GPUs used by type": _by_type(result.gpus_by_type),
                "GPUs bought by type (the cost is of these)": _by_type(result.gpus_bought_by_type),
                "solver": f"{result.solver} ({result.status}, {result.solution_status})",
                "solve seconds": result.solve_seconds,
                "binding constraint": result.binding_constraint,
            }
        )
    )
    p = result.power
    if p is not None:
        energy = {
            "board power (each replica at its operating point)": f"{p.board_kw:.4g} kW "
            f"({p.facility_kw:.4g} kW facility at PUE {p.pue:.3g})",
            "energy per total token": f"{p.j_per_total_token:.4g} J",
            "energy per day": f"{p.kwh_per_day:.4g} kWh, ${p.energy_cost_usd_per_day:,.4g} at "
            f"${p.electricity_price_usd_per_kwh:.3g}/kWh",
            "cost per hour, GPUs + energy": f"${p.gpus_and_energy_cost_per_hour_usd:,.4g}",
        }
        print("\n" + render_kv(energy, "Power and energy (GPU boards)"))
    return 0


def cmd_decisions(args: argparse.Namespace) -> int:
    from solvers.decisions import (
        DEFAULT_TPOT_MS,
        DEFAULT_TTFT_MS,
        validate_decisions,
    )

    res = validate_decisions(
        args.data,
        ttft_ms=args.ttft_ms or DEFAULT_TTFT_MS,
        tpot_ms=args.tpot_ms or DEFAULT_TPOT_MS,
        holdout=args.holdout,
        folds=args.folds,
    )
    if args.format == "json":
        print_json(res)
        return 0
    print(
        render_kv(
            {k: v for k, v in res.items() if not isinstance(v, list) and k != "by_gpu"},
            "Decision-level validation",
        )
    )
    by_gpu = res["by_gpu"]
    assert isinstance(by_gpu, dict)
    print(
        render_table(
            [
                {
                    "GPU": g,
                    "groups": s["groups"],
                    "top-1 %": s["top1_pct"],
                    "within 5 % of best %": s["within5_pct"],
                }
                for g, s in by_gpu.items()
            ]
        )
    )
    return 0
