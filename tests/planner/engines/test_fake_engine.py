"""Adding an engine is one folder plus one registry line: the fake engine of ``fake/`` (vLLM's
constants, its own flags, capabilities, argument list and emitter) estimates, plans and emits
through the CLI like a built-in one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.emitters import engine_args
from planner.engines import engine_names, get_engine, register, unregister
from tests.planner.engines.fake import ENGINE

ESTIMATE = [
    "estimate",
    "--model",
    "llama-3.1-8b",
    "--isl",
    "2000",
    "--osl",
    "200",
    "--gpu",
    "h100",
    "--tp",
    "1",
    "--concurrency",
    "16",
    "--format",
    "json",
]
PLAN = [
    "plan",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100",
    "--max-gpus",
    "2",
    "--isl",
    "2000",
    "--osl",
    "200",
    "--ttft-ms",
    "2000",
    "--tpot-ms",
    "50",
    "--mode",
    "agg",
]


@pytest.fixture
def fake() -> Iterator[str]:
    register(ENGINE)  # the one registry line
    try:
        yield ENGINE.name
    finally:
        unregister(ENGINE.name)


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, object]:
    assert main(argv) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_the_registry_knows_it_only_while_registered(fake: str) -> None:
    assert fake in engine_names() and get_engine(fake) is ENGINE
    assert engine_args.program(fake, "serve") == "fake-serve"
    unregister(fake)
    assert fake not in engine_names()
    assert main([*ESTIMATE, "--backend", fake]) == 2


def test_estimate_equals_the_engine_whose_constants_it_copies(
    fake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = _json(capsys, [*ESTIMATE, "--backend", fake])
    theirs = _json(capsys, [*ESTIMATE, "--backend", "vllm"])
    assert mine.pop("backend") == fake and theirs.pop("backend") == "vllm"
    for metric in ("ttft_ms", "tpot_ms"):  # bands are looked up per engine, predictions are not
        a, b = mine[metric], theirs[metric]
        assert isinstance(a, dict) and isinstance(b, dict)
        assert {k: v for k, v in a.items() if k != "band"} == {
            k: v for k, v in b.items() if k != "band"
        }


def test_plan_and_emit(fake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _json(capsys, [*PLAN, "--backend", fake, "--format", "json"])
    assert plan["best"]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    out = tmp_path / "bundle"
    assert main(["emit", "--plan", str(plan_file), "--backend", fake, "--out", str(out)]) == 0
    launch = (out / "launch.sh").read_text()
    assert "fake-serve" in launch and "--model-path" in launch
    assert "fake-bench" in (out / "benchmark.sh").read_text()
    assert (out / "PLAN.md").is_file()
