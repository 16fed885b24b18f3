"""``plan`` decides speculative decoding: it takes it where it lowers the objective at low load,
declines it at high load where the verify step over k+1 tokens per sequence is compute-bound,
and the chosen MTP setting is emitted in each engine's own flags, parsed with its argument
lists."""

from __future__ import annotations

import pytest

from hardware.errors import PlannerInputError
from planner.emitters.bundle import engine_build
from planner.emitters.plan_file import parse_plan
from planner.engines.registry import BUILTIN
from planner.model.bundled import load_model
from planner.perf.deployment import Speculative
from planner.perf.spec_decode import METHOD_DEFAULTS, draft_cost_ratio
from planner.workload.spec import SpecDecode
from solvers.plan_models import PlanRequest
from solvers.spec_choice import plan_with_spec
from tests.planner.emitters.test_recipe_contract import check_recipe


def _options(method: str, model: str) -> tuple[SpecDecode, ...]:
    d = METHOD_DEFAULTS[method]
    ratio = draft_cost_ratio(load_model(model), method)
    return tuple(
        SpecDecode(method=method, draft_len=k, acceptance=d.acceptance, draft_cost_ratio=ratio)
        for k in d.lengths
    )


def _llama(concurrency: int, isl: int, osl: int) -> PlanRequest:
    return PlanRequest(
        model="llama-3.1-8b",
        gpus=("h100",),
        max_gpus=8,
        isl=isl,
        osl=osl,
        concurrency=concurrency,
        ttft_ms=60_000,
        tpot_ms=500,
        spec_options=_options("eagle3", "llama-3.1-8b"),
    )


def test_low_load_takes_speculative_decoding() -> None:
    r = plan_with_spec(_llama(4, 512, 512))
    d = r.speculative_decision
    assert d is not None and d["chosen"] != "none"
    assert r.best.speculative is not None and r.best.speculative.method == "eagle3"
    rows = {o["setting"]: o for o in d["options"]}  # type: ignore[union-attr]
    assert rows[d["chosen"]]["tpot_ms_p50"] < rows["none"]["tpot_ms_p50"]
    assert "without" in str(d["why"])


def test_high_load_declines_it_and_says_why() -> None:
    r = plan_with_spec(_llama(2048, 128, 256))
    d = r.speculative_decision
    assert d is not None and d["chosen"] == "none" and r.best.speculative is None
    assert str(d["why"]).startswith("declined")
    rows = [o for o in d["options"] if o["setting"] != "none"]  # type: ignore[union-attr]
    assert rows and all(o["score"] < d["options"][0]["score"] for o in rows)  # type: ignore[index]


def test_without_options_it_is_not_a_decision() -> None:
    r = plan_with_spec(_llama(4, 512, 512).model_copy(update={"spec_options": ()}))
    assert r.speculative_decision is None and r.best.speculative is None


@pytest.fixture(scope="module")
def mtp_plan() -> dict[str, object]:
    req = PlanRequest(
        model="qwen3.5-397b-a17b-nvfp4",
        gpus=("b200",),
        max_gpus=8,
        isl=8192,
        osl=1024,
        concurrency=4,
        ttft_ms=2000,
        tpot_ms=10,
        spec_options=_options("mtp", "qwen3.5-397b-a17b-nvfp4"),
    )
    r = plan_with_spec(req)
    assert r.best.speculative is not None and r.best.speculative.method == "mtp"
    return r.to_plan_dict()


@pytest.mark.parametrize("backend", sorted(BUILTIN))
def test_planned_mtp_is_emitted_in_the_engines_flags(
    mtp_plan: dict[str, object], backend: str
) -> None:
    ctx, _, build = engine_build(parse_plan(mtp_plan), backend)
    assert ctx.speculative is not None and ctx.speculative.method == "mtp"
    check_recipe(ctx, build, backend)  # every flag parsed with the engine's argument lists


def test_a_draft_checkpoint_the_plan_does_not_name_is_not_emitted(
    mtp_plan: dict[str, object],
) -> None:
    plan = parse_plan(mtp_plan)
    best = plan.best.model_copy(
        update={"speculative": Speculative(method="eagle3", draft_tokens=3)}
    )
    with pytest.raises(PlannerInputError, match="identity"):
        engine_build(plan.model_copy(update={"best": best}), "sglang")
