"""Contract of every emitted bundle as a production recipe, on fixed deployments (no search).

Over every bundled checkpoint x {vllm, sglang, trtllm} x {agg, disagg}, single-host and
multi-host: the running-request slots, prefill chunk and CUDA-graph batch each emitted process
ends up with (read back from its own flags through the engine's ``per_rank.yaml``) equal the
plan's per-rank values; the maximum model length holds the longest prompt plus the longest answer;
several replicas or a P/D split start a router in front; expert parallelism wider than a host
names the all-to-all backend; an fp8 KV cache is set on every engine.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

import planner.emitters.engine_args as ea
from planner.emitters.bundle import engine_build
from planner.emitters.per_rank import from_flag, per_rank_table
from planner.emitters.plan_file import parse_plan
from planner.emitters.types import Command, EmitContext, EngineBuild, Slot
from planner.emitters.writer import argv
from planner.engines.registry import BUILTIN
from planner.model.bundled import bundled_models, load_model
from planner.model.spec import ModelSpec
from planner.workload.spec import max_lengths
from tests.planner.emitters.plans import default_agg_plan
from tests.planner.emitters.test_identity_contract import parse_with_engine_args

ENGINES = tuple(BUILTIN)
MODELS = tuple(sorted(bundled_models()))
ISL, OSL = 512, 256
WIDE_EP = 16  # two 8-GPU hosts, or four GB200 trays


def _worker(tp: int, dp: int, ep: int, m: ModelSpec, seqs: int, workers: int) -> dict[str, Any]:
    return {
        "parallel": {"tp": tp, "dp": dp, "ep": ep},
        "max_num_seqs": seqs,
        "max_num_batched_tokens": 4096 + seqs,  # distinct from every other value on the line
        "gpu_memory_utilization": 0.88,
        "kv_dtype": "fp8" if m.moe else "bf16",
        "weight_quant": m.weight_dtype,
        "workers": workers,
    }


def _plan(m: ModelSpec, mode: str, gpu: str, wide: bool) -> dict[str, Any]:
    """A fixed deployment every engine can launch: DP attention + EP for MoE models (16 ranks
    over hosts when ``wide``), TP for dense ones (x PP 2 over two hosts when ``wide``)."""
    plan = default_agg_plan()
    max_isl, max_osl = max_lengths(ISL, OSL, None, None, m.max_position_embeddings, m.name)
    plan["workload"] = {
        "isl": ISL,
        "osl": OSL,
        "max_isl": max_isl,
        "max_osl": max_osl,
        "concurrency": 64,
        "rate": None,
    }
    dep = plan["best"]["deployment"]
    dep.update(model=m.name, hf_id=m.hf_id, checkpoint_quant=m.quant.weight_format, gpu=gpu)
    dep["max_model_len"] = max_isl + max_osl
    plan.update(model=m.name, gpu=gpu)
    ranks = WIDE_EP if wide else 8
    moe = m.moe is not None
    if moe:
        wide_w = _worker(1, ranks, ranks, m, 48, 2)
        narrow = _worker(8, 1, 8 if moe else 1, m, 24, 2)
    else:
        wide_w = _worker(8, 1, 1, m, 48, 2)
        if wide:
            wide_w["parallel"]["pp"] = 2
        narrow = _worker(4, 1, 1, m, 24, 3)
    if mode == "agg":
        dep["agg"] = wide_w
    else:
        del dep["agg"]
        dep.update(mode="disagg", prefill=narrow, decode=dict(wide_w, workers=1))
    return plan


def _cases() -> list[tuple[str, str, str, bool]]:
    """Every checkpoint single-host; multi-host for every one whose experts split 16 ways and
    for the dense ones with layers for two pipeline stages."""
    out = []
    for key in MODELS:
        m = load_model(key)
        fits = (m.moe is None and m.num_heads % 8 == 0) or (
            m.moe is not None and m.moe.num_experts % 8 == 0
        )
        if not fits:
            continue
        wide_ok = m.moe.num_experts % WIDE_EP == 0 if m.moe is not None else m.num_layers >= 2
        for backend in ENGINES:
            for mode in ("agg", "disagg"):
                out.append((key, backend, mode, False))
                if wide_ok:
                    out.append((key, backend, mode, True))
    return out


CASES = _cases()


def _value(words: list[str], flag: str, default: str) -> str:
    return words[words.index(flag) + 1] if flag in words else default


def _config(build: EngineBuild, role: str) -> dict[str, Any]:
    name = "trtllm-config.yaml" if role == "agg" else f"trtllm-{role}.yaml"
    tree: dict[str, Any] = yaml.safe_load(next(f.text for f in build.configs if f.name == name))
    return tree


def _dotted(tree: dict[str, Any], key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        node = node[part]
    return node


def emitted_per_rank(
    backend: str, cmd: Command, build: EngineBuild, slot: Slot, spec: int
) -> dict[str, int]:
    """Slots, chunk and graph batch one attention-DP rank of this process ends up with, read
    from the emitted flags (or LLM-API YAML) through the engine's per-rank table."""
    table = per_rank_table(backend)
    if backend == "trtllm":
        tree = _config(build, slot.role)
        dp = int(tree["tensor_parallel_size"]) if tree.get("enable_attention_dp") else 1
        raw = {e.param: int(_dotted(tree, e.flag)) for e in table.entries}
    else:
        words = argv(cmd)
        dp_flag = "--data-parallel-size" if backend == "vllm" else "--dp-size"
        dp = int(_value(words, dp_flag, "1"))
        raw = {e.param: int(_value(words, e.flag, "0")) for e in table.entries}
    return {e.param: from_flag(e, raw[e.param], dp, spec) for e in table.entries}


