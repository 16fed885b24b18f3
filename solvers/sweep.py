"""``planner sweep``: one ``plan`` per scenario of a catalogue-wide spec, one result row each.

A spec (see ``solvers/examples/sweep.yaml``) lists models, GPU sets, workloads, SLO sets and
objectives; every combination is a scenario. :func:`run_scenario` plans one scenario and never
raises: an infeasible scenario is a row with its reason, a failing one a row with its error. Rows
carry a stable ``scenario_id`` (a hash of the scenario's request), so an interrupted sweep resumes
by skipping the ids already written. Running the scenarios (Dask) is :mod:`solvers.sweep_run`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from hardware.errors import InfeasibleError, PlannerInputError
from planner.engines import DEFAULT_ENGINE
from planner.perf.deployment import ShapeRules
from solvers.counts import MAX_BUDGET_GPUS
from solvers.plan import PlanRequest, PlanResult, plan
from solvers.plan_models import (
    CONFIDENCE_HELP,
    DEFAULT_CONFIDENCE,
    OBJECTIVE_HELP,
    Objective,
    SpecConfidence,
)
from solvers.power_plan import ENERGY_COLUMNS, energy_fields, energy_settings

_FROZEN = ConfigDict(frozen=True, extra="forbid")
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class GpuSet(BaseModel):
    """GPU types one plan may choose from, and the budget."""

    model_config = _FROZEN
    name: str = Field(pattern=NAME_PATTERN, description="Name of the set (used in scenario ids).")
    gpus: tuple[str, ...] = Field(min_length=1, description="GPU names of the set.")
    max_gpus: int = Field(ge=1, le=MAX_BUDGET_GPUS, description="GPU budget of a deployment.")


class SweepWorkload(BaseModel):
    """Request lengths and the load: a rate (open loop), clients (closed loop) or neither."""

    model_config = _FROZEN
    name: str = Field(
        pattern=NAME_PATTERN, description="Name of the workload (used in scenario ids)."
    )
    isl: int = Field(ge=1, le=10_000_000, description="Input tokens per request.")
    osl: int = Field(ge=1, le=10_000_000, description="Output tokens per request.")
    rate_per_s: float | None = Field(
        default=None, gt=0, le=1e6, allow_inf_nan=False, description="Open loop: requests/s."
    )
    concurrency: int | None = Field(
        default=None, ge=1, le=10_000_000, description="Closed loop: concurrent clients."
    )

    @model_validator(mode="after")
    def _one_load(self) -> SweepWorkload:
        if self.rate_per_s is not None and self.concurrency is not None:
            raise ValueError("give rate_per_s or concurrency, not both")
        return self


class SloSet(BaseModel):
    """TTFT and TPOT targets at a percentile."""

    model_config = _FROZEN
    name: str = Field(
        pattern=NAME_PATTERN, description="Name of the SLO set (used in scenario ids)."
    )
    ttft_ms: float = Field(gt=0, le=1e7, allow_inf_nan=False, description="TTFT SLO, ms.")
    tpot_ms: float = Field(gt=0, le=1e6, allow_inf_nan=False, description="TPOT SLO, ms.")
    percentile: Literal["p50", "p90", "p99"] = Field(
        default="p90", description="Percentile the SLOs apply to."
    )


class SweepSpec(BaseModel):
    """``planner sweep --spec sweep.yaml``."""

    model_config = _FROZEN
    models: tuple[str, ...] = Field(min_length=1, description="Models to plan for.")
    gpu_sets: tuple[GpuSet, ...] = Field(min_length=1, description="GPU sets to plan on.")
    workloads: tuple[SweepWorkload, ...] = Field(min_length=1, description="Loads to plan for.")
    slos: tuple[SloSet, ...] = Field(min_length=1, description="SLO sets to meet.")
    objectives: tuple[Objective, ...] = Field(
        default=("cost",),
        description="Objectives to plan with, each a scenario (planner plan --objective): "
        + OBJECTIVE_HELP,
    )

    @model_validator(mode="before")
    @classmethod
    def _one_objective(cls, data: object) -> object:
        """``objective: X`` (as in a fleet spec) is ``objectives: [X]``; not both."""
        if isinstance(data, dict) and "objective" in data:
            if "objectives" in data:
                raise ValueError("give objective or objectives, not both")
            data = {**data, "objectives": [data["objective"]]}
            del data["objective"]
        return data

    mode: Literal["agg", "disagg", "auto"] = Field(
        default="auto", description="Deployment mode: agg, disagg or auto (both)."
    )
    backend: str = Field(
        default=DEFAULT_ENGINE,
        description="Engine of every scenario: its calibration and the worker shapes it can "
        "launch (planner/emitters/capabilities.yaml), as `planner plan --backend`.",
    )
    confidence: SpecConfidence = Field(
        default=DEFAULT_CONFIDENCE, ge=0, le=1, description=CONFIDENCE_HELP + " Every scenario."
    )
    electricity_price: float | None = Field(
        default=None,
        ge=0,
        le=10,
        allow_inf_nan=False,
        description="USD per kWh of every scenario (default: planner plan's --electricity-price).",
    )
    pue: float | None = Field(
        default=None,
        ge=1,
        le=5,
        allow_inf_nan=False,
        description="Facility / IT power of every scenario (default: planner plan's --pue).",
    )


class Scenario(BaseModel):
    """One plan of the sweep: its labels and the request it makes."""

    model_config = _FROZEN
    index: int = Field(description="Position in the sweep.")
    scenario_id: str = Field(description="Stable id from the names of its parts.")
    gpu_set: str = Field(description="GPU set name.")
    workload: str = Field(description="Workload name.")
    slo: str = Field(description="SLO set name.")
    request: dict[str, object] = Field(description="The plan request of the scenario.")
    shape_rules: ShapeRules = Field(
        description="Worker shapes its backend can launch (not part of its id)."
    )


def load_spec(path: str | Path) -> SweepSpec:
    """Read a sweep YAML; problems become one PlannerInputError naming the file and field."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise PlannerInputError("--spec", f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise PlannerInputError("--spec", f"{path} is not YAML: {exc}") from None
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"])) or "top level"
        raise PlannerInputError("--spec", f"{path}: {where}: {err['msg']}") from None
    return spec


