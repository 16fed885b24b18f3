"""``planner emit`` and ``write_engine_configs``: files written,
bad input is one line and exit 2."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.emitters import write_engine_configs
from planner.engines.registry import BUILTIN
from tests.planner.emitters.plans import default_agg_plan

ENGINES = tuple(BUILTIN)


def plan_path(tmp_path: Path, data: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("engine", ENGINES)
def test_emit_writes_the_bundle(
    engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc, stdout, _ = run(
        capsys,
        "emit",
        "--plan",
        plan_path(tmp_path, default_agg_plan()),
        "--backend",
        engine,
        "--out",
        str(out),
    )
    assert rc == 0
    names = {p.name for p in out.iterdir()}
    assert {"launch.sh", "benchmark.sh", "PLAN.md"} <= names
    assert stdout.count("\n") == len(names)
    assert (out / "launch.sh").stat().st_mode & 0o111


@pytest.mark.parametrize(
    "data",
    [
        {"model": "llama-3.1-70b"},
        [1, 2, 3],
        {**default_agg_plan(), "best": {"gpus": 8}},
    ],
)
def test_not_a_plan_is_one_line_exit_2(
    data: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc, _, err = run(
        capsys, "emit", "--plan", plan_path(tmp_path, data), "--backend", "vllm", "--out", str(out)
    )
    assert rc == 2 and err.count("\n") == 1 and "plan" in err
    assert not out.exists()  # nothing written half-way


def test_missing_field_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = default_agg_plan()
    del data["best"]["deployment"]
    rc, _, err = run(
        capsys,
        "emit",
        "--plan",
        plan_path(tmp_path, data),
        "--backend",
        "sglang",
        "--out",
        str(tmp_path / "o"),
    )
    assert rc == 2 and "best.deployment" in err


def test_invalid_json_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, _, err = run(
        capsys, "emit", "--plan", str(bad), "--backend", "vllm", "--out", str(tmp_path)
    )
    assert rc == 2 and "not valid JSON" in err and err.count("\n") == 1
    rc, _, err = run(
        capsys,
        "emit",
        "--plan",
        str(tmp_path / "nope.json"),
        "--backend",
        "vllm",
        "--out",
        str(tmp_path),
    )
    assert rc == 2 and err.count("\n") == 1


@pytest.mark.parametrize(
    ("engine", "version"),
    [
        ("vllm", "0.34.0"),
        ("vllm", "0.10.2"),
        ("sglang", "0.6.0"),
        ("trtllm", "1.3.0"),
        ("trtllm", "latest"),
    ],
)
def test_version_outside_table_is_one_line_exit_2(
    engine: str, version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    rc, _, err = run(
        capsys,
        "emit",
        "--plan",
        plan_path(tmp_path, default_agg_plan()),
        "--backend",
        engine,
        "--engine-version",
        version,
        "--out",
        str(out),
    )
    assert rc == 2 and err.startswith("error: engine_version") and err.count("\n") == 1
    assert not out.exists()


def test_unknown_backend_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "emit",
                "--plan",
                plan_path(tmp_path, default_agg_plan()),
                "--backend",
                "tgi",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )


def test_write_engine_configs_for_the_plan_command(tmp_path: Path) -> None:
    paths = write_engine_configs(default_agg_plan(), "trtllm", tmp_path / "cfg", version="1.1")
    assert [p.name for p in paths] == [
        "launch.sh",
        "trtllm-config.yaml",
        "benchmark.sh",
        "deployment.json",
        "PLAN.md",
    ]
    assert all(p.is_file() for p in paths)


def test_json_format_lists_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(
        capsys,
        "emit",
        "--plan",
        plan_path(tmp_path, default_agg_plan()),
        "--backend",
        "vllm",
        "--out",
        str(tmp_path / "o"),
        "--format",
        "json",
    )
    assert rc == 0 and json.loads(out)["backend"] == "vllm"


EXPECTED_DEFAULT = {
    "vllm": [
        "vllm serve meta-llama/Llama-3.1-70B-Instruct",
        "--tensor-parallel-size 4",
        "--max-num-seqs 128",
        "--max-num-batched-tokens 8192",
        "--gpu-memory-utilization 0.9",
        "--kv-cache-dtype auto",
        "--max-model-len 8192",
    ],
    "sglang": [
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-70B-Instruct",
        "--tp-size 4",
        "--max-running-requests 128",
        "--chunked-prefill-size 8192",
        "--mem-fraction-static 0.9",
        "--kv-cache-dtype auto",
        "--context-length 8192",
    ],
    "trtllm": [  # two replicas: Dynamo workers behind Dynamo's frontend
        "python -m dynamo.trtllm --model meta-llama/Llama-3.1-70B-Instruct",
        "--extra-engine-args trtllm-config.yaml",
        "--disaggregation-mode agg",
    ],
}


@pytest.mark.parametrize("engine", ENGINES)
def test_default_plan_gives_complete_launch_lines(engine: str, tmp_path: Path) -> None:
    """Llama-3.1-70B / H200: two TP4 replicas on GPUs 0-3 and 4-7, every setting on the line."""
    write_engine_configs(default_agg_plan(), engine, tmp_path)
    text = (tmp_path / "launch.sh").read_text().replace(" \\\n", " ")
    lines = [" ".join(ln.split()) for ln in text.splitlines() if "CUDA_VISIBLE_DEVICES" in ln]
    assert [shlex.split(ln)[0] for ln in lines] == [
        "CUDA_VISIBLE_DEVICES=0,1,2,3",
        "CUDA_VISIBLE_DEVICES=4,5,6,7",
    ]
    for line in lines:
        for piece in EXPECTED_DEFAULT[engine]:
            assert piece in line, (engine, piece)
    router = {"vllm": "vllm-router", "sglang": "sglang_router", "trtllm": "dynamo.frontend"}
    assert router[engine] in text, "two replicas need a router in front"
    if engine == "trtllm":
        cfg = (tmp_path / "trtllm-config.yaml").read_text()
        for piece in (
            "tensor_parallel_size: 4",
            "max_batch_size: 128",
            "max_num_tokens: 8192",
            "free_gpu_memory_fraction: 0.9",
            "enable_chunked_prefill: true",
        ):
            assert piece in cfg
