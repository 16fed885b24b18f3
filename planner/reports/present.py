"""The one presentation layer for people: names with units and percentile, rounding, sentences.

Every human-facing output (the web UI, the text CLI, PLAN.md, the xlsx display formats and the HTML
report) names a quantity with :func:`label` and prints it with :func:`num` / :func:`show`; JSON and
CSV keep full precision and use :func:`machine_name` (``ttft_p90_ms``). Rules:

- measured or predicted quantities: 4 significant figures at most (``2,932``, ``28.49``,
  ``0.1234``), never scientific notation;
- counts, sizes and GPUs: exact integers with thousands separators;
- shares: percent with one decimal; memory: GB (1e9 bytes); money: dollars.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

from hardware.catalog import all_gpus
from planner.errors import PlannerInputError
from planner.quantities import SIG_FIGS as SIG_FIGS
from planner.quantities import count as count
from planner.quantities import finite as _finite
from planner.quantities import ms as ms
from planner.quantities import num as num

GB = 1e9
PERCENTILES = ("mean", "p50", "p90", "p99")

_LATENCY = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL"}
"""Latency keys: their label carries the percentile (``TTFT p90 (ms)``)."""
_LABELS: dict[str, str] = {
    "output_tok_s_per_gpu": "Output tokens/s per GPU",
    "output_tok_s_per_user": "Output tokens/s per user",
    "requests_per_s": "Requests/s",
    "rate": "Request rate (requests/s)",
    "requests_per_s_per_replica": "Requests/s per replica",
    "rate_per_s": "Request rate (requests/s)",
    "running_requests_per_worker": "Running requests per worker (mean)",
    "kv_transfer_ms": "KV transfer (ms)",
    "prefill_utilization": "Prefill utilization (%)",
    "cost_per_million_output_tokens": "Cost per 1M output tokens ($)",
    "cost_per_million_total_tokens": "Cost per 1M total tokens, input + output ($)",
    "cost_per_hour_usd": "Cost per hour ($)",
    "price_per_gpu_hour": "Price per GPU-hour ($)",
    "avg_power_w_per_gpu": "Average board power per GPU (W)",
    "idle_power_w_per_gpu": "Idle board power per GPU (W)",
    "board_limit_w": "Board power limit per GPU (W)",
    "deployment_kw": "Board power of the deployment (kW)",
    "facility_kw": "Facility power, x PUE (kW)",
    "j_per_output_token": "Energy per output token (J)",
    "j_per_total_token": "Energy per total token, input + output (J)",
    "kwh_per_day": "Facility energy per day (kWh)",
    "energy_cost_usd_per_day": "Energy cost per day ($)",
    "gpu_cost_usd_per_hour": "GPU cost per hour ($)",
    "total_cost_usd_per_hour": "GPUs + energy cost per hour ($)",
    "electricity_price_usd_per_kwh": "Electricity price ($/kWh)",
    "pue": "PUE (facility / IT power)",
    "clock_ratio": "Clock / full clock (power limit)",
    "search_seconds": "Search time (s)",
    "isl": "ISL (tokens)",
    "osl": "OSL (tokens)",
    "max_model_len": "Max model length (tokens)",
    "gpu_memory_bytes": "Device memory (GB)",
    "budget_bytes_per_gpu": "Engine memory per GPU (GB)",
    "weights_bytes_per_gpu": "Weights per GPU (GB)",
    "activation_bytes_per_gpu": "Activations per GPU (GB)",
    "reserved_bytes_per_gpu": "Reserved per GPU (GB)",
    "kv_budget_bytes_per_gpu": "KV cache per GPU (GB)",
    "total_bytes_per_gpu": "Total per GPU (GB)",
}
COUNT_NAMES: dict[str, str] = {
    "gpus": "GPUs",
    "clients_per_worker": "Clients per worker",
    "concurrency": "Clients",
    "candidates_evaluated": "Candidates evaluated",
    "workers": "Replicas",
    "rank": "Rank",
    "max_num_seqs": "Max running requests",
    "max_num_batched_tokens": "Chunk (tokens)",
    "cuda_graph_max_batch": "CUDA-graph max batch",
    "tp": "TP",
    "pp": "PP",
    "dp": "DP",
    "ep": "EP",
    "max_concurrency": "Max concurrent requests",
    "kv_capacity_tokens": "KV capacity (tokens)",
    "tokens_per_seq": "Tokens per request",
    "replicas": "Replicas",
    "gpus_per_replica": "GPUs per replica",
    "kv_bytes_per_token_per_gpu": "KV per token per GPU (bytes)",
    "state_bytes_per_seq_per_gpu": "State per request per GPU (bytes)",
}
"""Exact integers: the label is the unit (a count of GPUs, clients, requests...)."""
TEXT_NAMES: dict[str, str] = {
    "mode": "Mode",
    "gpu": "GPU type",
    "config": "Configuration",
    "configuration": "Configuration",
    "model": "Model",
    "pareto": "On Pareto front",
    "kv_dtype": "KV dtype",
    "weight_quant": "Weights",
    "binding_constraint": "Binding constraint",
    "objective": "Objective",
    "load": "Load",
    "percentile": "Percentile",
    "source": "Source",
    "reason": "Why not",
    "workload_class": "Workload class",
}
"""Columns whose cells are words, not quantities (no unit needed)."""
MODE_WORDS = {"agg": "aggregated", "disagg": "disaggregated (prefill/decode)"}


def pct(share: object, decimals: int = 1) -> str:
    """A share (0.123) as percent ('12.3%')."""
    x = _finite(share)
    return "-" if x is None else f"{x * 100:.{decimals}f}%"


def money(value: object) -> str:
    """Dollars: cents below $1,000, whole dollars above."""
    x = _finite(value)
    if x is None:
        return "-"
    return f"${x:,.0f}" if abs(x) >= 1000 else f"${x:,.2f}"


def gb(n_bytes: object) -> str:
    """Bytes as GB (1e9 bytes), 4 significant figures."""
    x = _finite(n_bytes)
    return "-" if x is None else f"{num(x / GB)} GB"


def machine_name(key: str, percentile: str | None = None) -> str:
    """A JSON/CSV column name with percentile and unit: ``ttft_ms`` at p90 -> ``ttft_p90_ms``."""
    if percentile and key in ("ttft_ms", "tpot_ms", "itl_ms"):
        return f"{key[:-3]}_{percentile}_ms"
    return key


def label(key: str, percentile: str | None = None) -> str:
    """A person's column name with unit (and percentile where the value is one): 'TTFT p90 (ms)'."""
    base = key.rsplit(".", 1)[-1]
    for stat in PERCENTILES:  # 'ttft_ms p90', 'ttft_p90_ms' and 'ttft_ms_p90' forms
        for form in (f"_{stat}_ms", f" {stat}", f"_{stat}"):
            stem = base[: -len(form)]
            if base.endswith(form) and stem:
                return label(stem if stem.endswith("_ms") else f"{stem}_ms", stat)
    if base != base.lower() or " " in base:  # already a person's name ('KV dtype')
        return base
    if base in _LATENCY:
        return f"{_LATENCY[base]}{' ' + percentile if percentile else ''} (ms)"
    if base in _LABELS:
        return _LABELS[base]
    if base in COUNT_NAMES:
        return COUNT_NAMES[base]
    if base in TEXT_NAMES:
        return TEXT_NAMES[base]
    if base.endswith("_bytes_per_gpu") or base.endswith("_bytes"):
        return f"{base.split('_bytes')[0].replace('_', ' ').capitalize()} (GB)"
    if base.endswith("_ms"):
        return f"{base[:-3].replace('_', ' ').capitalize()} (ms)"
    if base.endswith("_s"):
        return f"{base[:-2].replace('_', ' ').capitalize()} (s)"
    if any(w in base for w in ("share", "fraction", "utilization")):
        return f"{base.replace('_', ' ').capitalize()} (%)"
    return base.replace("_", " ").capitalize()


