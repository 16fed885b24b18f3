"""Strict parsers built from the engines' own argument lists (planner/emitters/engine_args.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from planner.emitters import engine_args as ea

GOOD = {
    ("vllm", "serve"): "Qwen/Qwen3-32B --host 0.0.0.0 --port 8000 --tensor-parallel-size 2 "
    "--pipeline-parallel-size 1 --data-parallel-size 4 --enable-expert-parallel "
    "--max-num-seqs 64 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 "
    "--kv-cache-dtype fp8 --quantization fp8 --max-model-len 32768 "
    "--max-cudagraph-capture-size 256 "
    '--kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'',
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
    ("trtllm", "serve"): "nvidia/DeepSeek-R1-NVFP4 --host 0.0.0.0 --port 8000 "
    "--backend pytorch --extra_llm_api_options extra.yaml",
    ("trtllm", "router"): "--http-host 0.0.0.0 --http-port 8000 --router-mode round-robin "
    "--discovery-backend file",
    ("trtllm", "worker"): "--model nvidia/DeepSeek-R1-NVFP4 --extra-engine-args extra.yaml "
    "--disaggregation-mode prefill --discovery-backend etcd",
    ("trtllm", "bench"): "--backend openai --model M --host 127.0.0.1 --port 8000 "
    "--dataset-name random --random-input-len 1024 --random-output-len 256 "
    "--random-prefix-len 0 --num-prompts 640 --max-concurrency 64 --ignore-eos",
    ("vllm", "router"): "--vllm-pd-disaggregation --prefill http://node0:8100 "
    "--prefill http://node0:8101 --decode http://node1:8102 --policy round_robin "
    "--kv-connector nixl --host 0.0.0.0 --port 8192",
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
    ("sglang", "serve", "--model-path M --disaggregation-transfer-backend ucx", "invalid choice"),
    ("sglang", "serve", "--model-path M --load-format pickle", "invalid choice"),
    ("sglang", "serve", "--model-path M --cuda-graph-max-bs 8", "unrecognized arguments"),
    ("sglang", "bench", "--random-input-len 1k", "invalid int value"),
    ("sglang", "serve", "--tp-size 2", "required: --model-path"),
    ("sglang", "router", "--pd-disagregation", "unrecognized arguments"),
    ("trtllm", "serve", "M --backend tensorrt_llm", "invalid choice"),
    ("trtllm", "serve", "M --tp_size two", "invalid int value"),
    ("trtllm", "serve", "M --tensor-parallel-size 2", "unrecognized arguments"),
    ("trtllm", "serve", "--port 8000", "required: model"),
    ("trtllm", "router", "--http-port soon", "invalid int value"),
    ("trtllm", "router", "--router-mode fastest", "invalid choice"),
    ("trtllm", "worker", "--disaggregation-mode both", "invalid choice"),
    ("trtllm", "bench", "--model M --backend sglang", "invalid choice"),
    ("trtllm", "bench", "--backend openai", "required: --model"),
    ("vllm", "router", "--port http", "invalid int value"),
    ("vllm", "router", "--policy fastest", "invalid choice"),
]

GOOD_LLM_API = {
    "tensor_parallel_size": 8,
    "pipeline_parallel_size": 1,
    "enable_attention_dp": True,
    "moe_expert_parallel_size": 8,
    "max_batch_size": 64,
    "max_num_tokens": 8192,
    "enable_chunked_prefill": True,
    "max_seq_len": 32768,
    "disable_overlap_scheduler": True,
    "kv_cache_config": {"free_gpu_memory_fraction": 0.85, "dtype": "fp8"},
    "cuda_graph_config": {"max_batch_size": 64, "enable_padding": True},
    "cache_transceiver_config": {"backend": "UCX", "max_tokens_in_buffer": 8192},
}


def _argv(text: str) -> list[str]:
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


def test_llm_api_yaml_accepts_the_keys_the_emitter_writes() -> None:
    assert ea.check_llm_api_yaml(GOOD_LLM_API, "trtllm") == []
    assert "kv_cache_config" in ea.yaml_keys("trtllm")["models"]["TorchLlmArgs"]


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"tensor_paralel_size": 8}, "tensor_paralel_size: unknown key"),
        (
            {"kv_cache_config": {"free_gpu_mem_fraction": 0.9}},
            "kv_cache_config.free_gpu_mem_fraction: unknown key",
        ),
        ({"max_batch_size": "64"}, "max_batch_size: str '64' is not int"),
        ({"max_batch_size": True}, "max_batch_size: bool True is not int"),
        ({"enable_attention_dp": None}, "enable_attention_dp: null is not allowed"),
        (
            {"cache_transceiver_config": {"backend": "UCC"}},
            "cache_transceiver_config.backend: 'UCC' is not allowed (allowed: DEFAULT, UCX",
        ),
        ({"cuda_graph_config": 5}, "cuda_graph_config: int 5 is not model"),
    ],
)
def test_llm_api_yaml_problems(patch: dict[str, object], message: str) -> None:
    problems = ea.check_llm_api_yaml({**GOOD_LLM_API, **patch}, "trtllm")
    assert len(problems) == 1 and problems[0].startswith(message), problems


def test_only_trtllm_has_an_llm_api_schema() -> None:
    with pytest.raises(ea.EngineArgError, match="no LLM-API YAML schema"):
        ea.yaml_keys("vllm")
    assert ea.check_llm_api_yaml(["not", "a", "mapping"], "trtllm")[0].startswith("<top>")


def test_every_tool_builds_and_names_its_program() -> None:
    expected = {
        "vllm": {"serve": "vllm serve", "bench": "vllm bench serve", "router": "vllm-router"},
        "sglang": {
            "serve": "python -m sglang.launch_server",
            "bench": "python -m sglang.benchmark.serving",
            "router": "python -m sglang_router.launch_router",
        },
        "trtllm": {
            "serve": "trtllm-serve",
            "router": "python -m dynamo.frontend",
            "worker": "python -m dynamo.trtllm",
            "bench": "python -m tensorrt_llm.serve.scripts.benchmark_serving",
        },
    }
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
    with pytest.raises(ea.EngineArgError, match="has no tool 'proxy'"):
        ea.build_parser("vllm", "proxy")


GOLDEN = Path(__file__).parent / "golden"


def _commands(text: str) -> list[list[str]]:
    """Each command of a launch/benchmark script: continuations joined, leading VAR=value
    assignments and a trailing `&` dropped."""
    out = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words.pop(0)
        if words and words[-1] == "&":
            words.pop()
        out.append(words)
    return out


def _tool_of(engine: str, words: list[str]) -> tuple[str, int] | None:
    progs = sorted(
        ((ea.program(engine, t).split(), t) for t in ea.tools(engine)), key=lambda p: -len(p[0])
    )
    for prog, tool in progs:
        if words[: len(prog)] == prog:
            return tool, len(prog)
    return None


def test_golden_emitted_commands_parse() -> None:
    checked = 0
    for folder in sorted(GOLDEN.iterdir()):
        engine = folder.name.split("_")[0]
        for script in sorted(folder.glob("*.sh")):
            for words in _commands(script.read_text()):
                found = _tool_of(engine, words)
                if found is None:
                    continue
                ea.parse_command(engine, found[0], words[found[1] :])
                checked += 1
        for extra in sorted(folder.glob("trtllm-*.yaml")):
            assert ea.check_llm_api_yaml(yaml.safe_load(extra.read_text()), "trtllm") == [], extra
            checked += 1
    assert checked >= 30  # every golden engine, router and benchmark command
