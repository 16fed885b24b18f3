"""``planner capacity`` (GPUs per window of a timed trace), ``planner gen-trace`` (synthetic
traces) and the trace replay of ``planner simulate --deployment``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hardware.errors import PlannerInputError
from planner.cli.cmd_agentic import (
    add_agentic_args,
    add_prefix_args,
    cmd_gen_agentic,
    prefix_capacity_args,
    print_prefix,
)
from planner.cli.cmd_power import add_energy_args, power_rows
from planner.cli.common import add_format, add_hardware_dir, positive_float, positive_int
from planner.cli.output import print_json, render_kv, render_table
from planner.cli.recipe_args import add_max_lengths
from planner.cli.spec_args import add_spec_args, spec_options
from planner.engines import DEFAULT_ENGINE, engine_names
from solvers.plan_models import CONFIDENCE_HELP, DEFAULT_CONFIDENCE, OBJECTIVE_HELP

if TYPE_CHECKING:
    from planner.perf.replay import WindowStats

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """argparse type: seconds from '900', '900s', '15m' or '1h' (> 0)."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"expected a duration such as 900s, 15m or 1h, got '{text}'"
        )
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def non_negative_duration(text: str) -> float:
    """argparse type: like ``duration`` but 0 allowed."""
    return 0.0 if text.strip() in ("0", "0s", "0m", "0h") else duration(text)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser(
        "capacity", help="GPUs per window of a timed trace: autoscaled vs static peak / mean"
    )
    p.add_argument(
        "--trace",
        type=Path,
        required=True,
        help="CSV arrival_s,isl,osl (optional hash_ids, session), BurstGPT (Timestamp, Request "
        "tokens, Response tokens, ...) or Mooncake JSON lines (timestamp, input_length, "
        "output_length, hash_ids)",
    )
    add_trace_where(p)
    p.add_argument("--model", required=True, help="bundled name, HF id or path to config.json")
    add_max_lengths(p, "the longest in the trace")
    p.add_argument("--gpu", required=True, help="GPU name(s), comma separated (see `planner gpus`)")
    add_hardware_dir(p)
    p.add_argument("--ttft-ms", type=positive_float, required=True, help="TTFT SLO (ms)")
    p.add_argument("--tpot-ms", type=positive_float, required=True, help="TPOT SLO (ms)")
    p.add_argument(
        "--percentile",
        choices=("p50", "p90", "p99"),
        default="p90",
        help="SLO percentile per window",
    )
    p.add_argument(
        "--confidence",
        type=float,
        default=DEFAULT_CONFIDENCE,
        help=f"{CONFIDENCE_HELP} (default {DEFAULT_CONFIDENCE})",
    )
    p.add_argument(
        "--node-gpus",
        type=positive_int,
        default=None,
        help="GPUs per purchase unit: costs are of whole units (default: the GPU spec's "
        "purchase_unit_gpus, e.g. 4 for an NVL72 tray, 1 where GPUs are rented singly)",
    )
    p.add_argument(
        "--window", type=duration, default=900.0, help="window length: 900s, 15m, 1h (default 15m)"
    )
    p.add_argument(
        "--scale-up-s",
        type=non_negative_duration,
        default=0.0,
        help="seconds a new replica needs before it serves (billed from then); 300s, 5m",
    )
    p.add_argument("--max-gpus", type=positive_int, default=256, help="most GPUs in any window")
    p.add_argument(
        "--worker-max-gpus", type=positive_int, default=16, help="most GPUs of one replica"
    )
    p.add_argument(
        "--min-replicas", type=int, default=1, help="replicas kept in every window (>= 0)"
    )
    p.add_argument(
        "--backend", default=DEFAULT_ENGINE, choices=engine_names(), help="engine calibration"
    )
    p.add_argument(
        "--price-per-gpu-hour", type=positive_float, default=None, help="override $/GPU-hour"
    )
    p.add_argument(
        "--objective",
        choices=("cost", "throughput-per-gpu", "gpus", "energy"),
        default="cost",
        help="how the worker shape is chosen (planner plan's --objective, without a load): "
        + OBJECTIVE_HELP.replace("%", "%%"),
    )
    add_energy_args(p)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write the JSON here (for simulate --deployment)",
    )
    p.add_argument(
        "--xlsx", type=Path, default=None, help="also write a spreadsheet with the Capacity sheet"
    )
    p.add_argument("--force", action="store_true", help="overwrite --out / --xlsx")
    add_prefix_args(p)
    add_format(p)
    add_spec_args(p)
    p.set_defaults(func=cmd_capacity)

    g = sub.add_parser(
        "gen-trace", help="write a synthetic timed trace (daily cycle, bursts; seedable)"
    )
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
        ("length-daily-swing", float, "mean lengths x (1 -/+ s) at trough/peak (default 0)"),
    ):
        g.add_argument(f"--{name}", type=kind, default=None, help=helptext)
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_agentic_args(g)
    add_format(g)
    g.set_defaults(func=cmd_gen_trace)


