"""``PLAN.md``: what was chosen, what the planner predicts, and what the emitted files assume."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from planner.emitters.common import context_length, roles
from planner.emitters.flag_table import FlagRow, Flags
from planner.emitters.plan_file import PlanFile
from planner.emitters.types import EmitContext, EngineBuild
from planner.reports.present import label, num, show

_PERCENTILES = ("mean", "p50", "p90", "p99")


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _cell(value: object) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return num(value)
    return "-" if value is None else str(value).replace("|", "\\|")


def _band_cell(value: object) -> object:
    """A band edge pair {lo, hi} as ``lo-hi``; other values unchanged."""
    if isinstance(value, dict) and {"lo", "hi"} <= set(value):
        return f"{num(value['lo'])}-{num(value['hi'])}"
    return value


def deployment_section(ctx: EmitContext) -> list[str]:
    dep = ctx.deployment
    header = (
        "role",
        "replicas",
        "TP",
        "PP",
        "DP",
        "EP",
        "running requests per rank",
        "chunk per rank (tokens)",
        "mem fraction",
        "KV dtype",
        "weights",
    )
    rows = [
        (
            role,
            w.workers,
            w.parallel.tp,
            w.parallel.pp,
            w.parallel.dp,
            w.parallel.ep,
            w.max_num_seqs,
            w.max_num_batched_tokens,
            w.gpu_memory_utilization,
            w.kv_dtype,
            w.weight_quant,
        )
        for role, w in roles(dep)
    ]
    return [
        "## Deployment",
        "",
        *_table(header, rows),
        "",
        f"max model length {context_length(ctx):,} tokens (the longest prompt plus the longest "
        "answer); running requests, chunk and CUDA-graph batch are per attention-DP rank (each "
        f"engine's flags converted through its per_rank.yaml); {dep.total_gpus} GPUs in total.",
        "",
    ]


def _gpus(ctx: EmitContext) -> str:
    """The GPU type, or each role's where prefill and decode run on two types (each role on
    hosts of its own type)."""
    dep = ctx.deployment
    if not dep.prefill_gpu:
        return dep.gpu
    return f"prefill {dep.prefill_gpu}, decode {dep.gpu}"


def predicted_section(plan: PlanFile) -> list[str]:
    pred = plan.best.predicted
    nested = {k: v for k, v in pred.items() if isinstance(v, dict) and k in ("ttft_ms", "tpot_ms")}
    scalars = {k: v for k, v in pred.items() if not isinstance(v, dict) and v not in (None, "")}
    lines = ["## Predicted", ""]
    if nested:
        rows: list[tuple[object, ...]] = [
            (label(k).removesuffix(" (ms)"), *(v.get(p) for p in _PERCENTILES))
            for k, v in nested.items()
        ]
        for k in nested:  # the calibrated band of each number (issue 17), where the plan has one
            band = pred.get(f"{k}_band")
            if isinstance(band, dict):
                name = f"{label(k).removesuffix(' (ms)')} {float(band.get('level', 0.8)):.0%} band"
                rows.append((name, *(_band_cell(band.get(p)) for p in _PERCENTILES)))
        lines += _table(("metric", *(f"{p} (ms)" for p in _PERCENTILES)), rows)
        lines.append("")
        prov = pred.get("provenance")
        source = prov.get("bands") if isinstance(prov, dict) else None
        if isinstance(source, str) and source:
            lines += [f"Bands: {source}.", ""]
    scalars["gpus"] = plan.best.gpus
    scalars["cost_per_million_output_tokens"] = plan.best.cost_per_million_output_tokens
    lines += _table(("quantity", "value"), ((label(k), show(k, v)) for k, v in scalars.items()))
    return [*lines, ""]


def _hosts(ctx: EmitContext) -> str:
    """GPUs per node, each role's on hosts of its own GPU type where the roles run on two."""
    if not ctx.role_node_gpus:
        return f"{ctx.node_gpus} GPUs per node"
    dep = ctx.deployment
    each = [
        f"{n} GPUs per {role} node ({dep.role_gpu(role)})" for role, n in ctx.role_node_gpus.items()
    ]
    return " and ".join(each) + ", each role on nodes of its own GPU type"


def notes_section(
    ctx: EmitContext, flags: Flags, build: EngineBuild, missing: dict[str, list[str]]
) -> list[str]:
    notes = [
        f"Replicas are packed {_hosts(ctx)}; ports and hosts in launch.sh "
        "are defaults, edit them for your cluster.",
        "benchmark.sh splits the load evenly over the endpoints it targets.",
    ]
    wide = max(s.nodes for s in ctx.slots)
    if wide > 1:
        notes.append(
            f"Replicas wider than a node span up to {wide} nodes: launch.sh starts each node's "
            "part under its NODE_RANK; only the first node of a replica serves requests."
        )
    if not ctx.deployment.hf_id:
        notes.append(f"The plan has no HF id; `{ctx.model_id}` is used as the model path.")
    for role, params in missing.items():
        if params:
            notes.append(f"{role}: {flags.engine} has no setting for {', '.join(params)}.")
    notes += list(build.notes)
    return ["## Assumptions and notes", "", *(f"- {n}" for n in notes), ""]


def sources_section(rows: list[FlagRow]) -> list[str]:
    body = ((r.param, r.tool, f"`{r.flag}`", r.since, r.until, r.doc) for r in rows)
    return [
        "## Flag sources",
        "",
        *_table(("parameter", "tool", "spelling", "since", "until", "checked against"), body),
        "",
    ]


def plan_markdown(
    plan: PlanFile,
    ctx: EmitContext,
    flags: Flags,
    build: EngineBuild,
    rows: list[FlagRow],
    files: list[str],
    missing: dict[str, list[str]],
) -> str:
    """The whole PLAN.md text."""
    wl = plan.workload
    head = [
        f"# {plan.model} on {_gpus(ctx)}: {flags.engine} {flags.version_text}",
        "",
        f"Mode: {ctx.deployment.mode}. Files: {', '.join(f'`{f}`' for f in files)}.",
        "",
        "## Workload",
        "",
        *_table(
            (
                "ISL (tokens)",
                "OSL (tokens)",
                "max ISL (tokens)",
                "max OSL (tokens)",
                "concurrency",
                "rate (req/s)",
            ),
            [(wl.isl, wl.osl, wl.max_isl or wl.isl, wl.max_osl or wl.osl, wl.concurrency, wl.rate)],
        ),
        "",
    ]
    parts = head + deployment_section(ctx) + predicted_section(plan)
    parts += notes_section(ctx, flags, build, missing) + sources_section(rows)
    return "\n".join(parts)
