"""What ``plan`` is asked and what it answers: the request, a recommended choice, a Pareto point
and the result (data only; :mod:`solvers.plan` searches, ``planner.cli`` and ``app`` present)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from hardware.errors import PlannerInputError
from planner.engines import DEFAULT_ENGINE
from planner.engines.calibration import PACKAGED, EngineConstants, EnginePolicy
from planner.perf.deployment import Deployment, ShapeRules, Speculative
from planner.perf.power import (
    ELECTRICITY_PRICE_HELP,
    ELECTRICITY_PRICE_USD_PER_KWH,
    PUE,
    PUE_HELP,
    PowerSummary,
)
from planner.workload.spec import SpecDecode
from solvers.counts import MAX_BUDGET_GPUS

_FROZEN = ConfigDict(frozen=True, extra="forbid")
CONFIDENCE_RANGE = (0.5, 0.99)
"""A confidence other than 0 (the point prediction) is a one-sided probability in this range: below
0.5 a plan would be sized under the median error; above 0.99 the band table's tails rest on too
few rows to state."""
DEFAULT_CONFIDENCE = 0.8
CONFIDENCE_HELP = (
    "Each SLO holds with at least this probability, one-sided, read from the band table's "
    "quantiles of measured / predicted (planner.uncertainty.bands): 0 (the point prediction) or "
    f"{CONFIDENCE_RANGE[0]}-{CONFIDENCE_RANGE[1]}."
)


def confidence_problem(c: float) -> str | None:
    """Why ``c`` is not a confidence (see ``CONFIDENCE_RANGE``), or None."""
    lo, hi = CONFIDENCE_RANGE
    if c == 0 or lo <= c <= hi:
        return None
    return f"{c:g} not allowed: 0 (the point prediction) or {lo:g}-{hi:g} (one-sided probability)"


def _confidence_value(c: float) -> float:
    problem = confidence_problem(c)
    if problem is not None:
        raise ValueError(problem)
    return c


SpecConfidence = Annotated[float, AfterValidator(_confidence_value)]
"""A spec file's ``confidence:`` key (fleet, sweep): a confidence, else the spec's validation error
names the key."""


Objective = Literal["cost", "throughput-per-gpu", "gpus", "energy"]
OBJECTIVE_HELP = (
    "cost: the lowest $/hour of the GPUs bought at the requested --rate (ties: fewer GPUs); "
    "without a rate (closed loop or no load), the lowest $ per 1M total (input + output) tokens "
    "at the plan's throughput. throughput-per-gpu: the most output tokens/s per GPU. gpus: the "
    "fewest GPUs. energy: the fewest board joules per total (input + output) token "
    "(planner.perf.power; docs/energy.md)."
)
"""What each objective minimises or maximises (``--help``, the UI and docs/capacity.md)."""
Percentile = Literal["p50", "p90", "p99"]


class PlanRequest(BaseModel):
    """What the user asks for."""

    model_config = _FROZEN
    model: str = Field(description="Bundled model name, HF id or config.json path.")
    model_id: str = Field(default="", description="Identity of a local config.json's weights.")
    shape_rules: ShapeRules = Field(
        default_factory=ShapeRules, description="Worker shapes the target engine can launch."
    )
    gpus: tuple[str, ...] = Field(
        min_length=1, description="GPU names or aliases to consider (see `planner gpus`)."
    )
    max_gpus: int = Field(default=8, ge=1, description="GPU budget of the deployment.")

    @field_validator("max_gpus")
    @classmethod
    def _budget(cls, v: int) -> int:
        if v > MAX_BUDGET_GPUS:
            raise PlannerInputError(
                "--max-gpus",
                f"{v:,} is above {MAX_BUDGET_GPUS:,}, the largest GPU budget the search prices",
            )
        return v

    isl: int = Field(ge=1, description="Input tokens per request.")
    osl: int = Field(ge=1, description="Output tokens per request.")
    max_isl: int | None = Field(
        default=None,
        ge=1,
        description="Longest prompt the deployment must accept, tokens (None: the mean ISL).",
    )
    max_osl: int | None = Field(
        default=None,
        ge=1,
        description="Longest answer the deployment must accept, tokens (None: the mean OSL).",
    )
    rate_per_s: float | None = Field(
        default=None, gt=0, description="Open-loop request rate to serve, requests/s."
    )
    concurrency: int | None = Field(default=None, ge=1, description="Closed-loop clients to serve.")
    ttft_ms: float = Field(gt=0, description="TTFT SLO, ms.")
    tpot_ms: float = Field(gt=0, description="TPOT SLO, ms.")
    percentile: Percentile = Field(default="p90", description="Percentile the SLOs apply to.")
    mode: Literal["agg", "disagg", "auto"] = Field(
        default="auto", description="agg, disagg, or auto (both, the better wins)."
    )
    backend: str = Field(
        default=DEFAULT_ENGINE,
        description="Engine: its calibration, the worker shapes it can launch and the configs "
        "written for it.",
    )
    price_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="Override of every GPU's $/hour."
    )
    objective: Objective = Field(default="cost", description=OBJECTIVE_HELP)
    electricity_price: float = Field(
        default=ELECTRICITY_PRICE_USD_PER_KWH, ge=0, description=ELECTRICITY_PRICE_HELP
    )
    pue: float = Field(default=PUE, ge=1, description=PUE_HELP)
    weight_quants: tuple[str, ...] = Field(
        default=(), description="Weight dtypes allowed besides the checkpoint's."
    )
    confidence: float = Field(default=DEFAULT_CONFIDENCE, ge=0, le=1, description=CONFIDENCE_HELP)
    prefix_hit: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Share of prompt tokens served from a prefix cache: their prefill is skipped "
        "(solvers.plan_prefix replays a trace's hash_ids to find it).",
    )

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, v: float) -> float:
        problem = confidence_problem(v)
        if problem is not None:
            raise PlannerInputError("--confidence", problem)
        return v

    node_gpus: int | None = Field(
        default=None,
        ge=1,
        description="GPUs per purchase unit: costs are of whole units (default: each GPU "
        "spec's purchase_unit_gpus, e.g. 4 for an NVL72 tray, 1 where GPUs are rented singly).",
    )
    hardware_dirs: tuple[str, ...] = Field(
        default=(), description="Extra folders of GPU spec files."
    )
    spec_decode: SpecDecode | None = Field(
        default=None, description="Speculative decoding every candidate runs (None: off)."
    )
    spec_options: tuple[SpecDecode, ...] = Field(
        default=(),
        description="Speculative decoding settings to decide among besides none "
        "(``solvers.spec_choice``); empty: not a decision.",
    )
    engine_constants: EngineConstants = Field(
        default=PACKAGED,
        exclude=True,
        description="Engine constants replacing the packaged ones (a user's calibration "
        "profile, `--calibration`).",
    )

    @property
    def max_model_len(self) -> int:
        """Longest request the deployment must accept: max ISL + max OSL, tokens."""
        return (self.max_isl or self.isl) + (self.max_osl or self.osl)

    def engine(self) -> EnginePolicy:
        """The request's engine with its constants."""
        return self.engine_constants.policy(self.backend)


