"""The report's tables, built once from a plan and rendered by the xlsx, HTML and CSV writers.

Values are kept exactly as the plan holds them (no rounding); display formats are the writers' job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.reports.breakdowns import latency_table, memory_detail, memory_roles, memory_table
from planner.reports.plan_view import PlanView, as_float, flat_rows, flatten, pick
from planner.reports.table import Table, kv_table, rows_table

PER_GPU = "output_tok_s_per_gpu"
PER_USER = "output_tok_s_per_user"
_PCT = ("mean", "p50", "p90", "p99")
SHEETS = ("Summary", "Pareto", "Candidates", "Latency breakdown", "Memory breakdown", "Assumptions", "Provenance")
_HEADLINE_PREDICTIONS = ("ttft_ms", "tpot_ms", PER_GPU, PER_USER, "requests_per_s")
_NOT_SCALAR_PREDICTIONS = ("step_breakdown", "memory", "provenance")
_TOP_CONSUMED = {
    "model", "gpu", "workload", "slo", "best", "pareto", "candidates", "binding_constraint",
    "candidates_evaluated", "search_seconds", "alternatives", "assumptions", "provenance",
}


def choice_summary(choice: Mapping[str, Any]) -> dict[str, Any]:
    """One deployment choice (the best, or an alternative) as headline pairs."""
    dep = choice.get("deployment") if isinstance(choice.get("deployment"), Mapping) else {}
    pred = choice.get("predicted") if isinstance(choice.get("predicted"), Mapping) else {}
    assert isinstance(dep, Mapping) and isinstance(pred, Mapping)
    out: dict[str, Any] = {
        "mode": choice.get("mode", dep.get("mode")),
        "GPUs": choice.get("gpus"),
        "cost per 1M output tokens ($)": choice.get("cost_per_million_output_tokens"),
    }
    if "cost_per_hour_usd" in choice:
        out["cost per hour ($)"] = choice["cost_per_hour_usd"]
    for metric in ("ttft_ms", "tpot_ms"):
        stats = pred.get(metric)
        if isinstance(stats, Mapping):
            out.update({f"{metric} {p}": stats[p] for p in _PCT if p in stats})
        elif stats is not None:
            out[metric] = stats
        band = pred.get(f"{metric}_band")  # the calibrated prediction band (planner.bands)
        if isinstance(band, Mapping) and isinstance(band.get("level"), float):
            name = f"{band['level']:.0%} band"
            out.update({f"{metric} {p} {name}": f"{band[p]['lo']:.4g}-{band[p]['hi']:.4g}"
                        for p in _PCT if isinstance(band.get(p), Mapping)})
    for key in _HEADLINE_PREDICTIONS[2:]:
        out[key] = pred.get(key)
    return out


def headline(view: PlanView) -> dict[str, Any]:
    """The recommendation in one block: hardware, predicted latency and throughput, cost."""
    best = view.raw.get("best")
    assert isinstance(best, Mapping)
    out: dict[str, Any] = {"model": view.model, "gpu": view.gpu}
    out.update(choice_summary(best))
    out["binding constraint"] = view.binding_constraint
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
    skip = set(_HEADLINE_PREDICTIONS) | set(_NOT_SCALAR_PREDICTIONS)
    skip |= {"ttft_ms_band", "tpot_ms_band"}  # in the headline block
    return flatten({k: v for k, v in view.best.predicted.items() if k not in skip})


def _deployment_pairs(dep: Mapping[str, Any]) -> dict[str, Any]:
    """A deployment flattened, without the roles it does not use (null)."""
    return {k: v for k, v in flatten(dep).items() if v is not None}


def summary_tables(view: PlanView) -> list[Table]:
    """Summary sheet: recommendation, other predictions, workload/SLO, deployment, alternatives."""
    tables = [kv_table("Recommendation", headline(view))]
    other = _other_predictions(view)
    if other:
        tables.append(kv_table("Other predictions", other))
    tables.append(kv_table("Workload and SLO", workload_pairs(view)))
    tables.append(kv_table("Deployment", _deployment_pairs(view.best.deployment)))
    alts = alternatives_table(view)
    if alts is not None:
        tables.append(alts)
    return tables


def _alternative_pairs(alt: Any) -> dict[str, Any]:
    if alt is None:
        return {"mode": "none meets the SLOs"}
    if not isinstance(alt, Mapping):
        return {"result": alt}
    if "predicted" not in alt and "deployment" not in alt:
        return flatten(alt)
    dep = alt.get("deployment")
    return {**choice_summary(alt), **(_deployment_pairs(dep) if isinstance(dep, Mapping) else {})}


def alternatives_table(view: PlanView) -> Table | None:
    """Best aggregated vs best disaggregated (whatever alternatives the plan lists), side by side."""
    if not view.alternatives:
        return None
    names = list(view.alternatives)
    flats = {n: _alternative_pairs(a) for n, a in view.alternatives.items()}
    keys: list[str] = []
    for flat in flats.values():
        keys.extend(k for k in flat if k not in keys)
    rows = tuple((k, *(flats[n].get(k) for n in names)) for k in keys)
    return Table("Alternatives (best of each mode)", ("Item", *names), rows)


def _with_formats(table: Table) -> Table:
    fmts = {c: "pct" for c in table.columns if "share" in c or "fraction" in c or "utilization" in c}
    return Table(table.title, table.columns, table.rows, table.note, fmts)


def pareto_table(view: PlanView) -> Table:
    """The Pareto front of output tokens/s per GPU vs per user, one row per configuration."""
    rows = flat_rows(view.pareto)
    note = "" if rows else "the plan lists no Pareto front"
    return _with_formats(rows_table("Pareto front", rows, note))


def candidates_table(view: PlanView) -> Table:
    """Every evaluated candidate the plan kept (falls back to the Pareto front when it kept none)."""
    if view.candidates:
        return _with_formats(rows_table("Candidates", flat_rows(view.candidates)))
    note = (f"the plan keeps only its Pareto front of the {view.candidates_evaluated or 'all'} candidates "
            "evaluated; shown here")
    return _with_formats(rows_table("Candidates", flat_rows(view.pareto), note))


def metric_xy(row: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(tokens/s per user, tokens/s per GPU) of a flat row, None where missing."""
    return as_float(pick(row, PER_USER)), as_float(pick(row, PER_GPU))


def load_model_line(view: PlanView) -> str:
    """How the load was modelled, in words."""
    wl = view.workload
    load = view.raw.get("workload", {}).get("load")
    closed = f"closed loop: {wl.concurrency} clients, each sends its next request when the last one ends"
    opened = f"open loop: {wl.rate} requests/s arrivals"
    if load == "rate" or (load is None and wl.concurrency is None and wl.rate is not None):
        return opened
    if load in (None, "concurrency") and wl.concurrency is not None:
        return closed
    if load is not None:
        return (f"{load}: the planner chose the load ({wl.concurrency} closed-loop clients, "
                f"{wl.rate} requests/s)")
    return "not stated in the plan"


def assumptions_table(view: PlanView) -> Table:
    """Inputs the prediction rests on: workload, SLO, load model, engine settings, stated assumptions."""
    pairs: dict[str, Any] = {"load model": load_model_line(view)}
    pairs.update(workload_pairs(view))
    for key, value in view.raw.items():
        if key in _TOP_CONSUMED or isinstance(value, list):
            continue
        pairs.update({f"{key}.{k}": v for k, v in flatten(value).items()} if isinstance(value, Mapping)
                     else {key: value})
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