def _max_len(backend: str, cmd: Command, build: EngineBuild, role: str) -> int:
    if backend == "trtllm":
        return int(_config(build, role)["max_seq_len"])
    flag = "--max-model-len" if backend == "vllm" else "--context-length"
    return int(_value(argv(cmd), flag, "0"))


def _kv_dtype(backend: str, cmd: Command, build: EngineBuild, role: str) -> str:
    if backend == "trtllm":
        return str(_config(build, role)["kv_cache_config"]["dtype"])
    return _value(argv(cmd), "--kv-cache-dtype", "")


def _names_a2a(backend: str, cmd: Command) -> bool:
    if backend == "vllm":
        return _value(argv(cmd), "--all2all-backend", "").startswith("deepep")
    if backend == "sglang":
        return _value(argv(cmd), "--moe-a2a-backend", "") == "deepep"
    return dict(cmd.env).get("TRTLLM_FORCE_COMM_METHOD", "").startswith("DEEPEP")


def check_recipe(ctx: EmitContext, build: EngineBuild, backend: str) -> None:
    """Every assertion of the module docstring on one built bundle."""
    wl = ctx.workload
    assert wl.max_isl is not None and wl.max_osl is not None
    spec = ctx.speculative.draft_tokens if ctx.speculative is not None else 0
    for slot, cmd in build.servers:
        w = slot.worker
        want = {
            "max_batch": w.max_num_seqs,
            "chunk": w.max_num_batched_tokens,
            "cuda_graph_max": w.max_num_seqs,
        }
        assert emitted_per_rank(backend, cmd, build, slot, spec) == want, (slot.role, cmd)
        assert _max_len(backend, cmd, build, slot.role) >= wl.max_isl + wl.max_osl
        if w.kv_dtype == "fp8":
            assert _kv_dtype(backend, cmd, build, slot.role) in ("fp8", "fp8_e4m3")
        if w.parallel.ep > 8:
            assert _names_a2a(backend, cmd), (slot.role, cmd)
    replicas = len(ctx.heads())
    if replicas > 1 or ctx.deployment.mode == "disagg":
        assert build.router is not None
        assert len(build.endpoints) == 1, "clients go to the router only"
        router = " ".join(argv(build.router))
        assert all(f"{s.host}:{s.port}" in router for s in ctx.heads()) or backend == "trtllm"
    else:
        assert build.router is None
    for cmd in [c for _, c in build.servers] + ([build.router] if build.router else []):
        parse_with_engine_args(backend, cmd)  # every flag against the engine's own lists
    for f in build.configs:
        if f.name.startswith("trtllm-"):
            assert ea.check_llm_api_yaml(yaml.safe_load(f.text), backend) == [], f.name


