"""The report's tables, built once from a plan and rendered by the xlsx, HTML and CSV writers.

Values are kept exactly as the plan holds them (no rounding); display formats are the writers' job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from planner.reports.plan_view import PlanView, as_float, flat_rows, flatten, pick

GB = 1e9
PER_GPU = "output_tok_s_per_gpu"
PER_USER = "output_tok_s_per_user"
_PCT = ("mean", "p50", "p90", "p99")
_MEMORY_PARTS = (
    ("weights", "weights_bytes_per_gpu"),
    ("activations", "activation_bytes_per_gpu"),
    ("reserved (context, graphs, buffers)", "reserved_bytes_per_gpu"),
    ("KV cache", "kv_budget_bytes_per_gpu"),
)


@dataclass(frozen=True)
class Table:
    """A titled grid: column names and rows of plain cells (str, int, float, bool or None)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""
    formats: dict[str, str] = field(default_factory=dict)
    """Column name -> display kind: 'pct', 'int', 'num', 'gb'."""


def kv_table(title: str, pairs: Mapping[str, Any], note: str = "") -> Table:
    """Two-column Item / Value table."""
    rows = tuple((k, v) for k, v in pairs.items())
    return Table(title, ("Item", "Value"), rows, note)


def rows_table(title: str, rows: list[dict[str, Any]], note: str = "") -> Table:
    """Table from flat dict rows (shared keys become the columns, missing cells are blank)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    body = tuple(tuple(row.get(c) for c in columns) for row in rows)
    return Table(title, tuple(columns), body, note)


def headline(view: PlanView) -> dict[str, Any]:
    """The recommendation in one block: hardware, predicted latency and throughput, cost."""
    pred = view.best.predicted
    out: dict[str, Any] = {
        "model": view.model,
        "gpu": view.gpu,
        "mode": view.best.deployment.get("mode"),
        "GPUs": view.best.gpus,
        "cost per 1M output tokens ($)": view.best.cost_per_million_output_tokens,
        "binding constraint": view.binding_constraint,
    }
    for metric in ("ttft_ms", "tpot_ms"):
        stats = pred.get(metric)
        if isinstance(stats, Mapping):
            out.update({f"{metric} {p}": stats.get(p) for p in _PCT if p in stats})
        elif stats is not None:
            out[metric] = stats
    for key in (PER_GPU, PER_USER, "requests_per_s"):
        out[key] = pred.get(key)
    out["candidates evaluated"] = view.candidates_evaluated
    out["search seconds"] = view.search_seconds
    return out


def workload_pairs(view: PlanView) -> dict[str, Any]:
    """Workload and SLO as Item / Value pairs."""
    pairs: dict[str, Any] = {f"workload.{k}": v for k, v in flatten(view.raw.get("workload", {})).items()}
    pairs.update({f"slo.{k}": v for k, v in flatten(view.slo).items()})
    return pairs


def _other_predictions(view: PlanView) -> dict[str, Any]:
    """Scalar predictions not already in the headline block."""
    skip = {"ttft_ms", "tpot_ms", PER_GPU, PER_USER, "requests_per_s", "step_breakdown", "memory", "provenance"}
    rest = {k: v for k, v in view.best.predicted.items() if k not in skip}
    return flatten(rest)


def summary_tables(view: PlanView) -> list[Table]:
    """Summary sheet: recommendation, workload/SLO, deployment settings, alternatives."""
    tables = [
        kv_table("Recommendation", headline(view)),
        kv_table("Workload and SLO", workload_pairs(view)),
        kv_table("Deployment", flatten(view.best.deployment)),
    ]
    other = _other_predictions(view)
    if other:
        tables.insert(1, kv_table("Other predictions", other))
    alts = alternatives_table(view)
    if alts is not None:
        tables.append(alts)
    return tables


def alternatives_table(view: PlanView) -> Table | None:
    """Best aggregated vs best disaggregated (or whatever alternatives the plan lists), side by side."""
    if not view.alternatives:
        return None
    names = list(view.alternatives)
    flats = {n: flatten(a) if isinstance(a, Mapping) else {"result": a} for n, a in view.alternatives.items()}
    keys: list[str] = []
    for flat in flats.values():
        keys.extend(k for k in flat if k not in keys)
    rows = tuple((k, *(flats[n].get(k) for n in names)) for k in keys)
    return Table("Alternatives", ("Item", *names), rows)


def pareto_table(view: PlanView) -> Table:
    """The Pareto front of output tokens/s per GPU vs per user, one row per configuration."""
    rows = flat_rows(view.pareto)
    note = "" if rows else "the plan lists no Pareto front"
    return _with_formats(rows_table("Pareto front", rows, note))


def candidates_table(view: PlanView) -> Table:
    """Every evaluated candidate the plan kept (falls back to the Pareto front when it kept none)."""
    if view.candidates:
        return _with_formats(rows_table("Candidates", flat_rows(view.candidates)))
    note = "the plan kept no candidate list; showing the Pareto front"
    return _with_formats(rows_table("Candidates", flat_rows(view.pareto), note))


def _with_formats(table: Table) -> Table:
    fmts = {c: "pct" for c in table.columns if "share" in c or "fraction" in c or "utilization" in c}
    return Table(table.title, table.columns, table.rows, table.note, fmts)


def metric_xy(row: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(tokens/s per user, tokens/s per GPU) of a flat row, None where missing."""
    return as_float(pick(row, PER_USER)), as_float(pick(row, PER_GPU))