def scenario_id(request: dict[str, object]) -> str:
    """Stable id of a request (same request, same id, across runs and machines)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def scenarios(spec: SweepSpec, shape_rules: ShapeRules) -> list[Scenario]:
    """Every (model, GPU set, workload, SLO set, objective) combination, in spec order, each
    limited to ``shape_rules``: the worker shapes ``spec.backend`` can launch (the caller reads
    them from the engine's capability table, as ``planner plan --backend`` does)."""
    out = []
    combos = itertools.product(
        spec.models, spec.gpu_sets, spec.workloads, spec.slos, spec.objectives
    )
    for i, (model, gs, wl, slo, obj) in enumerate(combos):
        req = {
            "model": model,
            "gpus": list(gs.gpus),
            "max_gpus": gs.max_gpus,
            "isl": wl.isl,
            "osl": wl.osl,
            "rate_per_s": wl.rate_per_s,
            "concurrency": wl.concurrency,
            "ttft_ms": slo.ttft_ms,
            "tpot_ms": slo.tpot_ms,
            "percentile": slo.percentile,
            "mode": spec.mode,
            "backend": spec.backend,
            "objective": obj,
            "confidence": spec.confidence,
        }
        # only when given, so the ids of sweeps written before these keys existed still match
        req |= energy_settings(spec.electricity_price, spec.pue)
        out.append(
            Scenario(
                index=i,
                scenario_id=scenario_id(req),
                gpu_set=gs.name,
                workload=wl.name,
                slo=slo.name,
                request=req,
                shape_rules=shape_rules,
            )
        )
    return out


COLUMNS: tuple[str, ...] = (
    "index",
    "scenario_id",
    "status",
    "model",
    "gpu_set",
    "gpus_allowed",
    "max_gpus",
    "workload",
    "isl",
    "osl",
    "rate_per_s",
    "concurrency",
    "slo",
    "ttft_slo_ms",
    "tpot_slo_ms",
    "percentile",
    "confidence",
    "objective",
    "mode",
    "gpu",
    "config",
    "gpus",
    "gpus_bought",
    "ttft_at_percentile_ms",
    "tpot_at_percentile_ms",
    "ttft_mean_ms",
    "tpot_mean_ms",
    "output_tok_s_per_gpu",
    "output_tok_s_per_user",
    "requests_per_s",
    "cost_per_hour_usd",
    "cost_per_million_output_tokens_usd",
    "cost_per_million_total_tokens_usd",
    *ENERGY_COLUMNS,
    "binding_constraint",
    "candidates",
    "seconds",
    "reason",
)
"""Columns of a sweep's results file (percentile columns are at the row's ``percentile``)."""


def _texts(value: object) -> list[str]:
    """A request's list of names (one name alone as a list of one)."""
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def _base(s: Scenario) -> dict[str, object]:
    r = s.request
    return {
        "index": s.index,
        "scenario_id": s.scenario_id,
        "model": r["model"],
        "gpu_set": s.gpu_set,
        "gpus_allowed": "/".join(_texts(r["gpus"])),
        "max_gpus": r["max_gpus"],
        "workload": s.workload,
        "isl": r["isl"],
        "osl": r["osl"],
        "rate_per_s": r["rate_per_s"],
        "concurrency": r["concurrency"],
        "slo": s.slo,
        "ttft_slo_ms": r["ttft_ms"],
        "tpot_slo_ms": r["tpot_ms"],
        "percentile": r["percentile"],
        "confidence": r.get("confidence"),
        "objective": r["objective"],
    }


def _finite(x: object) -> float | None:
    if not isinstance(x, int | float):
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def _stat(predicted: dict[str, object], metric: str, which: str) -> float | None:
    """``predicted[metric][which]`` (e.g. ttft_ms / p90) when finite, else None."""
    stats = predicted.get(metric)
    return _finite(stats.get(which)) if isinstance(stats, dict) else None


def _plan_fields(result: PlanResult, pct: str) -> dict[str, object]:
    b, pr = result.best, result.best.predicted
    return {
        "status": "ok",
        "mode": b.mode,
        "gpu": b.gpu,
        "config": b.config,
        "gpus": b.gpus,
        "gpus_bought": b.gpus_bought,
        "ttft_at_percentile_ms": _stat(pr, "ttft_ms", pct),
        "tpot_at_percentile_ms": _stat(pr, "tpot_ms", pct),
        "ttft_mean_ms": _stat(pr, "ttft_ms", "mean"),
        "tpot_mean_ms": _stat(pr, "tpot_ms", "mean"),
        "output_tok_s_per_gpu": _finite(pr["output_tok_s_per_gpu"]),
        "output_tok_s_per_user": _finite(pr["output_tok_s_per_user"]),
        "requests_per_s": _finite(pr["requests_per_s"]),
        "cost_per_hour_usd": _finite(b.cost_per_hour_usd),
        "cost_per_million_output_tokens_usd": _finite(b.cost_per_million_output_tokens),
        "cost_per_million_total_tokens_usd": _finite(b.cost_per_million_total_tokens),
        **energy_fields(b.power),
        "binding_constraint": result.binding_constraint,
        "candidates": result.candidates_evaluated,
    }


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Send this process's stdout and stderr (Python's and the file descriptors native solvers
    write to) to /dev/null for the duration."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def scenario_request(s: Scenario) -> PlanRequest:
    """The scenario's PlanRequest, limited to the worker shapes its backend can launch (as
    ``planner plan --backend``; the rules are not part of the request's id)."""
    return PlanRequest(**s.request, shape_rules=s.shape_rules)


def run_scenario(s: Scenario) -> dict[str, object]:
    """Plan one scenario into a row; never raises (infeasible and failing scenarios are rows)."""
    t0 = time.perf_counter()
    row = {c: None for c in COLUMNS} | _base(s)
    try:
        with _quiet():  # the sweep's progress line replaces plan's, and the MILP solver's banner
            result = plan(scenario_request(s))
        row |= _plan_fields(result, str(s.request["percentile"]))
    except InfeasibleError as exc:
        row |= {
            "status": "infeasible",
            "binding_constraint": exc.binding_constraint,
            "reason": str(exc),
        }
    except Exception as exc:  # noqa: BLE001 - a failing scenario is recorded, not fatal
        row |= {"status": "error", "reason": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return row