def kind_of(key: str) -> str:
    """Display kind of a raw key: 'count', 'pct', 'money', 'gb', 'text' or 'num'."""
    base = key.rsplit(".", 1)[-1]
    if base in COUNT_NAMES:
        return "count"
    if base in TEXT_NAMES:
        return "text"
    if base.endswith("_bytes_per_gpu") or base.endswith("_bytes"):
        return "gb"
    if base.startswith("cost_per") or base.startswith("price_per") or "cost_usd" in base:
        return "money"
    if any(w in base for w in ("share", "fraction", "utilization")):
        return "pct"
    return "num"


def show(key: str, value: object) -> str:
    """The cell text of ``value`` for the raw key ``key`` (its kind picks the rounding)."""
    if value is None or isinstance(value, str):
        return "-" if value is None else value
    return show_kind(kind_of(key), value)


def show_kind(kind: str, value: object) -> str:
    """Cell text of a number of a known display kind ('count', 'pct', 'money', 'gb', 'num')."""
    if kind == "count":
        return count(value)
    if kind == "pct":
        return pct(value)
    if kind == "gb":
        x = _finite(value)
        return "-" if x is None else num(x / GB)
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return count(value)
    return num(value)


def excel_format(kind: str) -> str:
    """Excel number format of a display kind (the cell keeps the exact value)."""
    return {
        "count": "#,##0",
        "pct": "0.0%",
        "money": "#,##0.00",
        "gb": "#,##0.0",
        "ms": "#,##0.0",
        "num": "#,##0.0##",
    }.get(kind, "General")


