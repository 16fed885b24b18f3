"""Strict parsers built from the engines' own argument lists (planner/emitters/engine_args)."""

from __future__ import annotations

import re

import pytest

from planner.emitters import engine_args as ea

GOOD = {
    ("vllm", "serve"): "Qwen/Qwen3-32B --host 0.0.0.0 --port 8000 --tensor-parallel-size 2 "
    "--pipeline-parallel-size 1 --data-parallel-size 4 --enable-expert-parallel "
    "--max-num-seqs 64 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 "
    "--kv-cache-dtype fp8 --quantization fp8 --max-model-len 32768 "
    "--max-cudagraph-capture-size 256 "
    "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'",
    ("vllm", "bench"): "--backend vllm --model Qwen/Qwen3-32B --host 127.0.0.1 --port 8000 "
    "--dataset-name random --random-input-len 1024 --random-output-len 256 "
    "--random-range-ratio 0.0 --num-prompts 640 --max-concurrency 64 --request-rate inf "
    "--ignore-eos",
    ("sglang", "serve"): "--model-path Qwen/Qwen3-32B --host 0.0.0.0 --port 30000 --tp-size 8 "
    "--dp-size 4 --enable-dp-attention --ep-size 8 --max-running-requests 64 "
    "--chunked-prefill-size 8192 --mem-fraction-static 0.85 --kv-cache-dtype fp8_e4m3 "
    "--quantization fp8 --context-length 32768 --cuda-graph-max-bs-decode 256 "
    "--disaggregation-mode prefill --disaggregation-transfer-backend nixl "
    "--disaggregation-bootstrap-port 8998",
    ("sglang", "bench"): "--backend sglang --model Qwen/Qwen3-32B --host 127.0.0.1 "
    "--port 30000 --dataset-name random --random-input-len 1024 --random-output-len 256 "
    "--random-range-ratio 1.0 --num-prompts 640 --max-concurrency 64 --request-rate inf",
    ("sglang", "router"): "--pd-disaggregation --prefill http://10.0.0.1:30000 8998 "
    "--decode http://10.0.0.2:30000 --host 0.0.0.0 --port 8000",
}

BAD = [
    ("vllm", "serve", "M --tensor-parallel-sise 2", "unrecognized arguments"),
    ("vllm", "serve", "M --tensor-parallel-size two", "invalid int value"),
    ("vllm", "serve", "M --quantization modelopt_fp5", "invalid choice"),
    ("vllm", "serve", "M --kv-cache-dtype fp9", "invalid choice"),
    ("vllm", "serve", "M --max-num-seqs", "expected one argument"),
    ("vllm", "serve", "M --gpu-memory-utilization high", "invalid float value"),
    ("vllm", "serve", "M --max-cuda", "unrecognized arguments"),  # no abbreviations
    ("vllm", "bench", "--max-concurrency 6.5", "invalid int value"),
    ("vllm", "bench", "--num-promts 10", "unrecognized arguments"),
    ("sglang", "serve", "--model-path M --quantization modelopt_fp5", "invalid choice"),
    ("sglang", "serve", "--model-path M --kv-cache-dtype fp8", "invalid choice"),
    ("sglang", "serve", "--model-path M --tp-size 2.5", "invalid int value"),
    ("sglang", "serve", "--model-path M --disaggregation-transfer-backend ucx",
     "invalid choice"),
    ("sglang", "serve", "--model-path M --load-format pickle", "invalid choice"),
    ("sglang", "serve", "--model-path M --cuda-graph-max-bs 8", "unrecognized arguments"),
    ("sglang", "bench", "--random-input-len 1k", "invalid int value"),
    ("sglang", "router", "--pd-disagregation", "unrecognized arguments"),
]


def _argv(text: str) -> list[str]:
    import shlex

    return shlex.split(text)


@pytest.mark.parametrize(("engine", "tool"), sorted(GOOD))
def test_known_good_command_parses(engine: str, tool: str) -> None:
    ns = ea.parse_command(engine, tool, _argv(GOOD[engine, tool]))
    assert vars(ns)


def test_values_are_converted() -> None:
    ns = ea.parse_command("vllm", "serve", _argv(GOOD["vllm", "serve"]))
    assert ns.model_tag == "Qwen/Qwen3-32B"
    assert ns.tensor_parallel_size == 2
    assert ns.gpu_memory_utilization == pytest.approx(0.9)
    assert ns.kv_transfer_config["kv_connector"] == "NixlConnector"
    assert ns.enable_expert_parallel is True
    sg = ea.parse_command("sglang", "serve", _argv(GOOD["sglang", "serve"]))
    assert sg.tp_size == 8 and sg.kv_cache_dtype == "fp8_e4m3"


@pytest.mark.parametrize(("engine", "tool", "line", "message"), BAD)
def test_bad_command_is_rejected(engine: str, tool: str, line: str, message: str) -> None:
    with pytest.raises(ea.EngineArgError, match=re.escape(message)):
        ea.parse_command(engine, tool, _argv(line))


def test_every_tool_builds_and_names_its_program() -> None:
    expected = {"vllm": {"serve": "vllm serve", "bench": "vllm bench serve"},
                "sglang": {"serve": "python -m sglang.launch_server",
                           "bench": "python -m sglang.benchmark.serving",
                           "router": "python -m sglang_router.launch_router"}}
    for engine, progs in expected.items():
        assert set(progs) <= set(ea.tools(engine))
        for tool, prog in progs.items():
            assert ea.program(engine, tool) == prog
            assert ea.build_parser(engine, tool).prog == prog


def test_data_cites_its_release() -> None:
    for engine in ("vllm", "sglang"):
        src = ea.load(engine)["source"]
        assert re.fullmatch(r"v\d+\.\d+\.\d+", src["tag"])
        assert "sha256:" in src["artifact"]
    assert ea.load("vllm")["source"]["commit"].startswith("4ba787ec9")


def test_unknown_engine_or_tool_is_one_clear_error() -> None:
    with pytest.raises(ea.EngineArgError, match="allowed: vllm, sglang, trtllm"):
        ea.load("tgi")
    with pytest.raises(ea.EngineArgError, match="has no tool 'router'"):
        ea.build_parser("vllm", "router")
