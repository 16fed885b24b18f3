"""Turn the Plan page's inputs into a ``solvers.plan.PlanRequest`` and run it (cached).

The planner takes one ISL and one OSL (tokens per request): a distribution or a trace is planned
at its mean, and the page says so. An uploaded config.json is checked by
``planner.model.bundled.parse_config_text`` and handed to the planner as a file (its content hash
in the
path, so a new upload never meets a cached old one).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import streamlit as st
import yaml

from app.calibration_view import Fitted
from app.inputs import ModelChoice, SloChoice
from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.calibration.profile import Profile, bands_of_profile, profile_engines
from planner.emitters.capabilities import shape_rules
from planner.engines import engine_names
from planner.engines.calibration import EngineConstants
from planner.model.bundled import bundled_models, find_bundled
from planner.model.spec import ModelSpec
from planner.perf.deployment import Deployment
from planner.perf.estimate import estimate
from planner.workload.spec import LengthSpec, Workload
from planner.workload.spec import LengthSpec as Lengths
from solvers.fleet import FleetSpec
from solvers.plan import PlanRequest, plan
from solvers.plan_models import Objective

MODES = ("auto", "agg", "disagg")
MODE_LABELS = {"auto": "auto (best of both)", "agg": "aggregated", "disagg": "disaggregated (P/D)"}
BACKENDS = engine_names()
OBJECTIVES: tuple[str, ...] = get_args(Objective)
"""The planner's objectives, its default (cost) first."""
STALE_TEXT = "inputs changed - press Plan"
"""Shown over a result whose inputs differ from the form's."""


@dataclass(frozen=True)
class PlanInputs:
    """Everything the Plan page gathered."""

    model: ModelChoice
    gpus: tuple[str, ...]
    max_gpus: int
    price_per_gpu_hour: float | None
    isl: LengthSpec
    osl: LengthSpec
    load: dict[str, float | int]
    slo: SloChoice
    mode: str
    backend: str
    objective: str
    calibration: Fitted | None = None
    max_lengths: tuple[int, int] | None = None
    """Longest prompt and answer the deployment must accept (``max_lengths``), tokens."""


@st.cache_resource(show_spinner=False)
def _upload_dir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="planner-ui-configs-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # uploads do not outlive the server
    return folder


UPLOADED_KEY = "uploaded_model_paths"
"""Session state: paths of the config.json files uploaded in this session (Fleet page models)."""


def model_ref(choice: ModelChoice) -> str:
    """What ``PlanRequest.model`` takes: the bundled key, or a path to the uploaded config."""
    if not choice.uploaded:
        return choice.ref
    digest = hashlib.sha256(choice.raw_text.encode()).hexdigest()[:16]
    folder = _upload_dir() / digest
    folder.mkdir(exist_ok=True)
    path = folder / Path(choice.ref).name
    if not path.exists():
        path.write_text(choice.raw_text)
    st.session_state.setdefault(UPLOADED_KEY, set()).add(str(path))
    return str(path)


def check_fleet_models(spec: FleetSpec, uploaded: set[str]) -> FleetSpec:
    """``spec`` when every class names a bundled model or a config.json uploaded in this session
    (``uploaded``): a fleet YAML must not make the server read a file of its own disk."""
    for i, c in enumerate(spec.classes):
        if find_bundled(c.model) is None and c.model not in uploaded:
            raise PlannerInputError(
                f"fleet YAML: classes[{i}].model",
                f"'{c.model[:80]}' is not a bundled model (choose one of "
                f"{', '.join(sorted(bundled_models()))}) or a config.json "
                "uploaded on the Plan page",
            )
    return spec


def planned_lengths(isl: LengthSpec, osl: LengthSpec) -> tuple[int, int]:
    """The ISL and OSL the planner is given: the means, in whole tokens."""
    return max(1, round(isl.mean)), max(1, round(osl.mean))


