"""Generated files are an attack surface: names reaching scripts, existing folders and links."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from planner.cli.main import main
from tests.planner.emitters.plans import default_agg_plan
from tests.planner.emitters.test_cli_emit import plan_path, run

BASH = shutil.which("bash")


def emit(
    capsys: pytest.CaptureFixture[str], plan: object, tmp_path: Path, out: Path, *extra: str
) -> tuple[int, str, str]:
    return run(
        capsys,
        "emit",
        "--plan",
        plan_path(tmp_path, plan),
        "--backend",
        "vllm",
        "--out",
        str(out),
        *extra,
    )


@pytest.mark.parametrize("field", ["model", "gpu"])
@pytest.mark.parametrize("bad", ["llama\necho PWNED", "llama\rx", "a\x1bb"])
def test_control_characters_in_names_are_refused(
    field: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = default_agg_plan()
    plan["best"]["deployment"][field] = bad
    out = tmp_path / "out"
    rc, _, err = emit(capsys, plan, tmp_path, out)
    assert rc == 2 and err.count("\n") == 1 and f"deployment.{field}" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "bad", ["meta-llama/x$(touch PWNED)", "a/`touch PWNED`", "x\n/y", "meta-llama/Llama;reboot"]
)
def test_shell_syntax_in_the_identity_is_refused(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = default_agg_plan()
    plan["best"]["deployment"]["hf_id"] = bad
    rc, _, err = emit(capsys, plan, tmp_path, tmp_path / "out")
    assert rc == 2 and "hf_id" in err and err.count("\n") == 1


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_shell_syntax_in_a_display_name_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A printable but hostile display name is emitted inert: bash -n passes and running the
    scripts starts only the engine commands (stubbed here)."""
    plan = default_agg_plan()
    hostile = "x $(touch PWNED) `touch PWNED2` ; touch PWNED3 # '\" "
    plan["model"] = plan["best"]["deployment"]["model"] = hostile
    out = tmp_path / "out"
    assert emit(capsys, plan, tmp_path, out)[0] == 0
    stub = tmp_path / "bin"
    stub.mkdir()
    log = tmp_path / "calls.log"
    for prog in ("vllm", "vllm-router"):
        (stub / prog).write_text(f'#!/bin/sh\necho "{prog} $*" >> "{log}"\n')
        (stub / prog).chmod(0o755)
    env = {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}"}
    assert BASH is not None
    for script in ("launch.sh", "benchmark.sh"):
        assert subprocess.run([BASH, "-n", str(out / script)], check=False).returncode == 0
        subprocess.run([BASH, str(out / script)], cwd=tmp_path, env=env, timeout=30, check=True)
    created = {p.name for p in tmp_path.rglob("PWNED*")}
    assert not created
    calls = log.read_text().splitlines()
    assert calls and all(
        c.startswith("vllm serve meta-llama/Llama-3.1-70B-Instruct")
        or c.startswith("vllm bench serve")
        or c.startswith("vllm-router --worker-urls http://127.0.0.1:8100 http://127.0.0.1:8101")
        for c in calls
    )
    assert sum(c.startswith("vllm-router") for c in calls) == 1


def test_non_empty_out_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    rc, _, err = emit(capsys, default_agg_plan(), tmp_path, out)
    assert rc == 2 and "not empty" in err and "--force" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert emit(capsys, default_agg_plan(), tmp_path, out, "--force")[0] == 0
    assert (out / "launch.sh").is_file() and (out / "notes.txt").read_text() == "mine"


def test_planted_symlink_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    outside.chmod(0o644)
    out = tmp_path / "out"
    out.mkdir()
    (out / "benchmark.sh").symlink_to(outside)
    assert emit(capsys, default_agg_plan(), tmp_path, out)[0] == 2
    assert emit(capsys, default_agg_plan(), tmp_path, out, "--force")[0] == 0
    assert outside.read_text() == "keep me" and not outside.stat().st_mode & 0o111
    assert not (out / "benchmark.sh").is_symlink()
    assert (out / "benchmark.sh").stat().st_mode & 0o111


