"""Latency and memory breakdown tables (one column group per role: agg, prefill, decode...)."""

from __future__ import annotations

from collections.abc import Mapping

from planner.reports.plan_view import PlanView, as_float, flatten
from planner.reports.present import kind_of, label, step_name
from planner.reports.table import Table, kv_table

GB = 1e9
SHARE_SUM_TOL = 0.02
"""Numbers of a breakdown summing to 1 within this are shares; otherwise they are milliseconds."""
_MEMORY_PARTS = (
    ("weights", "weights_bytes_per_gpu"),
    ("activations", "activation_bytes_per_gpu"),
    ("reserved (context, graphs, buffers)", "reserved_bytes_per_gpu"),
    ("KV cache", "kv_budget_bytes_per_gpu"),
)


def _is_leaf_breakdown(m: Mapping[str, object]) -> bool:
    return all(not isinstance(v, Mapping) or "share" in v or "ms" in v for v in m.values())


def breakdown_roles(obj: object) -> dict[str, dict[str, tuple[float | None, float | None]]]:
    """``{role: {op kind: (share, ms)}}`` from the plan's ``step_breakdown``.

    Accepts ``{op: share}``, ``{op: ms}``, ``{op: {"share", "ms"}}`` or any of them keyed by role
    (``{"decode_step_ms": {op: ms}}``); shares are computed from milliseconds when only those are
    given.
    """
    if not isinstance(obj, Mapping) or not obj:
        return {}
    roles = (
        {"all": obj}
        if _is_leaf_breakdown(obj)
        else {str(k): v for k, v in obj.items() if isinstance(v, Mapping) and _is_leaf_breakdown(v)}
    )
    out = {}
    for role, bd in roles.items():
        pairs = {str(op): _share_ms(v) for op, v in bd.items()}
        nums = [s for s, _ in pairs.values() if s is not None]
        if role.endswith("ms") or (nums and abs(sum(nums) - 1.0) > SHARE_SUM_TOL):
            total = sum(nums)
            pairs = {
                op: (s / total if s is not None and total else None, s)
                for op, (s, _) in pairs.items()
            }
        out[role] = pairs
    return out


def _share_ms(value: object) -> tuple[float | None, float | None]:
    if isinstance(value, Mapping):
        ms = value.get("ms", value.get("time_ms"))
        return as_float(value.get("share", value.get("fraction"))), as_float(ms)
    return as_float(value), None


def latency_table(view: PlanView) -> Table:
    """Time of each op kind in each step the plan reports (long form; no op kind without time)."""
    roles = breakdown_roles(view.best.predicted.get("step_breakdown"))
    rows = []
    for role, bd in roles.items():
        for op, (share, ms) in bd.items():
            if (share or 0) > 0 or (ms or 0) > 0:
                rows.append((step_name(role), op, ms, share))
    has_ms = any(r[2] is not None for r in rows)
    cols: tuple[str, ...] = ("Step", "Op kind", "Time (ms)", "Share of step (%)")
    short = [(s, o, sh) for s, o, _, sh in rows]
    body: tuple[tuple[object, ...], ...] = tuple(rows if has_ms else short)
    cols = cols if has_ms else (cols[0], cols[1], cols[3])
    note = "" if rows else "the plan has no step breakdown"
    return Table(
        "Step time per op kind",
        cols,
        body,
        note,
        {"Step": "text", "Op kind": "text", "Share of step (%)": "pct"},
    )


def memory_roles(view: PlanView) -> dict[str, Mapping[str, object]]:
    """Memory plan per role ('all' when the plan holds a single one)."""
    mem = view.best.predicted.get("memory")
    if not isinstance(mem, Mapping) or not mem:
        return {}
    if "weights_bytes_per_gpu" in mem:
        return {"all": mem}
    return {
        str(k): v for k, v in mem.items() if isinstance(v, Mapping) and "weights_bytes_per_gpu" in v
    }


def _part_bytes(mem: Mapping[str, object], key: str) -> float | None:
    if key:
        return as_float(mem.get(key))
    device = as_float(mem.get("gpu_memory_bytes"))
    budget = as_float(mem.get("budget_bytes_per_gpu"))
    return device - budget if device is not None and budget is not None else None


def memory_table(view: PlanView) -> Table:
    """Per-GPU memory split: weights, activations, reserve, KV cache, unused headroom."""
    roles = memory_roles(view)
    tags = ["" if role == "all" else f", {role}" for role in roles]
    # GB columns side by side, then shares: the chart reads the GB block as one range
    columns = [
        "Component",
        *(f"Memory per GPU{t} (GB)" for t in tags),
        *(f"Share of device memory{t} (%)" for t in tags),
    ]
    rows = []
    for part, key in (*_MEMORY_PARTS, ("unused (outside the engine's memory share)", "")):
        gbs: list[float | None] = []
        shares: list[float | None] = []
        for mem in roles.values():
            device, val = as_float(mem.get("gpu_memory_bytes")), _part_bytes(mem, key)
            gbs.append(None if val is None else val / GB)
            shares.append(None if val is None or not device else val / device)
        rows.append((part, *gbs, *shares))
    note = "" if roles else "the plan has no memory plan"
    fmts = {c: ("pct" if c.startswith("Share") else "num") for c in columns[1:]}
    fmts["Component"] = "text"
    return Table("Memory per GPU", tuple(columns), tuple(rows) if roles else (), note, fmts)


def memory_detail(view: PlanView) -> list[Table]:
    """Every field of each role's memory plan, named with its unit (bytes converted to GB)."""
    out = []
    for role, mem in memory_roles(view).items():
        flat = {k: v for k, v in flatten(mem).items() if k != "source"}
        gb = {k for k in flat if kind_of(k) == "gb"}
        pairs = {
            label(k): (v / GB if k in gb and isinstance(v, int | float) else v)
            for k, v in flat.items()
        }
        kinds = {label(k): ("num" if k in gb else kind_of(k)) for k in flat}
        out.append(kv_table(f"Memory plan ({role})", pairs, kinds=kinds))
    return out