def request(given: PlanInputs) -> PlanRequest:
    """The library request for the page's inputs."""
    isl, osl = planned_lengths(given.isl, given.osl)
    return PlanRequest(
        model=model_ref(given.model),
        model_id=given.model.model_id,
        shape_rules=shape_rules(given.backend),
        gpus=given.gpus,
        max_gpus=given.max_gpus,
        isl=isl,
        osl=osl,
        max_isl=given.max_lengths[0] if given.max_lengths else None,
        max_osl=given.max_lengths[1] if given.max_lengths else None,
        rate_per_s=given.load.get("rate_per_s"),
        concurrency=given.load.get("concurrency"),  # type: ignore[arg-type]
        ttft_ms=given.slo.ttft_ms,
        tpot_ms=given.slo.tpot_ms,
        percentile=given.slo.percentile,
        confidence=given.slo.confidence,
        mode=given.mode,
        backend=given.backend,
        price_per_gpu_hour=given.price_per_gpu_hour,  # type: ignore[arg-type]
        objective=given.objective,  # type: ignore[arg-type]
    )


@st.cache_data(show_spinner=False, max_entries=64)
def _plan_dict(request_json: str, profile_yaml: str = "", label: str = "") -> dict[str, Any]:
    req = PlanRequest.model_validate_json(request_json)
    if not profile_yaml:
        return plan(req).to_plan_dict()
    prof = Profile.model_validate(yaml.safe_load(profile_yaml))
    gpu = req.gpus[0] if len(req.gpus) == 1 else None
    # the profile's constants and bands for this plan only, by value (other sessions keep theirs)
    consts = EngineConstants.of(profile_engines(prof, label, gpu), label)
    req = req.model_copy(update={"engine_constants": consts})
    return plan(req, bands_of_profile(prof, label)).to_plan_dict()


def run_plan(given: PlanInputs) -> dict[str, Any]:
    """The plan dict (``PlanResult.to_plan_dict()``) for the page's inputs (with the uploaded
    calibration profile when the page asks for it)."""
    cal = given.calibration
    if cal is None:
        return _plan_dict(request(given).model_dump_json())
    return _plan_dict(request(given).model_dump_json(), cal.text, cal.label)


@st.cache_data(show_spinner=False, max_entries=32)
def _power(
    deployment_json: str, workload_json: str, backend: str, model_json: str
) -> dict[str, Any]:
    dep = Deployment.model_validate_json(deployment_json)
    wl = json.loads(workload_json)
    load = (
        {"concurrency": int(wl["concurrency"])}
        if wl.get("concurrency")
        else {"rate_per_s": float(wl["rate"])}
    )
    work = Workload(isl=Lengths(mean=float(wl["isl"])), osl=Lengths(mean=float(wl["osl"])), **load)
    m = ModelSpec.model_validate_json(model_json)
    est = estimate(
        m,
        get_gpu(dep.gpu),
        work,
        backend=backend,
        agg=dep.agg,
        prefill=dep.prefill,
        decode=dep.decode,
    )
    return est.power.model_dump(mode="json") if est.power is not None else {}


def plan_power(plan_dict: dict[str, Any], given: PlanInputs) -> dict[str, Any]:
    """Power and energy of the recommendation: the plan's own ``power`` where it reports one, else
    ``planner.perf.estimate`` of its deployment at the plan's load (the power model of
    ``planner.perf.power``; the same throughput as the plan), marked ``computed_here``."""
    best = plan_dict["best"]
    for given_power in (best.get("power"), plan_dict.get("power")):
        if isinstance(given_power, dict):
            return dict(given_power)
    if given.calibration is not None:
        return {}  # the packaged engine constants would not be the plan's
    got = _power(
        json.dumps(best["deployment"]),
        json.dumps(plan_dict["workload"]),
        given.backend,
        given.model.spec.model_dump_json(),
    )
    return {**got, "computed_here": True} if got else {}
