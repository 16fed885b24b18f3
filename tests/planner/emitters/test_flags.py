"""Every emitted flag is in the flag table for the targeted engine version; YAML parses."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from planner.emitters import build_bundle
from planner.emitters.flag_table import Flags, engine_table
from planner.emitters.plan_file import parse_plan
from planner.emitters.types import OutFile
from planner.engines.registry import BUILTIN
from tests.planner.emitters.plans import PLANS

ENGINES = tuple(BUILTIN)


def versions(engine: str) -> list[str]:
    """Oldest, default and one in between (before the recent renames) of each engine."""
    table = engine_table(engine)
    middle = {"vllm": "0.11.0", "sglang": "0.5.10", "trtllm": "1.1.0"}[engine]
    return [table.min_version, middle, table.default_version]


CASES = [(e, v, m) for e in ENGINES for v in versions(e) for m in sorted(PLANS)]


def commands(text: str) -> Iterator[list[str]]:
    """Shell words of each command in a generated script (comments and control lines dropped)."""
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if (
            words
            and words[0]
            not in {"set", "cd", "if", "fi", "wait", "echo", "exit", "mkdir", "cp", "mv"}
            and not words[0].startswith("run=")
        ):
            yield [w for w in words if "=" not in w or w.startswith("-")]


def flatten(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def bundle(engine: str, version: str, mode: str) -> tuple[OutFile, ...]:
    return build_bundle(parse_plan(PLANS[mode]()), engine, version)


@pytest.mark.parametrize(("engine", "version", "mode"), CASES)
def test_every_flag_is_in_the_table(engine: str, version: str, mode: str) -> None:
    flags = Flags(engine, version)
    cli = {r.flag for r in flags.rows if r.kind in ("cli", "switch")}
    keys = {r.flag for r in flags.rows if r.kind == "yaml"}
    programs = {r.flag for r in flags.rows if r.kind == "program"}
    for f in bundle(engine, version, mode):
        if f.name.endswith(".sh"):
            for words in commands(f.text):
                program = [p for p in programs if words[: len(p.split())] == p.split()]
                assert program, words
                rest = words[len(program[0].split()) :]
                assert {w for w in rest if w.startswith("-")} <= cli, (f.name, words)
        elif f.name.startswith("vllm-"):  # vllm serve --config: long flag names as keys
            assert {f"--{k}" for k in yaml.safe_load(f.text) if k != "model"} <= cli
        elif f.name.endswith(".yaml"):
            assert set(flatten(yaml.safe_load(f.text))) <= keys, f.name


@pytest.mark.parametrize(("engine", "version", "mode"), CASES)
def test_yaml_parses_and_scripts_are_valid_bash(engine: str, version: str, mode: str) -> None:
    for f in bundle(engine, version, mode):
        if f.name.endswith(".yaml"):
            assert isinstance(yaml.safe_load(f.text), dict)
        if f.name.endswith(".sh"):
            subprocess.run(["bash", "-n"], input=f.text, text=True, check=True)


@pytest.mark.parametrize(
    ("engine", "version", "expected"),
    [
        ("vllm", "0.11.0", "--cuda-graph-sizes"),
        ("vllm", "0.33.0", "--max-cudagraph-capture-size"),
        ("sglang", "0.5.10", "--cuda-graph-max-bs"),
        ("sglang", "0.5.23", "--cuda-graph-max-bs-decode"),
    ],
)
def test_renamed_cuda_graph_flags_follow_the_version(
    engine: str, version: str, expected: str
) -> None:
    launch = bundle(engine, version, "agg")[0].text
    assert f"{expected} 128" in launch


def test_trtllm_yaml_values_are_typed() -> None:
    files = {f.name: f for f in bundle("trtllm", "1.2", "disagg")}
    decode = yaml.safe_load(files["trtllm-decode.yaml"].text)
    assert decode["tensor_parallel_size"] == 8 and decode["enable_attention_dp"] is True
    assert decode["moe_expert_parallel_size"] == 8
    assert decode["kv_cache_config"] == {"free_gpu_memory_fraction": 0.85, "dtype": "fp8"}
    assert decode["cache_transceiver_config"]["backend"] == "UCX"
    assert "disagg_config.yaml" not in files  # Dynamo's frontend finds the workers itself
    launch = files["launch.sh"].text
    assert launch.count("--disaggregation-mode prefill") == 2
    assert launch.count("--disaggregation-mode decode") == 1
    assert "python -m dynamo.frontend" in launch
