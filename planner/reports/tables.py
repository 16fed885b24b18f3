"""The report's tables, built once from a plan and rendered by the xlsx and HTML writers.

Cells keep the plan's exact values; columns are named for people (``planner.reports.present.label``:
unit and percentile) and carry a display kind, so each writer rounds the same way (4 significant
figures, exact counts, % for shares, GB for memory). The Summary is a short human table; the
details follow on the other sheets; candidates appear in one table.
"""

from __future__ import annotations

from collections.abc import Mapping

from planner.reports import present as pr
from planner.reports.breakdowns import latency_table, memory_detail, memory_table
from planner.reports.plan_view import PlanView, as_float, flat_rows, pick, section
from planner.reports.table import Table, kv_table

PER_GPU = "output_tok_s_per_gpu"
PER_USER = "output_tok_s_per_user"
PER_GPU_LABEL, PER_USER_LABEL = pr.label(PER_GPU), pr.label(PER_USER)
SHEETS = (
    "Summary",
    "Pareto",
    "Candidates",
    "Latency breakdown",
    "Memory breakdown",
    "Power and energy",
    "Assumptions",
    "Provenance",
)
_CANDIDATE_KEYS = (
    "rank",
    "mode",
    "gpu",
    "gpus",
    "ttft_ms",
    "tpot_ms",
    PER_GPU,
    PER_USER,
    "requests_per_s",
    "cost_per_million_output_tokens",
    "cost_per_million_total_tokens",
    "cost_per_hour_usd",
    "clients_per_worker",
    "pareto",
    "config",
)


def _pct(view: PlanView) -> str:
    return str(view.slo.get("percentile", "p90"))


def _stat(stats: object, which: str) -> float | None:
    return as_float(stats.get(which)) if isinstance(stats, Mapping) else as_float(stats)


def band_text(stats: object, which: str, band: object = None) -> str | None:
    """The prediction band of one percentile ('700-1,250'), None while the plan carries none.

    Issue 17 adds ``{"band": {"level", "<stat>": {"lo", "hi"}}}`` to ``ttft_ms`` / ``tpot_ms``.
    """
    if band is None:
        band = stats.get("band") if isinstance(stats, Mapping) else None
    one = band.get(which) if isinstance(band, Mapping) else None
    if not isinstance(one, Mapping):
        return None
    return f"{pr.num(one.get('lo'))}-{pr.num(one.get('hi'))}"


def headline(view: PlanView) -> dict[str, object]:
    """Raw headline numbers of the recommendation (the Pareto chart's star reads these)."""
    pred = view.best.predicted
    return {PER_GPU: pred.get(PER_GPU), PER_USER: pred.get(PER_USER)}


def deploy_table(view: PlanView) -> Table:
    """What to deploy, in words."""
    gpus, asked = view.best.gpus, view.raw.get("per_gpu_type") or [view.gpu]
    names = asked if isinstance(asked, Mapping | list) else [view.gpu]
    binding = section(view.raw, "binding").get("sentence") or view.binding_constraint
    pre_gpu = view.best.deployment.get("prefill_gpu")  # roles on two GPU types
    pairs: dict[str, object] = {
        "Model": view.model,
        "GPUs": gpus,
        "GPU type": pr.gpu_name(f"{pre_gpu}+{view.gpu}" if pre_gpu else view.gpu),
        # per_gpu_type also holds prefill/decode pairs (``prefill+decode`` keys)
        "GPU types asked for": ", ".join(pr.gpu_name(str(g)) for g in names if "+" not in g),
        "Configuration": pr.config_sentence(view.best.deployment, gpus),
        "Binding constraint": binding,
        "Objective": view.raw.get("objective", "-"),
    }
    role_types = section(view.raw, "role_types").get("sentence")
    if role_types:
        pairs["Prefill and decode on two GPU types"] = role_types
    kinds = {k: "text" for k in pairs} | {"GPUs": "count"}
    return kv_table("What to deploy", pairs, kinds=kinds)