def _by_role(obj: Any, is_leaf: Any) -> dict[str, Mapping[str, Any]]:
    """``{role: mapping}``: a single mapping becomes role 'all'; per-role mappings are kept."""
    if not isinstance(obj, Mapping) or not obj:
        return {}
    if is_leaf(obj):
        return {"all": obj}
    return {str(k): v for k, v in obj.items() if isinstance(v, Mapping) and is_leaf(v)}


def _share_ms(value: Any) -> tuple[float | None, float | None]:
    if isinstance(value, Mapping):
        ms = value.get("ms", value.get("time_ms"))
        return as_float(value.get("share", value.get("fraction"))), as_float(ms)
    return as_float(value), None


def latency_table(view: PlanView) -> Table:
    """Time share of each op kind in a step (one share column per role, plus ms when given)."""
    def leaf(m: Mapping[str, Any]) -> bool:
        return all(not isinstance(v, Mapping) or "share" in v or "fraction" in v for v in m.values())

    roles = _by_role(view.best.predicted.get("step_breakdown"), leaf)
    ops: list[str] = []
    for bd in roles.values():
        ops.extend(str(k) for k in bd if str(k) not in ops)
    has_ms = any(_share_ms(v)[1] is not None for bd in roles.values() for v in bd.values())
    columns = ["op kind"]
    for role in roles:
        tag = "" if role == "all" else f" ({role})"
        columns += [f"share{tag}"] + ([f"ms{tag}"] if has_ms else [])
    rows = []
    for op in ops:
        row: list[Any] = [op]
        for bd in roles.values():
            share, ms = _share_ms(bd.get(op))
            row += [share] + ([ms] if has_ms else [])
        rows.append(tuple(row))
    note = "" if rows else "the plan has no step breakdown"
    fmts = {c: "pct" for c in columns if c.startswith("share")}
    return Table("Share of step time per op kind", tuple(columns), tuple(rows), note, fmts)


def _is_memory(m: Mapping[str, Any]) -> bool:
    return "weights_bytes_per_gpu" in m


def memory_roles(view: PlanView) -> dict[str, Mapping[str, Any]]:
    """Memory plan per role ('all' when the plan holds one)."""
    return _by_role(view.best.predicted.get("memory"), _is_memory)


