"""Contract of every emitted bundle: the model argument is the model's identity, quantization
flags agree with the checkpoint, and the processes use exactly the plan's GPUs.

Runs over every bundled checkpoint x {vllm, sglang, trtllm} x {agg, disagg}.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

import planner.emitters.engine_args as ea
from planner.emitters.bundle import bench_command, build_bundle, engine_build
from planner.emitters.flag_table import Flags
from planner.emitters.plan_file import parse_plan
from planner.emitters.types import Command, EngineBuild
from planner.emitters.writer import argv
from planner.engines.registry import BUILTIN
from planner.errors import PlannerInputError
from planner.model.bundled import bundled_models, load_model
from planner.model.spec import ModelSpec
from tests.planner.emitters.plans import default_agg_plan

ENGINES = tuple(BUILTIN)

MODELS = tuple(sorted(bundled_models()))


def _worker(tp: int, dp: int, ep: int, quant: str, workers: int = 1) -> dict[str, Any]:
    return {
        "parallel": {"tp": tp, "dp": dp, "ep": ep},
        "max_num_seqs": 64,
        "max_num_batched_tokens": 8192,
        "gpu_memory_utilization": 0.9,
        "kv_dtype": "bf16",
        "weight_quant": quant,
        "workers": workers,
    }


def plan_for(m: ModelSpec, mode: str, gpu: str = "b200_sxm") -> dict[str, Any]:
    """A plan of ``m`` every engine can launch: DP-attention + EP over 8 ranks for MoE models."""
    plan = default_agg_plan()
    moe = m.moe is not None
    q = m.weight_dtype
    dep = plan["best"]["deployment"]
    dep.update(model=m.name, hf_id=m.hf_id, checkpoint_quant=m.quant.weight_format, gpu=gpu)
    plan.update(model=m.name, gpu=gpu)
    if mode == "agg":
        dep["agg"] = _worker(1, 8, 8, q, 2) if moe else _worker(8, 1, 1, q, 2)
    else:
        del dep["agg"]
        dep.update(
            mode="disagg",
            prefill=_worker(8, 1, 8 if moe else 1, q, 2),
            decode=_worker(1, 8, 8, q) if moe else _worker(4, 1, 1, q, 3),
        )
    return plan


def parse_with_engine_args(backend: str, cmd: Command) -> None:
    """Parse ``cmd`` with the argument list taken from the engine's own source
    (planner/emitters/engine_args.py): a bad name, type or choice raises."""
    words = " ".join(cmd.program)
    tool = next(t for t in ea.tools(backend) if ea.program(backend, t) == words)
    ea.parse_command(backend, tool, argv(cmd)[len(cmd.program) :])


def _value(cmd: Command, flag: str, default: str = "1") -> str:
    words = argv(cmd)
    return words[words.index(flag) + 1] if flag in words else default


def _model_arg(backend: str, cmd: Command) -> str:
    if backend == "sglang":
        return _value(cmd, "--model-path", "")
    return cmd.positional[0] if cmd.positional else _value(cmd, "--model", "")


def _gpus_of(backend: str, cmd: Command, build: EngineBuild, role: str) -> int:
    """GPUs one emitted server process uses, read back from its own flags or YAML."""
    if backend == "vllm":
        return (
            int(_value(cmd, "--tensor-parallel-size"))
            * int(_value(cmd, "--pipeline-parallel-size"))
            * int(_value(cmd, "--data-parallel-size"))
        )
    if backend == "sglang":
        return int(_value(cmd, "--tp-size")) * int(_value(cmd, "--pp-size"))
    name = "trtllm-config.yaml" if role == "agg" else f"trtllm-{role}.yaml"
    tree = yaml.safe_load(next(f.text for f in build.configs if f.name == name))
    return int(tree.get("tensor_parallel_size", 1)) * int(tree.get("pipeline_parallel_size", 1))


@pytest.mark.parametrize("mode", ["agg", "disagg"])
@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize("key", MODELS)
def test_bundle_contract(key: str, backend: str, mode: str) -> None:
    m = load_model(key)
    plan = parse_plan(plan_for(m, mode))
    ctx, _, build = engine_build(plan, backend)
    dep = plan.best.deployment
    assert ctx.model_id == m.hf_id == bundled_models()[key].hf_id
    used = 0
    for slot, cmd in build.servers:
        assert _model_arg(backend, cmd) == m.hf_id
        assert "--quantization" not in argv(cmd), "a pre-quantized checkpoint needs no flag"
        used += _gpus_of(backend, cmd, build, slot.role)
    assert used == dep.total_gpus
    table = {r.flag for r in Flags(backend).rows if r.kind in ("cli", "switch")}
    n = len(build.endpoints)
    bench = [
        bench_command(ctx, Flags(backend), h, port, i, n)
        for i, (h, port) in enumerate(build.endpoints)
    ]
    for cmd in [c for _, c in build.servers] + ([build.router] if build.router else []) + bench:
        assert {flag for flag, _ in cmd.args} <= table
        parse_with_engine_args(backend, cmd)
    for f in build.configs:
        if f.name.startswith("trtllm-"):
            assert ea.check_llm_api_yaml(yaml.safe_load(f.text), backend) == [], f.name
    files = {f.name: f.text for f in build_bundle(plan, backend)}
    assert m.hf_id in files["launch.sh"] and m.hf_id in files["benchmark.sh"]
    assert "quantization" not in "".join(f.text for f in build.configs)


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_bf16_checkpoint_planned_in_fp8_is_quantized_while_loading(backend: str) -> None:
    plan = plan_for(load_model("llama-3.1-70b"), "agg", "h100_sxm")
    plan["best"]["deployment"]["agg"]["weight_quant"] = "fp8"
    _, _, build = engine_build(parse_plan(plan), backend)
    assert all(_value(cmd, "--quantization", "") == "fp8" for _, cmd in build.servers)
    for _, cmd in build.servers:
        parse_with_engine_args(backend, cmd)


def test_trtllm_refuses_load_time_quantization() -> None:
    plan = plan_for(load_model("llama-3.1-70b"), "agg", "h100_sxm")
    plan["best"]["deployment"]["agg"]["weight_quant"] = "fp8"
    with pytest.raises(PlannerInputError, match="cannot convert"):
        build_bundle(parse_plan(plan), "trtllm")


def test_mxfp4_checkpoint_on_hopper_emits_no_fp4_flag() -> None:
    """gpt-oss stores MXFP4: engines read it from the checkpoint (no modelopt_fp4)."""
    plan = parse_plan(plan_for(load_model("gpt-oss-120b"), "agg", "h100_sxm"))
    for backend in ENGINES:
        text = "".join(f.text for f in build_bundle(plan, backend))
        assert "modelopt_fp4" not in text and "--quantization" not in text


@pytest.mark.parametrize("backend", ["sglang", "trtllm"])
def test_nvfp4_on_hopper_is_refused_with_the_reason(backend: str) -> None:
    plan = parse_plan(plan_for(load_model("deepseek-r1-nvfp4"), "agg", "h100_sxm"))
    with pytest.raises(PlannerInputError, match="cannot run nvfp4 .* on hopper"):
        build_bundle(plan, backend)


def test_other_weights_than_the_checkpoint_are_refused() -> None:
    plan = plan_for(load_model("deepseek-r1"), "agg")
    plan["best"]["deployment"]["agg"]["weight_quant"] = "fp4"
    with pytest.raises(PlannerInputError, match="stores fp8"):
        build_bundle(parse_plan(plan), "vllm")


def test_partial_expert_parallel_is_not_launchable_by_vllm() -> None:
    """dp 8 ep 2 (MoE TP 4): SGLang's --ep-size 2 expresses it, vLLM's EP spans all 8 ranks."""
    plan = plan_for(load_model("deepseek-r1"), "agg")
    plan["best"]["deployment"]["agg"]["parallel"] = {"tp": 1, "dp": 8, "ep": 2}
    with pytest.raises(PlannerInputError, match="vllm cannot launch"):
        build_bundle(parse_plan(copy.deepcopy(plan)), "vllm")
    _, _, build = engine_build(parse_plan(plan), "sglang")
    cmd = build.servers[0][1]
    assert (_value(cmd, "--tp-size"), _value(cmd, "--dp-size"), _value(cmd, "--ep-size")) == (
        "8",
        "8",
        "2",
    )


def test_trtllm_attention_dp_with_tp_is_refused() -> None:
    plan = plan_for(load_model("deepseek-r1"), "agg")
    plan["best"]["deployment"]["agg"]["parallel"] = {"tp": 2, "dp": 4, "ep": 8}
    with pytest.raises(PlannerInputError, match="attention at TP 1"):
        build_bundle(parse_plan(plan), "trtllm")


def test_plan_without_identity_is_refused() -> None:
    plan = plan_for(load_model("qwen3-32b"), "agg")
    plan["best"]["deployment"]["hf_id"] = ""
    with pytest.raises(PlannerInputError, match="no identity"):
        parse_plan(plan)


MULTI_NODE_MODELS = ("deepseek-r1", "llama-3.1-70b", "qwen3-235b-a22b")


def multi_node_plan(m: ModelSpec, mode: str, gpu: str) -> dict[str, Any]:
    """Workers wider than a host: DP-attention + EP over 16 ranks (MoE), TP 8 x PP 2 (dense)."""
    plan = plan_for(m, mode, gpu)
    dep = plan["best"]["deployment"]
    wide = _worker(1, 16, 16, m.weight_dtype, 2) if m.moe else _worker(8, 1, 1, m.weight_dtype, 2)
    if not m.moe:
        wide["parallel"]["pp"] = 2
    dep["agg" if mode == "agg" else "decode"] = wide
    return plan


def _host_gpus(backend: str, cmd: Command, build: EngineBuild, role: str) -> int:
    """GPUs one emitted line starts on its host (a multi-node replica: its share)."""
    if backend == "vllm" and "--data-parallel-size-local" in argv(cmd):
        tp, pp = (
            int(_value(cmd, "--tensor-parallel-size")),
            int(_value(cmd, "--pipeline-parallel-size")),
        )
        return tp * pp * int(_value(cmd, "--data-parallel-size-local"))
    if backend in ("vllm", "sglang"):
        return _gpus_of(backend, cmd, build, role) // int(_value(cmd, "--nnodes"))
    return _gpus_of(backend, cmd, build, role)  # trtllm: one mpirun line starts every rank


@pytest.mark.parametrize("gpu", ["h200_sxm", "gb200"])
@pytest.mark.parametrize("mode", ["agg", "disagg"])
@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize("key", MULTI_NODE_MODELS)
def test_multi_node_bundle_contract(key: str, backend: str, mode: str, gpu: str) -> None:
    """One launch line per host (one mpirun line for TensorRT-LLM), every line parsed with the
    engine's own argument list, the lines together start exactly the plan's GPUs, and requests
    go to the head host of each replica only."""
    m = load_model(key)
    plan = parse_plan(multi_node_plan(m, mode, gpu))
    ctx, _, build = engine_build(plan, backend)
    used, hosts = 0, set()
    for slot, cmd in build.servers:
        assert _model_arg(backend, cmd) == m.hf_id
        parse_with_engine_args(backend, cmd)
        used += _host_gpus(backend, cmd, build, slot.role)
        hosts.add(slot.node)
        if backend != "trtllm" and slot.nodes > 1:
            assert int(_value(cmd, "--node-rank", "-1")) == slot.node_rank or (
                int(_value(cmd, "--data-parallel-start-rank", "0"))
                == slot.node_rank * int(_value(cmd, "--data-parallel-size-local"))
            )
        if backend == "vllm" and slot.node_rank > 0:
            assert "--headless" in argv(cmd)
        if backend == "trtllm" and slot.nodes > 1:
            assert cmd.launcher[0] == "mpirun" and cmd.launcher[-1] == "trtllm-llmapi-launch"
    assert used == plan.best.deployment.total_gpus
    assert any(s.nodes > 1 for s in ctx.slots)
    heads = {(s.host, s.port) for s in ctx.heads()}
    if mode == "agg" and len(heads) == 1:
        assert set(build.endpoints) == heads
    else:  # several replicas or P/D: the benchmark goes to the router only
        assert build.router is not None and len(build.endpoints) == 1
    launch = next(f.text for f in build_bundle(plan, backend) if f.name == "launch.sh")
    assert "NODE_RANK" in launch