def predictions_table(view: PlanView) -> Table:
    """Predicted latency and throughput against the SLOs, with headroom (and bands when present)."""
    pred, slo, pct = view.best.predicted, view.slo, _pct(view)
    rows: list[tuple[object, ...]] = []
    for key in ("ttft_ms", "tpot_ms"):
        stats, limit = pred.get(key), as_float(slo.get(key))
        for which in dict.fromkeys((pct, "mean")):
            value = _stat(stats, which)
            room = 1 - value / limit if value is not None and limit and which == pct else None
            rows.append(
                (
                    pr.label(key, which),
                    value,
                    limit if which == pct else None,
                    room,
                    band_text(stats, which, pred.get(f"{key}_band")),
                )
            )
    for key in (PER_GPU, PER_USER, "requests_per_s"):
        rows.append((pr.label(key), as_float(pred.get(key)), None, None, None))
    has_band = any(r[4] for r in rows)
    cols = ("Quantity", "Predicted", "SLO", "Headroom (%)") + (("Band",) if has_band else ())
    body = tuple(r if has_band else r[:4] for r in rows)
    note = "" if has_band else "prediction bands: not computed by this version of the planner"
    return Table(
        "Predictions", cols, body, note, {"Quantity": "text", "Headroom (%)": "pct", "Band": "text"}
    )


def cost_table(view: PlanView) -> Table:
    """Cost of the recommendation."""
    best = section(view.raw, "best")
    pairs = {
        pr.label("cost_per_million_output_tokens"): best.get("cost_per_million_output_tokens"),
        pr.label("cost_per_hour_usd"): best.get("cost_per_hour_usd"),
        "GPUs": view.best.gpus,
    }
    kinds = dict.fromkeys(pairs, "money") | {"GPUs": "count"}
    return kv_table("Cost", pairs, kinds=kinds)


POWER_KEYS = (
    "avg_power_w_per_gpu",
    "deployment_kw",
    "j_per_output_token",
    "j_per_total_token",
    "idle_power_w_per_gpu",
    "board_limit_w",
    "clock_ratio",
    "facility_kw",
    "kwh_per_day",
    "energy_cost_usd_per_day",
    "gpu_cost_usd_per_hour",
    "total_cost_usd_per_hour",
    "electricity_price_usd_per_kwh",
    "pue",
)
"""Rows of the power table, in order (the plan's ``best.power``, planner.perf.power)."""


def power_tables(view: PlanView) -> list[Table]:
    """Board power and energy of the recommendation at its load, and where each number came
    from; a note alone for a plan without."""
    power = section(section(view.raw, "best"), "power")
    title = "Power and energy of the recommendation (GPU boards)"
    if not power:
        return [kv_table(title, {}, "the plan states no power (planned before power was priced)")]
    pairs = {pr.label(k): power.get(k) for k in POWER_KEYS}
    kinds = {pr.label(k): pr.kind_of(k) for k in POWER_KEYS}
    prov = section(power, "provenance")
    sources = kv_table("Sources", dict(prov), kinds=dict.fromkeys(prov, "text"))
    return [kv_table(title, pairs, "docs/energy.md", kinds), sources]


def headroom_table(view: PlanView) -> Table:
    """Every limit of the recommendation: predicted value, limit, headroom."""
    found = section(view.raw, "binding").get("headroom") or []
    items = found if isinstance(found, list) else []
    keys = ("limit_name", "value", "limit", "unit", "headroom")
    rows = tuple(tuple(h.get(k) for k in keys) for h in items if isinstance(h, Mapping))
    note = "" if rows else "the plan states no headroom"
    cols = ("Limit", "Value", "Limit value", "Unit", "Headroom (%)")
    return Table(
        "Headroom per limit",
        cols,
        rows,
        note,
        {"Limit": "text", "Unit": "text", "Headroom (%)": "pct"},
    )


def deployment_parts(view: PlanView) -> Table:
    """The deployment's parts, one row per worker role (all text)."""
    cols, rows = pr.config_table(view.best.deployment)
    return Table("Deployment", cols, tuple(rows), "", dict.fromkeys(cols, "text"))


def summary_tables(view: PlanView) -> list[Table]:
    """Summary sheet: what to deploy, predictions vs SLOs, cost, headroom, deployment parts."""
    return [
        deploy_table(view),
        predictions_table(view),
        cost_table(view),
        headroom_table(view),
        deployment_parts(view),
    ]


