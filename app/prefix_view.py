"""Traffic page, prefix caching: for a trace with KV block ids (Mooncake ``hash_ids``, ours, or
generated agent sessions), the hit rate each KV tier set reaches and the GPUs it needs
(``solvers.prefix_tiers.prefix_capacity``, what ``planner capacity`` prints)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from planner.reports import present
from solvers.prefix_tiers import DEFAULT_HOST_KV_GIB, PrefixRequest

TIERS = ("hbm", "host", "ssd")
TIER_NAMES = {"hbm": "HBM", "host": "host memory", "ssd": "SSD"}
POLICIES = ("prefix", "round-robin", "session")


def prefix_input(number: Any) -> PrefixRequest:
    """KV tiers per GPU beyond HBM and the routing policy (``number`` draws a checked field)."""
    c1, c2 = st.columns(2)
    host = number(c1, "host_kv", "Host memory for KV (GiB per GPU)", DEFAULT_HOST_KV_GIB)
    ssd = number(c2, "ssd_kv", "SSD for KV (GiB per GPU)", 0.0)
    routing = st.selectbox("Routing", POLICIES, key="traffic_routing")
    return PrefixRequest(host_kv_gib=host, ssd_kv_gib=ssd, routing=routing)


def _tiers(s: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {t["tier"]: t for t in (s.get("cache") or {}).get("tiers", ())}


def scenario_frame(pc: Mapping[str, Any], pct: str) -> pd.DataFrame:
    """One row per tier set: KV capacity per GPU, hit rate per tier, and the fleet it needs."""
    rows = []
    for s in pc["scenarios"]:
        tiers = _tiers(s)
        gib = sum(float(t["gib_per_gpu"]) for t in tiers.values())
        rows.append(
            {
                "KV tiers": " + ".join(TIER_NAMES[t] for t in tiers) or "no prefix cache",
                "KV capacity per GPU (GiB)": present.num(gib) if tiers else "-",
                **{
                    f"Hit from {TIER_NAMES[t]} (%)": present.pct(tiers[t]["hit_rate"])
                    if t in tiers
                    else "-"
                    for t in TIERS
                },
                "Hit rate priced (%)": present.pct(s["prefix_hit"]),
                f"Load time {pct} (ms)": present.num(s["prefix_load_ms"]),
                "Replicas at the peak": present.count(s["replicas_peak"]),
                "GPUs (most at once)": present.count(s["gpus_max"]),
                "GPU-hours (autoscaled)": present.num(s["gpu_hours_autoscaled"]),
                "Cost ($, autoscaled)": present.num(s["cost_autoscaled_usd"]),
                "Windows missing the SLO": present.count(s["windows_violating"]),
            }
        )
    return pd.DataFrame(rows)


def hit_chart(pc: Mapping[str, Any]) -> go.Figure:
    """Hit rate against the KV capacity per GPU of each tier set, labelled with its GPUs."""
    pts = []
    for s in pc["scenarios"]:
        tiers = _tiers(s)
        gib = sum(float(t["gib_per_gpu"]) for t in tiers.values())
        pts.append((gib, 100.0 * float(s["prefix_hit"]), s["gpus_max"], s["name"]))
    fig = go.Figure(
        go.Scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines+markers+text",
            text=[f"{p[2]} GPUs" for p in pts],
            textposition="top center",
            customdata=[p[3] for p in pts],
            hovertemplate="%{customdata}: %{x:.4g} GiB per GPU, hit %{y:.3g}%<extra></extra>",
        )
    )
    fig.update_layout(
        xaxis={"title": "KV capacity per GPU (GiB, all tiers)", "tickformat": ",.3~s"},
        yaxis={"title": "prompt tokens served from cache (%)", "range": [0, 105]},
        height=320,
        margin={"t": 20},
    )
    return fig


def show_prefix(cap: Mapping[str, Any]) -> None:
    """The section, when the answer priced prefix caching."""
    pc = cap.get("prefix_cache")
    if not isinstance(pc, Mapping) or "scenarios" not in pc:
        return
    pct = str(cap["slo"]["percentile"])
    st.markdown(f"##### Prefix caching: hit rate against KV capacity (routing {pc['routing']})")
    with st.container(key="traffic_prefix"):
        st.dataframe(scenario_frame(pc, pct), hide_index=True, key="traffic_prefix_table")
    st.plotly_chart(hit_chart(pc), key="traffic_prefix_chart")
    rates = ", ".join(f"{k} {present.pct(v)}" for k, v in pc["routing_hit_rates"].items())
    st.caption(
        f"Hit share of prompt tokens by routing on the last row's replicas: {rates}. The sizing "
        f"above is the last row's. {pc['method']}"
    )