class Choice(BaseModel):
    """One recommended deployment with its predictions."""

    model_config = _FROZEN
    mode: str = Field(description="agg or disagg.")
    gpu: str = Field(description="GPU key (of the decode workers when disaggregated).")
    prefill_gpu: str = Field(
        default="", description="GPU key of the prefill workers (disaggregated; else empty)."
    )
    decode_gpu: str = Field(
        default="", description="GPU key of the decode workers (disaggregated; else empty)."
    )
    config: str = Field(description="Short description of the deployment.")
    deployment: Deployment = Field(description="The deployment.")
    predicted: dict[str, object] = Field(
        description="Predicted TTFT, TPOT, throughput and memory (planner estimate's numbers)."
    )
    gpus: int = Field(description="GPUs the deployment uses.")
    gpus_bought: int = Field(
        description="GPUs paid for: whole purchase units holding the workers (the costs are of "
        "these)."
    )
    purchase_unit: dict[str, int | str] = Field(
        description="GPUs per purchase unit (``gpus``) and where that number comes from "
        "(``source``: --node-gpus or the GPU spec)."
    )
    cost_per_million_output_tokens: float = Field(
        description="USD per million output tokens (all input processing charged to them)."
    )
    cost_per_million_total_tokens: float = Field(
        description="USD per million tokens processed, input plus output."
    )
    cost_per_hour_usd: float = Field(description="USD per hour of the GPUs bought.")
    headroom: dict[str, object] = Field(
        default_factory=dict,
        description="SLO / predicted and SLO / band edge per metric, and "
        "the metric with the least headroom at the band edge (tightest_at_band_edge).",
    )
    power: PowerSummary | None = Field(
        default=None,
        description="Board power and energy at the planned load (planner.perf.power, "
        "planner estimate's power object).",
    )
    speculative: Speculative | None = Field(
        default=None, description="Speculative decoding the deployment runs; None: off."
    )