def _choice_pairs(alt: object, pct: str) -> dict[str, object]:
    if not isinstance(alt, Mapping):
        return {"Configuration": "none meets the SLOs"}
    pred = alt.get("predicted") if isinstance(alt.get("predicted"), Mapping) else {}
    assert isinstance(pred, Mapping)
    dep = alt.get("deployment") if isinstance(alt.get("deployment"), Mapping) else {}
    assert isinstance(dep, Mapping)
    return {
        "Configuration": pr.config_sentence(dep, alt.get("gpus")),
        "GPUs": alt.get("gpus"),
        pr.label("ttft_ms", pct): _stat(pred.get("ttft_ms"), pct),
        pr.label("tpot_ms", pct): _stat(pred.get("tpot_ms"), pct),
        PER_GPU_LABEL: as_float(pred.get(PER_GPU)),
        PER_USER_LABEL: as_float(pred.get(PER_USER)),
        pr.label("cost_per_million_output_tokens"): alt.get("cost_per_million_output_tokens"),
    }


def alternatives_table(view: PlanView) -> Table | None:
    """Best aggregated vs best disaggregated, side by side."""
    if not view.alternatives:
        return None
    pct = _pct(view)
    names = list(view.alternatives)
    flats = {n: _choice_pairs(a, pct) for n, a in view.alternatives.items()}
    keys = list(dict.fromkeys(k for f in flats.values() for k in f))
    rows = tuple((k, *(flats[n].get(k) for n in names)) for k in keys)
    kinds = tuple(
        "text"
        if k == "Configuration"
        else "count"
        if k == "GPUs"
        else "money"
        if k.startswith("Cost")
        else "num"
        for k in keys
    )
    cols = ("Item", *(pr.MODE_WORDS.get(n, n) for n in names))
    return Table("Best plan of each mode", cols, rows, "", {"Item": "text"}, kinds)


def per_gpu_table(view: PlanView) -> Table | None:
    """For each GPU type asked for: its best plan by the objective side by side (GPUs, $/hour,
    $/1M total tokens, what binds it), the recommended one marked, or the reason it has none."""
    per = view.raw.get("per_gpu_type")
    if not isinstance(per, Mapping) or not per:
        return None
    pct = _pct(view)
    rows = []
    for gpu, entry in per.items():
        entry = entry if isinstance(entry, Mapping) else {}
        best = entry.get("best")
        bind = entry.get("binding")
        if isinstance(best, Mapping):
            rows.append(
                (
                    pr.gpu_name(gpu),
                    "yes" if entry.get("chosen") else "no",
                    best.get("gpus"),
                    best.get("cost_per_hour_usd"),
                    best.get("cost_per_million_total_tokens"),
                    best.get(f"ttft_{pct}_ms"),
                    best.get(f"tpot_{pct}_ms"),
                    best.get(PER_GPU),
                    bind.get("sentence") if isinstance(bind, Mapping) else "-",
                )
            )
        else:
            rows.append(
                (pr.gpu_name(gpu), "no", None, None, None, None, None, None, entry.get("reason"))
            )
    cols = (
        "GPU type",
        "Recommended",
        "GPUs",
        pr.label("cost_per_hour_usd"),
        pr.label("cost_per_million_total_tokens"),
        pr.label("ttft_ms", pct),
        pr.label("tpot_ms", pct),
        PER_GPU_LABEL,
        "What binds it, or why it has no plan",
    )
    fmts = {
        "GPU type": "text",
        "Recommended": "text",
        "GPUs": "count",
        cols[3]: "money",
        cols[4]: "money",
        cols[-1]: "text",
    }
    return Table("Each GPU type asked for", cols, tuple(rows), "", fmts)


def candidate_rows(view: PlanView) -> list[dict[str, object]]:
    """Top candidates (best first) plus Pareto points not among them; latency keys without the
    percentile (``ttft_ms``), as the Pareto points name them."""
    pct = _pct(view)
    rows = []
    for rank, c in enumerate(view.candidates, start=1):
        r = {k.replace(f"_{pct}_ms", "_ms"): v for k, v in c.items()}
        rows.append({"rank": rank, **r})
    seen = {(r.get("config"), r.get("gpu")) for r in rows}
    for p in flat_rows(view.pareto):
        if (p.get("config"), p.get("gpu")) not in seen:
            rows.append({**p, "rank": None, "pareto": True})
    return rows


def candidates_table(view: PlanView) -> Table:
    """One table of candidates: the top ones by the objective and every Pareto point."""
    rows, pct = candidate_rows(view), _pct(view)
    keys = [k for k in _CANDIDATE_KEYS if any(r.get(k) is not None for r in rows)]
    cols = tuple(pr.label(k, pct) for k in keys)
    body = tuple(tuple(r.get(k) for k in keys) for r in rows)
    kept = len(view.candidates)
    total = pr.count(view.candidates_evaluated) if view.candidates_evaluated else "all"
    note = (
        f"the {kept} best of {total} candidates evaluated, best first, and every Pareto point"
        if kept
        else "the plan keeps only its Pareto front"
    )
    fmts = {pr.label(k, pct): pr.kind_of(k) for k in keys}
    return Table("Candidates", cols, body, note, fmts)