def test_out_that_is_a_link_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "out"
    link.symlink_to(target)
    rc, _, err = emit(capsys, default_agg_plan(), tmp_path, link)
    assert rc == 2 and "symbolic link" in err and not any(target.iterdir())


def test_report_refuses_to_replace_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_path(tmp_path, default_agg_plan())
    target = tmp_path / "r.csv"
    target.write_text("old")
    rc, _, err = run(capsys, "report", "--plan", plan, "--csv", str(target))
    assert rc == 2 and "already exists" in err and target.read_text() == "old"
    assert run(capsys, "report", "--plan", plan, "--csv", str(target), "--force")[0] == 0
    assert target.read_text() != "old"


def test_csv_text_cells_cannot_be_formulas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = default_agg_plan()
    plan["candidates"] = [{**plan["best"], "config": '=HYPERLINK("http://x")', "mode": "agg"}]
    csv_path = tmp_path / "r.csv"
    rc, _, err = run(capsys, "report", "--plan", plan_path(tmp_path, plan), "--csv", str(csv_path))
    assert rc == 0, err
    text = csv_path.read_text()
    assert "=HYPERLINK" not in text.replace("'=HYPERLINK", "")


def test_deepseek_r1_is_named_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "deepseek-r1",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--ep",
        "8",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--concurrency",
        "8",
        "--format",
        "json",
    )
    est = json.loads(out)
    assert rc == 0 and (est["model"], est["model_id"]) == ("DeepSeek-R1", "deepseek-ai/DeepSeek-R1")
    rc, out, _ = run(
        capsys,
        "estimate",
        "--model",
        "deepseek-r1",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--ep",
        "8",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--concurrency",
        "8",
    )
    assert rc == 0 and "deepseek-ai/DeepSeek-R1" in out and "V3" not in out
    rc, out, _ = run(
        capsys,
        "plan",
        "--model",
        "deepseek-r1",
        "--gpu",
        "h200",
        "--max-gpus",
        "8",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--concurrency",
        "16",
        "--ttft-ms",
        "5000",
        "--tpot-ms",
        "100",
        "--format",
        "json",
    )
    assert rc == 0 and "DeepSeek-V3" not in out
    plan = json.loads(out)
    assert plan["best"]["deployment"]["hf_id"] == "deepseek-ai/DeepSeek-R1"
    dest = tmp_path / "deploy"
    assert (
        main(
            ["emit", "--plan", plan_path(tmp_path, plan), "--backend", "sglang", "--out", str(dest)]
        )
        == 0
    )
    text = "".join(p.read_text() for p in dest.iterdir())
    assert "deepseek-ai/DeepSeek-R1" in text and "DeepSeek-V3" not in text


def test_local_config_needs_a_model_id_to_emit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from planner.model.bundled import bundled_models

    cfg = tmp_path / "Qwen--Qwen3-8B_config.json"
    cfg.write_text(bundled_models()["qwen3-8b"].path.read_text())
    args = [
        "plan",
        "--model",
        str(cfg),
        "--gpu",
        "h100",
        "--max-gpus",
        "2",
        "--isl",
        "500",
        "--osl",
        "100",
        "--concurrency",
        "4",
        "--ttft-ms",
        "5000",
        "--tpot-ms",
        "100",
    ]
    rc, _, err = run(capsys, *args, "--out", str(tmp_path / "a"))
    assert rc == 2 and "--model-id" in err and not (tmp_path / "a").exists()
    rc, _, err = run(capsys, *args, "--model-id", "Qwen/Qwen3-8B", "--out", str(tmp_path / "b"))
    assert rc == 0, err
    assert "vllm serve Qwen/Qwen3-8B" in (tmp_path / "b" / "launch.sh").read_text()