class ParetoPoint(BaseModel):
    """A point of the throughput-per-GPU vs throughput-per-user front."""

    model_config = _FROZEN
    mode: str = Field(description="agg or disagg.")
    gpu: str = Field(description="GPU key (of the decode workers when disaggregated).")
    prefill_gpu: str = Field(
        default="", description="GPU key of the prefill workers (disaggregated; else empty)."
    )
    decode_gpu: str = Field(
        default="", description="GPU key of the decode workers (disaggregated; else empty)."
    )
    output_tok_s_per_gpu: float = Field(description="Output tokens/s per GPU.")
    output_tok_s_per_user: float = Field(description="Output tokens/s one request sees.")
    ttft_ms: float = Field(description="At the requested percentile.")
    tpot_ms: float = Field(description="At the requested percentile.")
    gpus: int = Field(description="GPUs of the deployment.")
    clients_per_worker: int | None = Field(
        description="Closed-loop clients per worker; None at a rate."
    )
    config: str = Field(
        description="Short description, e.g. 'agg tp4 pp1 x2, seqs 64, chunk 4096'."
    )


class PlanResult(BaseModel):
    """The answer: best plan, Pareto front, alternatives per mode, binding constraint."""

    model_config = _FROZEN
    request: PlanRequest = Field(description="The request planned for.")
    model: str = Field(description="Model name.")
    gpu: str = Field(description="GPU key of the best choice.")
    workload: dict[str, object] = Field(description="The load planned for.")
    slo: dict[str, object] = Field(description="TTFT and TPOT targets and their percentile.")
    best: Choice = Field(description="The recommendation.")
    pareto: tuple[ParetoPoint, ...] = Field(description="Throughput-per-GPU vs per-user frontier.")
    binding_constraint: str = Field(
        description="What limits the recommendation (an SLO, memory or the GPU budget)."
    )
    candidates_evaluated: int = Field(description="Candidates the search priced.")
    search_seconds: float = Field(description="Search wall time, s.")
    alternatives: dict[str, Choice | None] = Field(
        description="Best choice per mode; None where a mode has none."
    )
    milp: dict[str, object] | None = Field(
        default=None,
        description="Disaggregated rate search (MILP) details; None when it did not run.",
    )
    binding: dict[str, object] = Field(
        default_factory=dict, description="solvers.binding.explain_binding."
    )
    candidates: tuple[dict[str, object], ...] = Field(
        default=(), description="Top feasible candidates."
    )
    per_gpu_type: dict[str, dict[str, object]] = Field(
        default_factory=dict, description="Best plan or reason, per GPU type."
    )
    max_gpus: int = Field(default=0, description="The GPU budget of the request.")
    role_types: dict[str, object] | None = Field(
        default=None,
        description="Disaggregated over two GPU types: the best prefill/decode pair of two types "
        "against the best same-type plan (figures, whether the pair wins, and a sentence); None "
        "when no pair of two types was searched (solvers.hetero.role_types).",
    )
    prefix_cache: dict[str, object] | None = Field(
        default=None,
        description="Prefix caching priced (tiers, routing, hit rates; solvers.plan_prefix); "
        "None when not priced.",
    )
    speculative_decision: dict[str, object] | None = Field(
        default=None,
        description="Speculative decoding settings planned (none and each option's best score) "
        "and why the chosen one won; None when it was not a decision.",
    )
    at_prediction: Choice | None = Field(
        default=None,
        description="The plan the same objective picks at the point prediction (--confidence 0), "
        "when it differs from the recommendation; None when they agree, at confidence 0, or when "
        "nothing meets the SLO even at the prediction.",
    )

    def to_plan_dict(self) -> dict[str, object]:
        """The plan-file JSON (``planner plan --format json``; read by
        planner.emitters.plan_file)."""
        out = self.model_dump(mode="json", exclude={"request"})
        out["objective"] = self.request.objective
        # every setting that shaped the answer, defaults included (the text's first line)
        out["settings"] = self.request.model_dump(
            mode="json",
            include={
                "gpus",
                "max_gpus",
                "objective",
                "percentile",
                "confidence",
                "mode",
                "backend",
                "price_per_gpu_hour",
                "electricity_price",
                "pue",
                "weight_quants",
                "node_gpus",
                "prefix_hit",
            },
        )
        return out