def _summary_rows(res: Any) -> list[dict[str, Any]]:
    pct = res.slo["percentile"]
    rows = []
    for i, w in enumerate(res.windows):
        rows.append(
            {
                "window": i,
                "start (h)": w.start_s / 3600.0,
                "requests": w.requests,
                "rate (req/s)": w.rate,
                "design rate (req/s)": w.design_rate,
                "gap CV": w.arrival_cv,
                "replicas": w.replicas,
                "GPUs bought": w.gpus,
                f"TTFT {pct} (ms)": getattr(w.ttft_ms, pct),
                f"TPOT {pct} (ms)": getattr(w.tpot_ms, pct),
                "meets SLO": w.meets_slo,
                f"P(TTFT {pct} <= SLO)": w.probability_met.get("ttft"),
                f"P(TPOT {pct} <= SLO)": w.probability_met.get("tpot"),
            }
        )
    return rows


def _fleet_rows(res: Any) -> list[dict[str, Any]]:
    out = []
    for name, f in (
        ("autoscaled", res.autoscaled),
        ("static peak", res.static_peak),
        ("static mean", res.static_mean),
    ):
        out.append(
            {
                "deployment": name,
                "GPUs bought (max)": f.gpus,
                "GPU-hours bought": f.gpu_hours,
                "cost ($)": f.cost,
                "windows violating SLO": f.windows_violating,
            }
        )
    return out


def cmd_capacity(args: argparse.Namespace) -> int:
    from planner.cli.recipe_args import trace_within
    from planner.model.bundled import load_model
    from planner.workload.traces import check_out, read_trace
    from solvers.capacity import CapacityRequest

    model = load_model(args.model)
    limit = model.max_position_embeddings
    trace, too_long, max_isl, max_osl = trace_within(
        read_trace(args.trace, where=tuple(args.trace_where)),
        limit,
        args.max_isl,
        args.max_osl,
        args.model,
    )

    if args.min_replicas < 0:
        raise PlannerInputError("--min-replicas", f"must be >= 0, got {args.min_replicas}")
    req = CapacityRequest(
        model=args.model,
        gpus=tuple(g.strip() for g in args.gpu.split(",") if g.strip()),
        ttft_ms=args.ttft_ms,
        tpot_ms=args.tpot_ms,
        percentile=args.percentile,
        window_s=args.window,
        scale_up_s=args.scale_up_s,
        max_gpus=args.max_gpus,
        worker_max_gpus=args.worker_max_gpus,
        min_replicas=args.min_replicas,
        backend=args.backend,
        price_per_gpu_hour=args.price_per_gpu_hour,
        hardware_dirs=tuple(args.hardware_dir),
        confidence=args.confidence,
        node_gpus=args.node_gpus,
        max_isl=max_isl,
        max_osl=max_osl,
        too_long_requests=too_long,
        objective=args.objective,
        electricity_price=args.electricity_price,
        pue=args.pue,
        spec_options=spec_options(args, model),
    )
    for path, flag in ((args.out, "--out"), (args.xlsx, "--xlsx")):
        if path is not None:
            check_out(path, args.force, flag)
    res = prefix_capacity_args(trace, req, args)
    _write_outputs(res, args)
    if args.format == "json":
        print_json(res)
        return 0
    head = (
        f"{res.model} on {res.gpu} ({res.backend}): {res.trace['requests']:,} requests over "
        f"{float(res.trace['duration_s']) / 3600:.3g} h, windows of {res.window_s / 60:g} min, SLO "
        f"{res.slo['percentile']} TTFT <= {res.slo['ttft_ms']:g} ms, "
        f"TPOT <= {res.slo['tpot_ms']:g} ms, "
        + (
            f"each met with probability >= {res.confidence:g}"
            if res.confidence
            else "at the point prediction"
        )
        + f"; objective {args.objective}; --max-gpus "
        f"{args.max_gpus:,}, --worker-max-gpus {args.worker_max_gpus:,}, --min-replicas "
        f"{args.min_replicas:,}"
    )
    print(head)
    if too_long:
        print(
            f"left out {too_long:,} requests longer than {res.model}'s {limit:,} positions; "
            f"the deployment accepts prompts up to {max_isl:,} and answers up to {max_osl:,} "
            "tokens"
        )
    gpw = res.deployment.total_gpus
    print(
        f"replica: {res.windows[0].config.split(' x ', 1)[1]} ({gpw} GPU{'s' if gpw > 1 else ''}); "
        f"GPUs bought in units of {res.purchase_unit.get('gpus', 1)}"
    )
    print(render_table(_summary_rows(res)))
    print()
    print(render_table(_fleet_rows(res)))
    print_prefix(res)
    if res.speculative_decision:
        print(f"speculative decoding: {res.speculative_decision['why']}")
    if res.power is not None:
        title = "Power and energy (GPU boards) of the static-mean fleet at the trace's mean rate"
        print("\n" + render_kv(power_rows(res.power), title))
    for path in (args.out, args.xlsx):
        if path is not None:
            print(f"wrote {path}")
    return 0