def pareto_table(view: PlanView) -> Table:
    """Where the Pareto chart's points are: the candidates table (one table, not a copy)."""
    return candidates_table(view)


def metric_xy(row: Mapping[str, object]) -> tuple[float | None, float | None]:
    """(tokens/s per user, tokens/s per GPU) of a raw flat row, None where missing."""
    return as_float(pick(row, PER_USER)), as_float(pick(row, PER_GPU))


def load_model_line(view: PlanView) -> str:
    """How the load was modelled, in words."""
    wl = view.workload
    load = section(view.raw, "workload").get("load")
    if load == "rate" or (load is None and wl.concurrency is None and wl.rate is not None):
        return f"open loop: {pr.num(wl.rate)} requests/s (Poisson arrivals)"
    if load in (None, "concurrency") and wl.concurrency is not None:
        return (
            f"closed loop: {pr.count(wl.concurrency)} clients, each sends its next request "
            "when the last one ends"
        )
    if load is not None:
        return (
            f"the planner chose the load: {pr.count(wl.concurrency)} closed-loop clients, "
            f"{pr.num(wl.rate)} requests/s"
        )
    return "not stated in the plan"


def assumptions_table(view: PlanView) -> Table:
    """Inputs the prediction rests on: workload, SLOs, load model, engine settings, assumptions."""
    pct, dep = _pct(view), view.best.deployment
    pairs: dict[str, object] = {
        "Load model": load_model_line(view),
        pr.label("isl"): view.workload.isl,
        pr.label("osl"): view.workload.osl,
        f"TTFT SLO {pct} (ms)": view.slo.get("ttft_ms"),
        f"TPOT SLO {pct} (ms)": view.slo.get("tpot_ms"),
        "GPU budget (GPUs)": view.raw.get("max_gpus") or None,
        pr.label("max_model_len"): dep.get("max_model_len"),
        "CUDA-graph max batch": dep.get("cuda_graph_max_batch"),
        "Objective": view.raw.get("objective"),
    }
    stated = view.raw.get("assumptions")
    if isinstance(stated, list):
        pairs.update({f"Assumption {i + 1}": a for i, a in enumerate(stated)})
    pairs = {k: v for k, v in pairs.items() if v is not None}
    kinds = {
        k: ("text" if isinstance(v, str) else "count" if isinstance(v, int) else "num")
        for k, v in pairs.items()
    }
    return kv_table("Assumptions", pairs, kinds=kinds)


def provenance_table(view: PlanView) -> Table:
    """Where each predicted number came from (measured table, interpolation, fitted, roofline)."""
    pairs: dict[str, object] = {}
    prov = view.best.predicted.get("provenance")
    if isinstance(prov, Mapping):
        pairs.update({k.replace("_", " ").capitalize(): str(v) for k, v in prov.items()})
    elif prov is not None:
        pairs["Predicted"] = str(prov)
    mem = view.best.predicted.get("memory")
    if isinstance(mem, Mapping):
        for role, m in mem.items() if "source" not in mem else [("all", mem)]:
            if isinstance(m, Mapping) and "source" in m:
                pairs[f"Memory ({role})"] = m["source"]
    note = "" if pairs else "the plan states no provenance"
    return Table(
        "Provenance",
        ("Item", "Source"),
        tuple(pairs.items()),
        note,
        {"Item": "text", "Source": "text"},
    )


def sheet_tables(view: PlanView) -> dict[str, list[Table]]:
    """Every sheet of the report and its tables, in order (the Pareto sheet holds its chart)."""
    extra = [t for t in (per_gpu_table(view), alternatives_table(view)) if t is not None]
    return {
        "Summary": summary_tables(view),
        "Pareto": [],
        "Candidates": [candidates_table(view), *extra],
        "Latency breakdown": [latency_table(view)],
        "Memory breakdown": [memory_table(view), *memory_detail(view)],
        "Power and energy": power_tables(view),
        "Assumptions": [assumptions_table(view)],
        "Provenance": [provenance_table(view)],
    }