def excel_format_for(value: object, kind: str = "num") -> str:
    """A number format that shows ``value`` with at most 4 significant figures."""
    if kind in ("count", "pct"):
        return excel_format(kind)
    x = _finite(value)
    if x is None or x == 0 or float(x).is_integer():
        return "#,##0"
    decimals = max(0, SIG_FIGS - 1 - math.floor(math.log10(abs(x))))
    return "#,##0" + ("." + "0" * decimals if decimals else "")


# --- a deployment as words ----------------------------------------------------------------------


def gpu_name(key: str) -> str:
    """A bundled GPU's display name ('h200_sxm' -> 'H200-SXM'); the key itself when unknown; a
    prefill/decode pair of types ('h100_sxm+h200_sxm') as 'prefill H100-SXM, decode H200-SXM'."""
    if "+" in key:
        pre, dec = key.split("+", 1)
        return f"prefill {gpu_name(pre)}, decode {gpu_name(dec)}"
    spec = all_gpus().get(key)
    return spec.name if spec is not None else key


def _more_than_one(parallel: Mapping[str, object], key: str) -> bool:
    value = parallel.get(key, 1)
    return isinstance(value, int | float) and value > 1


def split_text(parallel: Mapping[str, object]) -> str:
    """'TP4' / 'TP2 x PP4' / 'TP8 DP8 EP8': the model split of one worker."""
    parts = [f"TP{parallel.get('tp', 1)}"]
    parts += [
        f"{k.upper()}{parallel[k]}" for k in ("pp", "dp", "ep") if _more_than_one(parallel, k)
    ]
    return " x ".join(parts)


def _whole(value: object, field: str) -> int:
    """A count from a plan file; anything but a whole number >= 1 is one input error."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
        or value < 1
    ):
        raise PlannerInputError(f"plan: {field}", f"must be a whole number >= 1, got {value!r}")
    return int(value)


def worker_parts(w: Mapping[str, object]) -> dict[str, str]:
    """One worker role as labelled parts (what a person reads in a table)."""
    parallel = w.get("parallel")
    p: Mapping[str, object] = parallel if isinstance(parallel, Mapping) else {}
    gpus = 1
    for k in ("tp", "pp", "dp"):
        gpus *= _whole(p.get(k, 1), f"parallel.{k}")
    _whole(p.get("ep", 1), "parallel.ep")
    return {
        "Replicas": count(w.get("workers", 1)),
        "Split": split_text(p),
        "GPUs per replica": count(gpus),
        "Max running requests": count(w.get("max_num_seqs")),
        "Chunk (tokens)": count(w.get("max_num_batched_tokens")),
        "GPU memory for the engine (%)": pct(w.get("gpu_memory_utilization"), 0),
        "KV dtype": str(w.get("kv_dtype", "-")),
        "Weights": str(w.get("weight_quant", "-")),
    }


def worker_sentence(w: Mapping[str, object]) -> str:
    """'2 replicas of TP4 (4 GPUs each), up to 64 running requests, 2,048-token chunks'."""
    n, parts = _whole(w.get("workers", 1), "workers"), worker_parts(w)
    each = parts["GPUs per replica"]
    plural, gpus = "s" if n != 1 else "", "GPU" if each == "1" else "GPUs"
    reps = f"{n} replica{plural} of {parts['Split']} ({each} {gpus} each)"
    return (
        f"{reps}, up to {parts['Max running requests']} running requests, "
        f"{parts['Chunk (tokens)']}-token chunks"
    )


def roles(dep: Mapping[str, object]) -> list[tuple[str, Mapping[str, object]]]:
    """The worker roles of a deployment dict, in order: agg, or prefill then decode."""
    names = ("agg",) if dep.get("mode") == "agg" else ("prefill", "decode")
    out: list[tuple[str, Mapping[str, object]]] = []
    for r in names:
        role = dep.get(r)
        if isinstance(role, Mapping):
            out.append((r, role))
    return out


def config_sentence(dep: Mapping[str, object], gpus: int | None = None, gpu_label: str = "") -> str:
    """The deployment as people say it (mode, replicas, split, batch, chunk, dtypes)."""
    rs = roles(dep)
    head = f"{gpus} x {gpu_label or gpu_name(str(dep.get('gpu', 'GPU')))}, " if gpus else ""
    pre_gpu = dep.get("prefill_gpu")
    if pre_gpu and gpus:  # the roles run on two GPU types
        pair = f"prefill on {gpu_name(str(pre_gpu))}, decode on {gpu_name(str(dep.get('gpu')))}"
        head = f"{gpus} GPUs ({pair}), "
    mode = MODE_WORDS.get(str(dep.get("mode")), str(dep.get("mode")))
    if dep.get("mode") == "agg" and rs:
        body = worker_sentence(rs[0][1])
    else:
        body = "; ".join(f"{r}: {worker_sentence(w)}" for r, w in rs)
    first = rs[0][1] if rs else {}
    dtypes = f"KV cache {first.get('kv_dtype', '-')}, weights {first.get('weight_quant', '-')}"
    return f"{head}{mode}: {body}; {dtypes}."


def config_table(dep: Mapping[str, object]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The deployment's parts: columns ('Role', ...) and one row of text per role."""
    rs = roles(dep)
    if not rs:
        return ("Role",), []
    cols = ("Role", *worker_parts(rs[0][1]))
    return cols, [(role, *worker_parts(w).values()) for role, w in rs]


