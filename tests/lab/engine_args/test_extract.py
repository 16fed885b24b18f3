"""extract.py reads argument names, types and choices from source text (synthetic trees)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

from lab.engine_args import extract


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def _vllm_tree(root: Path) -> None:
    for pkg in (
        "vllm",
        "vllm/engine",
        "vllm/entrypoints",
        "vllm/entrypoints/common",
        "vllm/benchmarks",
        "vllm/config",
        "vllm/model_executor",
        "vllm/model_executor/layers",
        "vllm/model_executor/layers/quantization",
    ):
        _write(root, f"{pkg}/__init__.py", "")
    _write(
        root,
        "vllm/model_executor/layers/quantization/__init__.py",
        """
        from typing import Literal, get_args
        QuantizationMethods = Literal["fp8", "awq"]
        QUANTIZATION_METHODS: list[str] = list(get_args(QuantizationMethods))
    """,
    )
    _write(
        root,
        "vllm/config/cache.py",
        """
        from typing import Literal, get_args
        CacheDType = Literal["auto", "fp8"]
        KV_CACHE_DTYPES: list[str] = list(get_args(CacheDType))

        @config
        class CacheConfig:
            cache_dtype: CacheDType | str = "auto"
            block_size: int | None = None
            swap: bool = False
            policy: Literal["fcfs", "priority"] = "fcfs"
            sizes: list[int] | None = None
    """,
    )
    _write(
        root,
        "vllm/engine/arg_utils.py",
        """
        from vllm.config.cache import CacheConfig
        from vllm.model_executor.layers.quantization import QuantizationMethods

        class EngineArgs:
            @staticmethod
            def add_cli_args(parser):
                cache_kwargs = get_kwargs(CacheConfig)
                group = parser.add_argument_group("cache")
                group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                group.add_argument("--block-size", "-b", **cache_kwargs["block_size"])
                group.add_argument("--swap", **cache_kwargs["swap"])
                group.add_argument("--policy", **cache_kwargs["policy"])
                group.add_argument("--sizes", **cache_kwargs["sizes"])
                parser.add_argument("--quantization", type=str, default=None)
                return parser
    """,
    )
    _write(
        root,
        "vllm/entrypoints/common/cli_args.py",
        """
        from vllm.engine.arg_utils import EngineArgs

        def make_arg_parser(parser):
            parser.add_argument("model_tag", type=str, nargs="?")
            parser.add_argument("--port", type=int, default=8000)
            parser = EngineArgs.add_cli_args(parser)
            return parser
    """,
    )
    _write(
        root,
        "vllm/benchmarks/serve.py",
        """
        BACKENDS = {"vllm": 1, "openai": 2}

        def add_cli_args(parser):
            parser.add_argument("--backend", type=str, choices=list(BACKENDS.keys()))
            parser.add_argument("--ignore-eos", action="store_true")
    """,
    )


def test_vllm_rules_from_source(tmp_path: Path) -> None:
    _vllm_tree(tmp_path)
    tools = extract.vllm_tools(tmp_path)
    serve = {a["flags"][0]: a for a in tools["serve"]["arguments"]}
    assert serve["model_tag"] == {
        "flags": ["model_tag"],
        "positional": True,
        "takes_value": True,
        "type": "str",
        "nargs": "?",
    }
    assert serve["--port"]["type"] == "int"
    assert serve["--block-size"]["flags"] == ["--block-size", "-b"]
    assert serve["--block-size"]["nullable"] is True
    assert serve["--swap"] == {"flags": ["--swap", "--no-swap"], "takes_value": False}
    assert serve["--policy"]["choices"] == ["fcfs", "priority"]
    assert serve["--sizes"]["nargs"] == "+" and serve["--sizes"]["type"] == "int"
    # Literal | str takes any string at parse time; the config check supplies the choices.
    assert serve["--kv-cache-dtype"]["choices"] == ["auto", "fp8"]
    assert "CacheConfig" in serve["--kv-cache-dtype"]["choices_checked_by"]
    assert serve["--quantization"]["choices"] == ["fp8", "awq"]
    bench = {a["flags"][0]: a for a in tools["bench"]["arguments"]}
    assert bench["--backend"]["choices"] == ["vllm", "openai"]
    assert bench["--ignore-eos"]["takes_value"] is False


def test_written_file_cites_its_source(tmp_path: Path) -> None:
    _vllm_tree(tmp_path)
    out = tmp_path / "out.yaml"
    rc = extract.main(
        ["vllm", str(tmp_path), "--tag", "v0.0.1", "--commit", "abc123", "--out", str(out)]
    )
    data = yaml.safe_load(out.read_text())
    assert rc == 0 and data["source"]["commit"] == "abc123"
    assert data["tools"]["serve"]["count"] == len(data["tools"]["serve"]["arguments"])
    assert extract.main(["vllm", str(tmp_path), "--tag", "v0.0.1", "--out", str(out)]) == 2


def test_sglang_dataclass_fields(tmp_path: Path) -> None:
    for pkg in ("sglang", "sglang/srt", "sglang/srt/arg_groups", "sglang/benchmark"):
        _write(tmp_path, f"{pkg}/__init__.py", "")
    _write(
        tmp_path,
        "sglang/srt/arg_groups/fields.py",
        """
        from typing import Literal, Optional
        from sglang.srt.arg_groups.arg_utils import A, Arg
        QUANT = ["fp8", "modelopt_fp4"]

        class Model(Struct):
            model_path: A[str, Arg(help="weights", aliases=["--model"])]
            quantization: A[Optional[str], Arg(help="q", choices=QUANT)] = None
            mode: A[Literal["null", "prefill"], "disagg mode"] = "null"
            tp_size: A[int, Arg(help="tp", cli_name="--tp-size")] = 1
            hidden: A[int, Arg(help="x", no_cli=True)] = 0
            flag: A[bool, "a switch"] = False
            plain: int = 3
    """,
    )
    _write(
        tmp_path,
        "sglang/srt/server_args.py",
        """
        from sglang.srt.arg_groups.fields import Model
        _INPUT_NAMESPACES = [Model]

        class ServerArgs:
            @staticmethod
            def add_cli_args(parser):
                add_cli_args_from_dataclass(parser, ServerArgs)
                parser.add_argument("--config", type=str)
    """,
    )
    _write(
        tmp_path,
        "sglang/benchmark/serving.py",
        """
        def cli_main():
            parser = ArgumentParser()
            parser.add_argument("--num-prompts", type=int)
    """,
    )
    tools = extract.sglang_tools(tmp_path)
    serve = {a["flags"][0]: a for a in tools["serve"]["arguments"]}
    assert set(serve) == {
        "--model-path",
        "--quantization",
        "--mode",
        "--tp-size",
        "--flag",
        "--config",
    }
    assert serve["--model-path"]["flags"] == ["--model-path", "--model"]
    assert serve["--model-path"]["required"] is True
    assert serve["--quantization"]["choices"] == ["fp8", "modelopt_fp4"]
    assert serve["--mode"]["choices"] == ["null", "prefill"]
    assert serve["--flag"]["takes_value"] is False
    assert tools["bench"]["arguments"][0]["type"] == "int"
