"""Capacity with prefix caching: scenarios without a cache and per tier set, the hit share priced
as skipped prefill, tier sizes and bandwidths from the memory model and GPU spec, and the CLI's
flags and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from planner.cli.main import main
from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism
from planner.perf.memory_plan import plan_memory
from planner.perf.prefix_cache import GIB, plan_tiers
from planner.workload.mooncake import to_jsonl
from planner.workload.trace_gen import AgenticSpec, generate_agentic
from planner.workload.traces import Trace
from solvers.capacity import CapacityRequest, capacity
from solvers.prefix_tiers import PrefixRequest, prefix_capacity

REQ = CapacityRequest(
    model="llama-3.1-8b",
    gpus=("h100",),
    ttft_ms=800,
    tpot_ms=40,
    window_s=600,
    worker_max_gpus=1,
    confidence=0,
)


@pytest.fixture(scope="module")
def agentic() -> Trace:
    return generate_agentic(
        AgenticSpec(sessions=150, session_rate=0.5, think_s=8.0, seed=5, max_context_tokens=32768)
    )


def test_scenarios_price_the_hit_as_skipped_prefill(agentic: Trace) -> None:
    res = prefix_capacity(agentic, REQ, PrefixRequest(host_kv_gib=64, routing="prefix"))
    pc = res.prefix_cache
    assert pc is not None
    names = [s["name"] for s in pc["scenarios"]]
    assert names == ["none", "hbm", "hbm+host"]
    none, hbm, host = pc["scenarios"]
    assert none["cache"] is None and none["prefix_hit"] == 0
    assert 0.3 < hbm["prefix_hit"] <= host["prefix_hit"] < 1
    assert host["gpu_hours_autoscaled"] <= none["gpu_hours_autoscaled"]
    tiers = {t["tier"]: t for t in host["cache"]["tiers"]}
    assert tiers["host"]["bandwidth_gb_per_s"] == pytest.approx(64.0)  # H100 SXM: its PCIe link
    assert tiers["hbm"]["bandwidth_gb_per_s"] is None and tiers["hbm"]["load_s"] == 0
    if tiers["host"]["tokens"]:
        assert tiers["host"]["load_s"] > 0
    assert set(pc["routing_hit_rates"]) == {"round-robin", "prefix", "session"}
    assert res.autoscaled.gpu_hours == host["gpu_hours_autoscaled"]


def test_more_prefix_hit_never_needs_more_replicas(agentic: Trace) -> None:
    peaks = [
        capacity(agentic, REQ.model_copy(update={"prefix_hit": h})).static_peak.replicas or 0
        for h in (0.0, 0.4, 0.8)
    ]
    assert peaks == sorted(peaks, reverse=True)


def test_tiers_from_memory_model_and_spec() -> None:
    m, gpu = load_model("llama-3.1-8b"), get_gpu("h200")
    mem = plan_memory(m, gpu, Parallelism(tp=1))
    t = plan_tiers(mem, gpu, host_kv_gib=100, ssd_kv_gib=1000)
    assert t.names == ("hbm", "host", "ssd")
    assert t.capacity_blocks[0] == pytest.approx(mem.kv_capacity_tokens / 512)
    per_gib = t.capacity_blocks[0] / (mem.kv_budget_bytes_per_gpu / GIB)
    assert t.capacity_blocks[1] == pytest.approx(100 * per_gib)
    assert t.bandwidth_bytes_per_s[1:] == (55.4e9, 7.88e9)  # H200 spec fields
    assert plan_tiers(mem, gpu, ssd_kv_gib=10, ssd_gbps=3).bandwidth_bytes_per_s[1] == 3e9
    b200 = get_gpu("b200")
    with pytest.raises(PlannerInputError, match="ssd-gbps"):
        plan_tiers(plan_memory(m, b200, Parallelism(tp=1)), b200, ssd_kv_gib=10)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


CAP = ("--model", "llama-3.1-8b", "--gpu", "h100", "--ttft-ms", "800", "--tpot-ms", "40")


def test_cli_capacity_with_a_mooncake_trace(
    capsys: pytest.CaptureFixture[str], agentic: Trace, tmp_path: Path
) -> None:
    f = tmp_path / "a.jsonl"
    assert agentic.blocks is not None
    f.write_bytes(
        to_jsonl(agentic.arrival_s, agentic.isl, agentic.osl, agentic.blocks, agentic.session)
    )
    common = ("capacity", "--trace", str(f), *CAP, "--worker-max-gpus", "1", "--window", "10m")
    rc, out, err = _run(capsys, *common, "--host-kv-gib", "32", "--format", "json")
    assert rc == 0, err
    pc = json.loads(out)["prefix_cache"]
    assert [s["name"] for s in pc["scenarios"]] == ["none", "hbm", "hbm+host"]
    rc, out, err = _run(capsys, *common, "--routing", "session", "--host-kv-gib", "0")
    assert rc == 0, err
    assert "prefix caching, routing session" in out and "hit share of prompt tokens" in out
    for extra, flag in (
        (("--prefix-hit", "0.5"), "--prefix-hit"),
        (("--host-kv-gib", "-1"), "--host-kv-gib"),
        (("--ssd-kv-gib", "10", "--gpu", "b200"), "--ssd-gbps"),
    ):
        rc, _, err = _run(capsys, *common, *extra)
        assert rc == 2 and flag in err, (extra, err)
    plain = tmp_path / "p.csv"
    plain.write_text("arrival_s,isl,osl\n" + "".join(f"{i},{500},{50}\n" for i in range(300)))
    rc, _, err = _run(capsys, "capacity", "--trace", str(plain), *CAP, "--routing", "session")
    assert rc == 2 and "--routing" in err
    rc, out, err = _run(capsys, "capacity", "--trace", str(plain), *CAP, "--prefix-hit", "0.5")
    assert rc == 0 and "prefix hit stated: 0.5" in out, err


def test_hit_rate_curve_is_the_replay_of_one_tier(agentic: Trace) -> None:
    """The Traffic page's curve: monotone in capacity, and at any capacity the hit rate a replay
    with one tier of that size reports."""
    import numpy as np

    from planner.perf.prefix_cache import Tiers, replay
    from solvers.prefix_tiers import hit_rate_curve

    caps = np.array([16.0, 64.0, 256.0, 1024.0, np.inf])
    curve = hit_rate_curve(agentic, 3, "prefix", caps)
    assert np.all(np.diff(curve) >= 0) and 0 < curve[-1] < 1
    one = Tiers(("hbm",), (256.0,), (1.0,), (np.inf,), ("test",), 1.0)
    assert replay(agentic, 3, "prefix", one).hit_rate == pytest.approx(curve[2])
