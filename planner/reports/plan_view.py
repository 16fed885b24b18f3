"""Typed, tolerant reader of a plan file (the JSON ``planner plan --format json`` prints).

The top-level fields every report needs are validated (a missing one is a ``PlannerInputError``
naming it); everything else is read leniently, because the solvers may add keys: Pareto entries,
candidates and alternatives are flattened into one-level rows with dotted column names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from planner.plan_io import read_plan_json, validate_plan

_LENIENT = ConfigDict(frozen=True, extra="ignore")
_NUMBER_LIST_MAX = 8
"""Lists of scalars up to this length are joined into one cell; longer ones are summarised."""
_DROP_PREFIXES = ("predicted.", "deployment.", "config.", "metrics.")
"""Nesting levels dropped from column names when that leaves them unique."""


class WorkloadView(BaseModel):
    """The workload the plan was made for."""

    model_config = _LENIENT
    isl: float = Field(description="Input tokens per request (mean).")
    osl: float = Field(description="Output tokens per request (mean).")
    concurrency: int | None = Field(default=None, description="Closed-loop clients.")
    rate: float | None = Field(default=None, description="Open-loop arrival rate, requests/s.")


class BestView(BaseModel):
    """The recommended deployment and its predictions."""

    model_config = _LENIENT
    deployment: dict[str, object] = Field(description="Deployment.model_dump(mode='json').")
    predicted: dict[str, object] = Field(description="Predicted latency, throughput, breakdowns.")
    gpus: int | None = Field(default=None, description="GPUs of the whole deployment.")
    cost_per_million_output_tokens: float | None = Field(
        default=None, description="$ per 1e6 output tokens."
    )


class PlanView(BaseModel):
    """What the reports read from a plan file."""

    model_config = _LENIENT
    model: str = Field(description="Model name.")
    gpu: str = Field(description="GPU key.")
    workload: WorkloadView = Field(description="The load the plan was sized for.")
    slo: dict[str, object] = Field(
        default_factory=dict, description="TTFT and TPOT targets and their percentile."
    )
    best: BestView = Field(description="The recommendation.")
    pareto: list[dict[str, object]] = Field(
        default_factory=list, description="Throughput-per-GPU vs per-user frontier points."
    )
    candidates: list[dict[str, object]] = Field(
        default_factory=list, description="Every candidate evaluated, one row each."
    )
    binding_constraint: str = Field(
        default="", description="What limits the recommendation (an SLO, memory or the GPU budget)."
    )
    candidates_evaluated: int | None = Field(
        default=None, description="Candidates the search priced."
    )
    search_seconds: float | None = Field(default=None, description="Wall time of the search, s.")
    alternatives: dict[str, object] = Field(
        default_factory=dict, description="Best choice per mode (agg, disagg)."
    )
    raw: dict[str, object] = Field(default_factory=dict, description="The whole decoded plan.")


def parse_plan(data: object) -> PlanView:
    """Validate a decoded plan; any problem is one ``PlannerInputError`` naming the field."""
    view = validate_plan(data, PlanView)
    assert isinstance(data, dict)  # validate_plan refuses anything else
    alts = data.get("alternatives")
    alternatives = alts if isinstance(alts, dict) else {}
    return view.model_copy(update={"raw": data, "alternatives": alternatives})


def load_plan(path: str | Path) -> PlanView:
    """Read and validate a plan file from disk."""
    return parse_plan(read_plan_json(path, "--plan"))


def _cell(value: object) -> object:
    """A JSON leaf as one spreadsheet cell: scalars as is, short lists joined, others summarised."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        if len(value) <= _NUMBER_LIST_MAX and all(
            isinstance(v, bool | int | float | str) for v in value
        ):
            return ", ".join(str(v) for v in value)
        return f"[{len(value)} items]"
    return str(value)


def flatten(obj: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Nested dict -> one level with dotted keys; leaves become single cells."""
    out: dict[str, object] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = _cell(value)
    return out


def _short_names(names: list[str]) -> dict[str, str]:
    """Drop wrapper prefixes (``predicted.`` ...) from column names when they stay unique."""
    short = {}
    for name in names:
        s = name
        for pre in _DROP_PREFIXES:
            s = s.removeprefix(pre)
        short[name] = s
    if len(set(short.values())) != len(short):
        return {n: n for n in names}
    return short


def flat_rows(entries: Sequence[object]) -> list[dict[str, object]]:
    """Flatten a list of (possibly nested) entries into rows with one shared column order."""
    flats = [flatten(e) if isinstance(e, Mapping) else {"value": _cell(e)} for e in entries]
    columns: list[str] = []
    for row in flats:
        columns.extend(c for c in row if c not in columns)
    rename = _short_names(columns)
    return [{rename[c]: row.get(c) for c in columns} for row in flats]


def section(obj: Mapping[str, object], key: str) -> Mapping[str, object]:
    """``obj[key]`` when it is a mapping, else an empty one (a plan may lack optional parts)."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def pick(row: Mapping[str, object], name: str) -> object:
    """``row[name]``, else the value of the first column whose dotted name ends with ``.name``."""
    if name in row:
        return row[name]
    for key, value in row.items():
        if key.endswith(f".{name}"):
            return value
    return None


def as_float(value: object) -> float | None:
    """A number as float; None for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if f == f and abs(f) != float("inf") else None