def memory_table(view: PlanView) -> Table:
    """Per-GPU memory split: weights, activations, reserve, KV cache, unused headroom."""
    roles = memory_roles(view)
    columns = ["component"]
    for role in roles:
        tag = "" if role == "all" else f" ({role})"
        columns += [f"GB per GPU{tag}", f"share of device{tag}"]
    rows = []
    for label, key in (*_MEMORY_PARTS, ("unused (1 - gpu_memory_utilization)", "")):
        row: list[Any] = [label]
        for mem in roles.values():
            device = as_float(mem.get("gpu_memory_bytes"))
            if key:
                val = as_float(mem.get(key))
            else:
                budget = as_float(mem.get("budget_bytes_per_gpu"))
                val = device - budget if device is not None and budget is not None else None
            row += [None if val is None else val / GB, None if val is None or not device else val / device]
        rows.append(tuple(row))
    note = "" if roles else "the plan has no memory plan"
    fmts = {c: ("pct" if c.startswith("share") else "num") for c in columns[1:]}
    return Table("Memory per GPU", tuple(columns), tuple(rows) if roles else (), note, fmts)


def memory_detail(view: PlanView) -> list[Table]:
    """Every field of each role's memory plan, as the plan holds it (bytes)."""
    return [kv_table(f"Memory plan ({role})", flatten(m)) for role, m in memory_roles(view).items()]


_TOP_CONSUMED = {
    "model", "gpu", "workload", "slo", "best", "pareto", "candidates", "binding_constraint",
    "candidates_evaluated", "search_seconds", "alternatives", "assumptions", "provenance",
}


def load_model_line(view: PlanView) -> str:
    """How the load was modelled, in words."""
    wl = view.workload
    if wl.concurrency is not None:
        return f"closed loop: {wl.concurrency} clients, each sends its next request when the last one ends"
    if wl.rate is not None:
        return f"open loop: {wl.rate} requests/s arrivals"
    return "not stated in the plan"


def assumptions_table(view: PlanView) -> Table:
    """Inputs the prediction rests on: workload, SLO, load model, engine settings, stated assumptions."""
    pairs: dict[str, Any] = {"load model": load_model_line(view)}
    pairs.update(workload_pairs(view))
    for key, value in view.raw.items():
        if key not in _TOP_CONSUMED and not isinstance(value, Mapping | list):
            pairs[key] = value
    stated = view.raw.get("assumptions")
    if isinstance(stated, Mapping):
        pairs.update({f"assumptions.{k}": v for k, v in flatten(stated).items()})
    elif isinstance(stated, list):
        pairs.update({f"assumption {i + 1}": a for i, a in enumerate(stated)})
    dep = view.best.deployment
    for role in ("agg", "prefill", "decode"):
        worker = dep.get(role)
        if isinstance(worker, Mapping):
            pairs.update({f"{role}.{k}": v for k, v in flatten(worker).items()})
    for key in ("max_model_len", "cuda_graph_max_batch"):
        if key in dep:
            pairs[key] = dep[key]
    return kv_table("Assumptions", pairs)


def provenance_table(view: PlanView) -> Table:
    """Where each predicted number came from (measured table, interpolation, fitted, roofline)."""
    pairs: dict[str, Any] = {}
    prov = view.best.predicted.get("provenance")
    if isinstance(prov, Mapping):
        pairs.update(flatten(prov))
    elif prov is not None:
        pairs["predicted"] = prov
    top = view.raw.get("provenance")
    if isinstance(top, Mapping):
        pairs.update({f"plan.{k}": v for k, v in flatten(top).items()})
    for role, mem in memory_roles(view).items():
        if "source" in mem:
            pairs[f"memory ({role})"] = mem["source"]
    note = "" if pairs else "the plan states no provenance"
    return Table("Provenance", ("Item", "Source"), tuple(pairs.items()), note)


SHEETS = ("Summary", "Pareto", "Candidates", "Latency breakdown", "Memory breakdown", "Assumptions", "Provenance")


def sheet_tables(view: PlanView) -> dict[str, list[Table]]:
    """Every sheet of the report and the tables on it, in order."""
    return {
        "Summary": summary_tables(view),
        "Pareto": [pareto_table(view)],
        "Candidates": [candidates_table(view)],
        "Latency breakdown": [latency_table(view)],
        "Memory breakdown": [memory_table(view), *memory_detail(view)],
        "Assumptions": [assumptions_table(view)],
        "Provenance": [provenance_table(view)],
    }
