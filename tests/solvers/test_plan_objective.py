"""One objective by default, GPU types side by side, and sentences built from their fields
(issue 47: "One objective", "GPU types side by side", "One source for explanations")."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from hardware.errors import InfeasibleError
from planner.quantities import count, ms, num
from solvers.binding import objective_text
from solvers.plan import PlanRequest, PlanResult, plan
from solvers.plan_core import evaluate_request

BASE: dict[str, Any] = {
    "model": "llama-3.1-8b",
    "gpus": ("h100", "h200", "b200"),
    "max_gpus": 8,
    "isl": 2000,
    "osl": 300,
    "ttft_ms": 800.0,
    "tpot_ms": 30.0,
    "percentile": "p90",
}
LOADS: dict[str, dict[str, Any]] = {
    "no load": {},
    "rate": {"rate_per_s": 20.0},
    "clients": {"concurrency": 64},
}


@pytest.fixture(scope="module", params=sorted(LOADS))
def result(request: pytest.FixtureRequest) -> PlanResult:
    return plan(PlanRequest(**{**BASE, **LOADS[request.param]}))


def test_default_objective_is_cost() -> None:
    assert PlanRequest(**BASE).objective == "cost"


def test_recommendation_is_the_cheapest(result: PlanResult) -> None:
    """At a rate the lowest $/hour (ties: fewer GPUs); otherwise the lowest $ per 1M total
    tokens, over every feasible candidate."""
    ev = evaluate_request(result.request)
    ok = ev.feasible()
    at_rate = result.request.rate_per_s is not None
    cost = ev.cost_per_hour if at_rate else ev.cost_per_mtok_total
    best = result.best
    mine = best.cost_per_hour_usd if at_rate else best.cost_per_million_total_tokens
    assert mine == pytest.approx(float(cost[ok].min()), rel=1e-9)
    if at_rate:
        tied = ok & np.isclose(cost, mine, rtol=1e-12)
        assert best.gpus == int(ev.gpus[tied].min())


def type_key(rec: Any) -> str:
    """The per_gpu_type key of a candidate or choice: its GPU, or its prefill+decode pair."""
    get = rec.get if isinstance(rec, dict) else lambda k: getattr(rec, k, None)
    pre, dec = get("prefill_gpu"), get("decode_gpu")
    return f"{pre}+{dec}" if pre and dec and pre != dec else str(get("gpu"))


def test_one_row_per_gpu_type_and_exactly_the_recommendation_chosen(result: PlanResult) -> None:
    """A row per type asked for, in order, then one per prefill/decode pair of two of them."""
    rows = result.per_gpu_type
    asked = ["h100_sxm", "h200_sxm", "b200_sxm"]
    assert list(rows)[:3] == asked
    for key in list(rows)[3:]:
        pre, dec = key.split("+")
        assert pre in asked and dec in asked and pre != dec
    chosen = [k for k, r in rows.items() if r["chosen"]]
    assert chosen == [type_key(result.best)]
    rec = rows[chosen[0]]["best"]
    assert isinstance(rec, dict)
    assert rec["config"] == result.best.config and rec["gpus"] == result.best.gpus
    assert rec["cost_per_hour_usd"] == pytest.approx(result.best.cost_per_hour_usd)
    for r in rows.values():
        best, bind = r["best"], r["binding"]
        if best is None:
            assert r["reason"] and bind is None
            continue
        assert isinstance(best, dict) and isinstance(bind, dict)
        assert best["cost_per_million_total_tokens"] > 0 and bind["sentence"]


def test_candidates_rank_by_the_objective_with_the_recommendation_first(
    result: PlanResult,
) -> None:
    c = result.candidates
    assert c[0]["config"] == result.best.config and c[0]["gpu"] == result.gpu
    typed = len(result.per_gpu_type)
    scores = [float(str(x["score"])) for x in c[: len(c) - typed + 1]]
    assert scores == sorted(scores, reverse=True)
    assert {type_key(x) for x in c} >= {k for k, r in result.per_gpu_type.items() if r["best"]}


def test_recommendation_on_the_front_is_its_own_row(result: PlanResult) -> None:
    b = result.best
    pred = b.predicted
    same = [
        p
        for p in result.pareto
        if p.output_tok_s_per_gpu == pytest.approx(pred["output_tok_s_per_gpu"])
        and p.output_tok_s_per_user == pytest.approx(pred["output_tok_s_per_user"])
        and p.gpu == b.gpu
    ]
    for p in same:
        assert p.config == b.config and p.gpus == b.gpus


NUMBER = re.compile(r"(?<![A-Za-z\d.,])\$?\d[\d,]*(?:\.\d+)?%?")
"""A figure in a sentence (not the digits of a name such as p90)."""


def _numbers(sentence: str, configs: list[str]) -> list[str]:
    for c in configs:  # a configuration is quoted whole, its own digits are its own
        sentence = sentence.replace(c, "")
    return NUMBER.findall(sentence)


def _allowed(result: PlanResult, bind: dict[str, Any], ev_like: Any) -> set[str]:
    req = result.request
    out = {count(req.max_gpus), count(result.best.gpus), ms(req.ttft_ms), ms(req.tpot_ms)}
    for key in ("value", "limit"):
        v = bind.get(key)
        if isinstance(v, float | int):
            out |= {ms(v), count(v), num(v, 3)}
    values = [bind.get("objective_value")]
    nxt = bind.get("next") or {}
    values.append(nxt.get("objective_value"))
    out |= {count(nxt["gpus"])} if nxt else set()
    for v in values:
        if isinstance(v, float):
            out |= set(NUMBER.findall(objective_text(ev_like, v)))
    for h in bind.get("headroom", []):
        out |= {ms(h["limit"]), ms(h["value"]), count(h["value"])}
    out |= {num(x, 3) for x in (req.rate_per_s, req.concurrency) if x}
    out |= {count(req.concurrency)} if req.concurrency else set()
    out.add(f"{req.confidence:.0%}")
    return {s.split(" ")[0] for s in out}


def test_every_figure_in_a_sentence_is_a_field_beside_it(result: PlanResult) -> None:
    ev = evaluate_request(result.request)
    bind: dict[str, Any] = dict(result.binding)
    sentence = str(bind["sentence"])
    configs = [c for c in (bind.get("next_config"), (bind.get("next") or {}).get("change")) if c]
    allowed = _allowed(result, bind, ev)
    h = result.best.headroom
    for m in ("ttft", "tpot"):
        allowed |= {ms(h[m]["band_edge_ms"]).split(" ")[0]}  # type: ignore[index]
    change = str((bind.get("next") or {}).get("change", ""))
    for x in _numbers(change, [str(bind.get("next_config") or "")]):
        allowed.add(x)  # the change names its own counts (GPUs, clients), checked below
    for x in _numbers(sentence, [str(c) for c in configs]):
        assert x.lstrip("$") in {a.lstrip("$") for a in allowed}, (x, sentence, sorted(allowed))
    assert not re.search(r"\b1 (GPUs|clients|running requests)\b", sentence), sentence


def test_next_plan_names_its_gpu_type_when_it_changes() -> None:
    r = plan(PlanRequest(**{**BASE, "objective": "throughput-per-gpu"}))
    nxt = r.binding.get("next")
    if isinstance(nxt, dict) and nxt["gpu"] != r.gpu:
        assert " on " in str(nxt["change"]) and str(nxt["change"]) in str(r.binding["sentence"])
    for row in r.per_gpu_type.values():
        bind = row["binding"]
        if isinstance(bind, dict):
            assert not re.search(r"\b1 GPUs\b", str(bind["sentence"]))


def test_infeasible_names_the_budget_when_the_budget_fails() -> None:
    req = PlanRequest(
        **{**BASE, "model": "llama-3.1-70b", "rate_per_s": 40.0, "tpot_ms": 40.0, "ttft_ms": 1000}
    )
    with pytest.raises(InfeasibleError) as err:
        plan(req)
    assert err.value.binding_constraint == "GPU budget"
    assert "--max-gpus 8" in str(err.value) and "raise --max-gpus" in str(err.value)


def test_fleet_objective_cost_or_fewest_gpus() -> None:
    """One class served by a 2-GPU option at $1/GPU-hour or a 1-GPU option at $3: cost takes the
    first ($2 against $3 per hour), gpus the second."""
    from solvers.fleet import FleetSpec, Options, solve_options

    spec = FleetSpec.model_validate(
        {
            "classes": [
                {"name": "a", "model": "llama-3.1-8b", "rate_per_s": 10, "isl": 100, "osl": 10}
                | {"ttft_ms": 500, "tpot_ms": 50}
            ],
            "gpus": [{"gpu": "h100", "available": 8}, {"gpu": "h200", "available": 8}],
        }
    )
    opt = Options(
        klass=(0, 0), gtype=(0, 1), gpus=(2, 1), rps=(10.0, 10.0), price=(1.0, 3.0), config=("", "")
    )
    assert spec.objective == "cost"
    assert solve_options(spec, opt)[0] == [1, 0]
    assert solve_options(spec.model_copy(update={"objective": "gpus"}), opt)[0] == [0, 1]


def test_sweep_spec_takes_objective_or_objectives() -> None:
    from pydantic import ValidationError

    from solvers.sweep import SweepSpec

    base = {
        "models": ["llama-3.1-8b"],
        "gpu_sets": [{"name": "h", "gpus": ["h100"], "max_gpus": 8}],
        "workloads": [{"name": "w", "isl": 100, "osl": 10, "rate_per_s": 1}],
        "slos": [{"name": "s", "ttft_ms": 500, "tpot_ms": 50}],
    }
    assert SweepSpec.model_validate(base).objectives == ("cost",)
    assert SweepSpec.model_validate({**base, "objective": "gpus"}).objectives == ("gpus",)
    with pytest.raises(ValidationError):
        SweepSpec.model_validate({**base, "objective": "gpus", "objectives": ["cost"]})
