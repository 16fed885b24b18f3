"""``plan --trace`` with prefix caching: the options searched (routing x host x SSD), the hit
share priced as skipped prefill in the plan's own search, the choice by the objective with ties to
less tier memory, the CLI, and the emitted flags of the chosen option."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hardware.errors import PlannerInputError
from planner.cli.main import main
from planner.emitters.bundle import engine_build
from planner.emitters.plan_file import parse_plan
from planner.emitters.writer import argv
from planner.workload.mooncake import to_jsonl
from planner.workload.trace_gen import AgenticSpec, generate_agentic
from planner.workload.traces import Trace
from solvers.plan import plan
from solvers.plan_models import PlanRequest
from solvers.plan_prefix import PrefixPlanRequest, options, plan_stated_hit, plan_with_prefix

MOONCAKE = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "mooncake"


@pytest.fixture(scope="module")
def agentic() -> Trace:
    return generate_agentic(
        AgenticSpec(sessions=150, session_rate=0.5, think_s=8.0, seed=5, max_context_tokens=32768)
    )


def _req(tr: Trace) -> PlanRequest:
    return PlanRequest(
        model="llama-3.1-8b",
        gpus=("h100",),
        max_gpus=16,
        isl=round(float(tr.isl.mean())),
        osl=round(float(tr.osl.mean())),
        max_isl=int(tr.isl.max()),
        max_osl=int(tr.osl.max()),
        rate_per_s=len(tr) / tr.duration_s,
        ttft_ms=800,
        tpot_ms=40,
        mode="agg",
        confidence=0,
    )


def test_prefix_hit_is_skipped_prefill_in_the_search(agentic: Trace) -> None:
    req = _req(agentic)
    none, cached = plan(req), plan(req.model_copy(update={"prefix_hit": 0.6}))
    assert cached.best.cost_per_hour_usd <= none.best.cost_per_hour_usd
    ttft: Any = [r.best.predicted["ttft_ms"] for r in (cached, none)]
    assert ttft[0]["mean"] < ttft[1]["mean"]


def test_options_and_choice(agentic: Trace) -> None:
    res = plan_with_prefix(agentic, _req(agentic), PrefixPlanRequest(host_kv_gib=(0.0, 64.0)))
    pc: Any = res.prefix_cache
    assert pc is not None
    opts = pc["options"]
    assert isinstance(opts, list)
    assert opts[0]["routing"] == "none" and opts[0]["cache"] is None
    keys = [(o["routing"], o["host_kv_gib"]) for o in opts[1:]]
    assert set(keys) == {(r, h) for r in ("round-robin", "prefix", "session") for h in (0.0, 64.0)}
    for o in opts[1:]:
        tiers = {t["tier"]: t["hit_rate"] for t in o["cache"]["tiers"]}
        assert o["prefix_hit"] == pytest.approx(sum(tiers.values()))
        assert ("host" in tiers) == (o["host_kv_gib"] > 0)
        assert o["cache"]["prefill_tokens_saved"] > 0
    chosen = opts[pc["chosen"]]
    assert chosen["cost_per_hour_usd"] == min(o["cost_per_hour_usd"] for o in opts)
    assert chosen["cost_per_hour_usd"] == res.best.cost_per_hour_usd
    assert chosen["cost_per_hour_usd"] < opts[0]["cost_per_hour_usd"], "reuse saves GPUs here"
    ties = [o for o in opts if o["cost_per_hour_usd"] == chosen["cost_per_hour_usd"]]
    assert chosen["host_kv_gib"] == min(o["host_kv_gib"] for o in ties)
    assert pc["routing"] == chosen["routing"] and pc["enabled"] is True
    assert res.slo["ttft_ms"] == 800 and res.request.ttft_ms == 800


def test_options_refuse_session_routing_without_sessions(agentic: Trace) -> None:
    bare = Trace(
        arrival_s=agentic.arrival_s, isl=agentic.isl, osl=agentic.osl, blocks=agentic.blocks
    )
    assert {k[0] for k in options(bare, PrefixPlanRequest())} == {"round-robin", "prefix"}
    with pytest.raises(PlannerInputError, match="--routing"):
        options(bare, PrefixPlanRequest(routing=("session",)))


def test_stated_hit_without_hashes(agentic: Trace) -> None:
    res = plan_stated_hit(_req(agentic), 0.5)
    assert res.prefix_cache is not None and res.prefix_cache["source"] == "--prefix-hit"
    assert res.request.prefix_hit == 0.5


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(args)
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_plan_trace_and_emit(
    agentic: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.jsonl"
    assert agentic.blocks is not None
    path.write_bytes(
        to_jsonl(agentic.arrival_s, agentic.isl, agentic.osl, agentic.blocks, agentic.session)
    )
    base = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--max-gpus", "16"]
    base += ["--ttft-ms", "800", "--tpot-ms", "40", "--mode", "agg", "--confidence", "0"]
    rc, out, _ = _cli([*base, "--trace", str(path), "--routing", "prefix"], capsys)
    assert rc == 0 and "Prefix caching (trace replay" in out
    json_args = [*base, "--trace", str(path), "--routing", "prefix", "--format", "json"]
    rc, out, _ = _cli(json_args, capsys)
    doc = json.loads(out)
    assert doc["workload"]["isl"] == round(float(agentic.isl.mean()))
    assert doc["prefix_cache"]["routing"] == "prefix"
    ctx, _, build = engine_build(parse_plan(doc), "sglang")
    assert ctx.prefix_cache is not None and ctx.prefix_cache.routing == "prefix"
    assert "--radix-eviction-policy" in argv(build.servers[0][1])
    rc, _, err = _cli([*base, "--trace", str(path), "--isl", "100"], capsys)
    assert rc == 2 and "--isl" in err
    rc, _, err = _cli([*base, "--trace", str(path), "--prefix-hit", "0.3"], capsys)
    assert rc == 2 and "--prefix-hit" in err
    rc, _, err = _cli([*base, "--osl", "100"], capsys)
    assert rc == 2 and "--isl" in err


@pytest.mark.skipif(not MOONCAKE.is_dir(), reason="../shared/traces/mooncake not present")
def test_mooncake_conversation_plan_saves_gpus() -> None:
    from planner.workload.traces import read_trace

    tr = read_trace(MOONCAKE / "conversation_trace.jsonl")
    req = _req(tr).model_copy(
        update={"model": "llama-3.1-70b", "gpus": ("h200",), "max_gpus": 64, "mode": "auto"}
    )
    req = req.model_copy(update={"ttft_ms": 2000, "tpot_ms": 50, "confidence": 0.8})
    res = plan_with_prefix(tr, req, PrefixPlanRequest(routing=("prefix",)))
    pc: Any = res.prefix_cache
    assert pc is not None
    none, chosen = pc["options"][0], pc["options"][pc["chosen"]]
    assert chosen["gpus_bought"] < none["gpus_bought"]
    assert 0.2 < chosen["prefix_hit"] <= 0.374 + 1e-3  # at most the unbounded share


def test_a_prefix_hit_plan_predicts_what_estimate_predicts() -> None:
    """The plan's candidates with a prefix hit equal ``planner estimate --prefix-hit`` on the
    same deployment (one serving model, the hit skips prefill in both)."""
    import numpy as np

    from hardware.catalog import get_gpu
    from planner.perf.estimate import estimate
    from planner.workload.spec import fixed
    from solvers.describe import deployment
    from solvers.plan_core import evaluate_request

    req = PlanRequest(
        model="llama-3.1-70b",
        gpus=("h200",),
        max_gpus=8,
        isl=8000,
        osl=300,
        rate_per_s=1.0,
        ttft_ms=1500,
        tpot_ms=40,
        mode="agg",
        confidence=0,
        prefix_hit=0.4,
    )
    ev = evaluate_request(req)
    sel = np.flatnonzero(ev.meets())
    assert sel.size
    for i in sel[:3].tolist():
        b, j = ev.blocks[int(ev.block_of[i])], int(ev.local[i])
        dep = deployment(ev.model, b, j, req.isl, req.osl)
        wl = fixed(req.isl, req.osl, rate_per_s=1.0).model_copy(update={"prefix_hit": 0.4})
        e = estimate(ev.model, get_gpu("h200"), wl, backend=req.backend, agg=dep.agg)
        assert ev.ttft[i] == pytest.approx(e.ttft_ms.p90, rel=1e-9)
        assert ev.tpot[i] == pytest.approx(e.tpot_ms.p90, rel=1e-9)