def _write_outputs(res: Any, args: argparse.Namespace) -> None:
    import json

    from planner.cli.output import to_jsonable
    from planner.workload.traces import write_bytes, write_text

    data = to_jsonable(res)
    if args.out is not None:
        write_text(args.out, json.dumps(data, indent=2) + "\n", force=args.force)
    if args.xlsx is not None:
        from planner.reports.capacity_sheet import capacity_xlsx

        write_bytes(args.xlsx, capacity_xlsx(data), force=args.force, field="--xlsx")


def cmd_gen_trace(args: argparse.Namespace) -> int:
    from planner.workload.trace_gen import TraceSpec, generate
    from planner.workload.traces import check_out, write_trace

    if args.agentic:
        return cmd_gen_agentic(args)
    given = {
        k: getattr(args, k.replace("-", "_"))
        for k in (
            "hours",
            "peak_rate",
            "daily_ratio",
            "bursts_per_day",
            "burst_minutes",
            "burst_factor",
            "arrival_cv",
            "isl_mean",
            "isl_cv",
            "osl_mean",
            "osl_cv",
            "length_daily_swing",
        )
    }
    spec = TraceSpec(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    check_out(args.out, args.force)
    trace, gen = generate(spec)
    write_trace(trace, args.out, force=args.force)
    info = {
        "out": str(args.out),
        "requests": len(trace),
        "duration_h": trace.duration_s / 3600.0,
        "bursts": [list(b) for b in gen.bursts],
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
                    "hours": info["duration_h"],
                    "bursts (start s)": ", ".join(f"{a:.0f}" for a, _ in gen.bursts) or "none",
                }
            )
        )
    return 0


SCHEDULES = ("autoscaled", "static-peak", "static-mean")


def add_trace_where(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace-where",
        action="append",
        default=[],
        metavar="COLUMN=VALUE",
        help="keep only trace rows with this cell, e.g. 'Log Type=API log' (may repeat)",
    )


def add_replay_args(p: argparse.ArgumentParser) -> None:
    """``planner simulate --trace FILE --deployment plan.json`` flags."""
    p.add_argument(
        "--deployment",
        type=Path,
        default=None,
        help="replay --trace (timed) through this plan: a planner capacity --out JSON "
        "or a planner plan JSON",
    )
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default="autoscaled",
        help="with a capacity JSON: replicas per window (autoscaled) "
        "or constant (static-peak/-mean)",
    )
    p.add_argument(
        "--window",
        type=duration,
        default=900.0,
        help="with a plan JSON: report windows of this length",
    )
    p.add_argument(
        "--windows", default=None, help="replay only these window indices, e.g. 0,12,40-47"
    )
    add_trace_where(p)


def _indices(text: str | None, count: int) -> list[int] | None:
    if text is None:
        return None
    out: set[int] = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if (
            not m
            or int(m.group(2) or m.group(1)) >= count
            or int(m.group(2) or m.group(1)) < int(m.group(1))
        ):
            raise PlannerInputError(
                "--windows",
                f"{part.strip()!r}: expected indices or ranges in 0..{count - 1}, e.g. 0,12,40-47",
            )
        out.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return sorted(out)


def _schedule(data: dict[str, Any], schedule: str, trace: Any, window_s: float) -> tuple[Any, ...]:
    """(deployment, backend, slo, window starts, replicas per window) from a capacity or plan
    JSON."""
    import numpy as np

    from planner.perf.deployment import Deployment
    from planner.plan_io import validate_plan

    if "windows" in data and "deployment" in data:
        dep = validate_plan(data["deployment"], Deployment)
        starts = np.array([float(w["start_s"]) for w in data["windows"]])
        if schedule == "autoscaled":
            reps = np.array([int(w["replicas"]) for w in data["windows"]])
        else:
            reps = np.full(starts.size, int(data[schedule.replace("-", "_")]["replicas"]))
        return dep, str(data.get("backend", DEFAULT_ENGINE)), data.get("slo"), starts, reps
    if not isinstance(data.get("best"), dict) or "deployment" not in data["best"]:
        raise PlannerInputError(
            "--deployment", "not a capacity or plan JSON: no windows/deployment nor best.deployment"
        )
    dep = validate_plan(data["best"]["deployment"], Deployment)
    if dep.agg is None:
        raise PlannerInputError(
            "--deployment", "the replay simulates aggregated replicas; this plan is disaggregated"
        )
    origin = float(np.floor(trace.arrival_s[0] / window_s) * window_s)
    starts = origin + window_s * np.arange(
        max(1, int(np.ceil((trace.arrival_s[-1] - origin) / window_s + 1e-9)))
    )
    return (
        dep,
        str(data.get("backend", DEFAULT_ENGINE)),
        data.get("slo"),
        starts,
        np.full(starts.size, dep.agg.workers),
    )