@pytest.mark.parametrize(("key", "backend", "mode", "wide"), CASES)
def test_recipe_contract(key: str, backend: str, mode: str, wide: bool) -> None:
    m = load_model(key)
    gpu = "h200_sxm" if m.weight_dtype != "fp4" else "b200_sxm"
    ctx, _, build = engine_build(parse_plan(_plan(m, mode, gpu, wide)), backend)
    if wide:
        assert any(s.nodes > 1 for s in ctx.slots), "a worker wider than a host"
    check_recipe(ctx, build, backend)


def test_every_bundled_model_is_covered() -> None:
    covered = {c[0] for c in CASES}
    assert covered == set(MODELS), set(MODELS) - covered
    assert any(c[3] for c in CASES) and {c[1] for c in CASES if c[3]} == set(ENGINES)


@pytest.mark.parametrize("backend", ENGINES)
def test_speculative_decoding_is_launched_with_graphs_for_its_tokens(backend: str) -> None:
    """A deployment that runs MTP with 3 draft tokens: each engine's own spelling, and graphs
    that still cover every running slot (vLLM counts graph sizes in tokens)."""
    m = load_model("deepseek-r1")
    plan = _plan(m, "agg", "h200_sxm", False)
    plan["best"]["speculative"] = {"method": "mtp", "draft_tokens": 3}
    ctx, _, build = engine_build(parse_plan(copy.deepcopy(plan)), backend)
    check_recipe(ctx, build, backend)
    slot, cmd = build.servers[0]
    words = argv(cmd)
    if backend == "vllm":
        spec = json.loads(_value(words, "--speculative-config", "{}"))
        assert spec == {"method": "mtp", "num_speculative_tokens": 3}
        assert int(_value(words, "--max-cudagraph-capture-size", "0")) == 48 * 4
    elif backend == "sglang":
        assert _value(words, "--speculative-algorithm", "") == "EAGLE"
        assert _value(words, "--speculative-num-steps", "") == "3"
        assert _value(words, "--speculative-num-draft-tokens", "") == "4"
    else:
        tree = _config(build, slot.role)
        assert tree["speculative_config"] == {"decoding_type": "MTP", "num_nextn_predict_layers": 3}


def test_the_issue_case_gives_every_sglang_rank_its_planned_slots() -> None:
    """DeepSeek-R1, DP 64 attention ranks of 512 slots each: SGLang divides
    --max-running-requests by --dp-size, so the flag must say 32,768 (it said 512: 8 per rank)."""
    m = load_model("deepseek-r1")
    plan = _plan(m, "agg", "gb200", True)
    plan["best"]["deployment"]["agg"] = _worker(1, 64, 64, m, 512, 1)
    _, _, build = engine_build(parse_plan(plan), "sglang")
    words = argv(build.servers[0][1])
    assert _value(words, "--max-running-requests", "") == str(512 * 64)
    assert _value(words, "--dp-size", "") == "64"
    assert _value(words, "--cuda-graph-max-bs-decode", "") == "512"


@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize("key", ["llama-3.1-70b", "deepseek-v3"])
def test_two_gpu_types_give_each_role_its_own_hosts(key: str, backend: str) -> None:
    """Prefill on H100, decode on H200 (a plan's pair of two types): every per-role flag still
    parses with the engine's own argument lists and holds its planned values, and no host runs
    workers of both roles (a host has one GPU type)."""
    m = load_model(key)
    plan = _plan(m, "disagg", "h200_sxm", False)
    dep = plan["best"]["deployment"]
    dep["prefill_gpu"] = "h100_sxm"
    # half a host each: one GPU type would pack both roles on one host
    half = {"tp": 4, "dp": 1, "ep": 4 if m.moe else 1}
    dep["prefill"].update(parallel=half, workers=1)
    dep["decode"].update(parallel=half, workers=1)
    ctx, _, build = engine_build(parse_plan(plan), backend)
    check_recipe(ctx, build, backend)
    hosts = {r: {s.node for s in ctx.slots if s.role == r} for r in ("prefill", "decode")}
    assert hosts["prefill"] and hosts["decode"] and not hosts["prefill"] & hosts["decode"]
    assert ctx.hosts_of("prefill") == 8 and ctx.hosts_of("decode") == 8