# --- step breakdowns ---------------------------------------------------------------------------

STEP_NAMES = {
    "mixed": "mixed step under load",
    "prefill": "prefill of one prompt",
    "decode": "decode step",
    "all": "step",
}


def step_name(key: str) -> str:
    """'decode_step_ms' -> 'decode step'; 'mixed_step_ms' -> 'mixed step under load'."""
    base = key.replace(" ", "_").removesuffix("_ms").removesuffix("_step")
    return STEP_NAMES.get(base, base.replace("_", " "))


def step_rows(breakdown: object) -> list[tuple[str, str, float, float]]:
    """(step, op kind, ms, share) for every non-empty op of every step the plan reports.

    Accepts ``{step: {op: ms}}`` or ``{op: ms}``; op kinds that take no time (a 0 ms MoE row of a
    dense model) and steps without any time are left out.
    """
    if not isinstance(breakdown, Mapping):
        return []
    nested = all(isinstance(v, Mapping) for v in breakdown.values())
    steps = breakdown if nested else {"all": breakdown}
    out = []
    for step, ops in steps.items():
        if not isinstance(ops, Mapping):
            continue
        vals = {str(k): _op_ms(v) for k, v in ops.items()}
        total = sum(v for v in vals.values() if v)
        for op, v in vals.items():
            if v and total > 0:
                out.append((step_name(str(step)), op, v, v / total))
    return out


def _op_ms(value: object) -> float | None:
    if isinstance(value, Mapping):
        value = value.get("ms", value.get("time_ms"))
    x = _finite(value)
    return x if x is not None and x > 0 else None


CONFIG_ROLE = re.compile(
    r"(?:(?P<role>P|D)\[)?tp(?P<tp>\d+) pp(?P<pp>\d+)(?: dp(?P<dp>\d+))?(?: ep(?P<ep>\d+))?"
    r" x(?P<x>\d+) seqs (?P<seqs>\d+) chunk (?P<chunk>\d+) kv (?P<kv>\w+)"
)
"""One role of a configuration summary (``solvers.plan_core.Evaluated.summary``)."""


def _role_words(m: re.Match[str]) -> str:
    split = f"TP{m['tp']} PP{m['pp']}" + (f" DP{m['dp']}" if m["dp"] else "")
    split += f" EP{m['ep']}" if m["ep"] else ""
    role = {"P": "prefill ", "D": "decode "}.get(m["role"] or "", "")
    return (
        f"{role}{m['x']} x {split}, up to {int(m['seqs']):,} running requests, "
        f"{int(m['chunk']):,}-token chunks, KV {m['kv']}"
    )


def config_words(text: str) -> str:
    """A sentence with the planner's configuration summaries ('disagg P[tp1 pp1 x4 seqs 8 chunk
    16384 kv fp8] D[...]') written out in words."""
    text = re.sub(r"\b(agg|disagg) (?=P\[|tp\d)", "", text)
    return CONFIG_ROLE.sub(_role_words, text).replace("] ", "; ").replace("]", "")