def _meets(row: WindowStats, slo: dict[str, Any] | None) -> bool | None:
    if not slo or not row["requests"]:
        return None
    pct = str(slo.get("percentile", "p90"))
    ttft, tpot = row["ttft_ms"][pct], row["tpot_ms"][pct]
    return bool(
        ttft is not None
        and ttft <= float(slo["ttft_ms"])
        and (tpot is None or tpot <= float(slo["tpot_ms"]))
    )


def cmd_simulate_trace(args: argparse.Namespace) -> int:
    """Replay a timed trace through the deployment's replicas (see :mod:`planner.perf.replay`)."""
    import numpy as np

    from planner.cli.output import stderr_line
    from planner.model.bundled import load_model
    from planner.perf.replay import Progress, by_window, overall, replay, route, window_index
    from planner.plan_io import read_plan_json
    from planner.workload.traces import read_trace

    if args.trace is None:
        raise PlannerInputError("--trace", "--deployment replays a timed trace: give --trace FILE")
    trace = read_trace(args.trace, where=tuple(args.trace_where))
    data = read_plan_json(args.deployment, "--deployment")
    if not isinstance(data, dict):
        raise PlannerInputError("--deployment", "not a capacity or plan JSON object")
    dep, backend, slo, starts, reps = _schedule(data, args.schedule, trace, args.window)
    for flag, given, have in (("--model", args.model, dep.model), ("--gpu", args.gpu, dep.gpu)):
        if given is not None and given not in (have, dep.hf_id):
            raise PlannerInputError(
                flag, f"{given!r} differs from the deployment's {have!r}; omit it to use the file's"
            )
    wo = window_index(trace.arrival_s, starts)
    keep = _indices(args.windows, starts.size)
    sel = np.isin(wo, keep) if keep is not None else np.ones(wo.size, dtype=bool)
    assert dep.agg is not None
    res = replay(
        load_model(dep.model),
        dep.gpu,
        dep.agg,
        trace.arrival_s[sel],
        trace.isl[sel],
        trace.osl[sel],
        route(wo, reps)[sel],
        backend=backend,
        progress=Progress(stderr_line),
    )
    rows = by_window(res, wo[sel], starts.size)
    wins: list[dict[str, Any]] = [
        {
            "index": k,
            "start_s": float(starts[k]),
            "replicas": int(reps[k]),
            **r,
            "meets_slo": _meets(r, slo),
        }
        for k, r in enumerate(rows)
        if keep is None or k in keep
    ]
    met = [w["meets_slo"] for w in wins if w["meets_slo"] is not None]
    out = {
        "model": dep.model,
        "gpu": dep.gpu,
        "backend": backend,
        "schedule": args.schedule,
        "slo": slo,
        "windows": wins,
        "overall": overall(res),
        "windows_meeting_slo": sum(met),
        "windows_with_requests": len(met),
    }
    if args.format == "json":
        print_json(out)
    else:
        _print_replay(wins, out["overall"], slo, met)
    return 0


def _print_replay(
    wins: list[dict[str, Any]], tot: WindowStats, slo: dict[str, Any] | None, met: list[bool]
) -> None:
    pct = str((slo or {}).get("percentile", "p90"))
    print(
        render_table(
            [
                {
                    "window": w["index"],
                    "start (h)": w["start_s"] / 3600,
                    "replicas": w["replicas"],
                    "requests": w["requests"],
                    f"TTFT {pct} (ms)": w["ttft_ms"][pct],
                    f"TPOT {pct} (ms)": w["tpot_ms"][pct],
                    "meets SLO": w["meets_slo"],
                }
                for w in wins
            ]
        )
    )
    print(
        render_kv(
            {
                "requests": tot["requests"],
                f"TTFT {pct} (ms)": tot["ttft_ms"][pct],
                f"TPOT {pct} (ms)": tot["tpot_ms"][pct],
                "windows meeting SLO": f"{sum(met)} of {len(met)}",
            },
            title="overall",
        )
    )
