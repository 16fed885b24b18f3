"""CLI contract for gpus / models / memory: JSON shape, one-line errors, exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv)) if argv else 0
    out, err = capsys.readouterr()
    return rc, out, err


def run_exit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def test_memory_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(
        capsys,
        "memory",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h200",
        "--tp",
        "4",
        "--isl",
        "4000",
        "--osl",
        "500",
        "--format",
        "json",
    )
    assert rc == 0
    data = json.loads(out)
    for key in (
        "weights_bytes_per_gpu",
        "kv_bytes_per_token_per_gpu",
        "kv_capacity_tokens",
        "activation_bytes_per_gpu",
        "reserved_bytes_per_gpu",
        "total_bytes_per_gpu",
        "max_concurrency",
    ):
        assert key in data
    assert data["kv_bytes_per_token_per_gpu"] == 81920
    assert data["weights_bytes_per_gpu"] == pytest.approx(35.3e9, rel=0.01)


def test_gpus_and_models_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "gpus", "--format", "json")
    assert rc == 0 and len(json.loads(out)["gpus"]) >= 9
    rc, out, _ = run(capsys, "models", "--format", "json")
    assert rc == 0 and len(json.loads(out)["models"]) >= 18
    rc, out, _ = run(capsys, "gpus")
    assert "H200-SXM" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["memory", "--model", "nope-13b", "--gpu", "h200"], "--model"),
        (["memory", "--model", "llama-3.1-8b", "--gpu", "h2o"], "did you mean"),
        (["memory", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "3"], "--tp"),
        (["memory", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "0"], "--tp"),
        (["memory", "--model", "llama-3.1-70b", "--gpu", "h200", "--isl", "-3"], "--isl"),
        (["memory", "--model", "llama-3.1-405b", "--gpu", "h100", "--tp", "8"], "out of memory"),
    ],
)
def test_bad_input_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    rc, out, err = run_exit(capsys, *argv)
    assert rc == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and out == ""


def test_oom_names_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_exit(
        capsys, "memory", "--model", "llama-3.1-405b", "--gpu", "h100", "--tp", "8"
    )
    assert rc == 2 and "GB per GPU" in err and "available" in err


def test_malformed_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", ')
    rc, _, err = run_exit(capsys, "memory", "--model", str(bad), "--gpu", "h200")
    assert rc == 2 and "not valid JSON" in err


def test_console_script_exit_code() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "memory", "--model", "x", "--gpu", "h200"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
