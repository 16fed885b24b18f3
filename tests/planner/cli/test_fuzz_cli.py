"""Fuzz the whole CLI in-process: every subcommand with mutated flags and mutated input files.

A case passes when ``planner.cli.main.main`` returns 0, 2 or 3 (answer, bad input, saturated)
within ``CASE_TIMEOUT_S``; an uncaught exception, another exit code or a hang fails the test.
Files start from small valid inputs (config.json, GPU YAML, plan.json, fleet YAML, trace CSV,
kernel CSVs in both layouts, validation CSVs) and are mutated: numbers swapped for hostile values
(Infinity, NaN, 1e400, -1, huge integers, strings), bytes inserted, lines dropped or repeated,
truncation, non-UTF-8. Examples are derandomized, so CI runs the same cases every time.

Search budgets stay small (``--max-gpus`` at most 8 in the base commands; mutated values come from
``HOSTILE``): this is a robustness test, not a speed test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cli import cmd_ui
from planner.cli.main import main

REPO = Path(__file__).resolve().parents[3]
CASES = int(os.environ.get("PLANNER_FUZZ_CASES", "520"))
CASE_TIMEOUT_S = 90.0
"""A case still running after this is a hang (generous: the CI machine may be loaded)."""
ALLOWED_EXIT = (0, 2, 3)
HOSTILE = (
    "0",
    "-1",
    "-5",
    "1",
    "2",
    "7",
    "1e9",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "",
    "abc",
    "9" * 30,
    "1.5",
    "0.5",
    "1000001",
    "é",
    "../../x",
    "/dev/zero",
    "--",
    "-3.2e-7",
    "65536",
)
HOSTILE_JSON = (
    "Infinity",
    "-Infinity",
    "NaN",
    "1e400",
    "-1",
    "0",
    "1e30",
    "9" * 40,
    '"x"',
    "true",
    "null",
    "[]",
    "{}",
    "0.5",
    "3",
    "1e5",
)
HOSTILE_YAML = (
    ".inf",
    "-.inf",
    ".nan",
    "1.0e+400",
    "-1",
    "0",
    "1e30",
    "9" * 40,
    "x",
    "true",
    "null",
    "[]",
    "{}",
    "0.5",
    "&a 1",
    "*a",
    "3",
    "1e5",
)
MUTATIONS = (0, 0, 0, 1, 1, 2, 3)
"""How many mutations a case applies to a file or to the flags (weighted towards few: enough cases
must get past the first check to reach the model, the solvers and the writers)."""
NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")


def _config_text() -> bytes:
    data = json.loads((REPO / "planner" / "model" / "configs" / "llama-3.1-8b.json").read_text())
    data.pop("_bundled", None)
    return json.dumps(data, indent=1).encode()


def _moe_config_text() -> bytes:
    data = json.loads((REPO / "planner" / "model" / "configs" / "qwen3-30b-a3b.json").read_text())
    data.pop("_bundled", None)
    return json.dumps(data, indent=1).encode()


def _gpu_yaml() -> bytes:
    text = (REPO / "hardware" / "specs" / "h100_sxm.yaml").read_text()
    text = re.sub(r"(?m)^key: .*$", "key: fuzz_gpu", text)
    text = re.sub(r"(?m)^name: .*$", "name: Fuzz-GPU", text)
    return re.sub(r"(?m)^aliases: .*$", "aliases: [fuzzgpu]", text).encode()


FLEET = b"""backend: vllm
max_gpus_per_replica: 2
classes:
  - {name: chat, model: llama-3.1-8b, rate_per_s: 2, isl: 500, osl: 100, ttft_ms: 2000, tpot_ms: 60}
gpus:
  - {gpu: h200_sxm, available: 4}
"""
TRACE = b"isl,osl\n500,100\n800,50\n300,200\n"
AIC_GEMM = (
    b"source_path,gemm_dtype,m,n,k,latency\n"
    b"x,bfloat16,64,4096,4096,0.02\nx,bfloat16,128,4096,4096,0.03\nx,bfloat16,256,4096,4096,0.05\n"
)
OUR_GEMM = (
    b"m,n,k,dtype,latency_s\n64,4096,4096,bf16,2e-05\n128,4096,4096,bf16,3e-05\n"
    b"256,4096,4096,bf16,5e-05\n512,4096,4096,bf16,9e-05\n"
)
E2E = (
    b"id,backend,model_path,system,precision,mode,isl,osl,batch_size,tp_size,pp_size,silicon_ttft_ms,"
    b"silicon_tpot_ms\n"
    b"a,vllm,llama-3.1-8b,h200_sxm,bf16,agg,1000,200,8,1,1,50,10\n"
    b"b,vllm,llama-3.1-8b,h200_sxm,bf16,agg,1000,200,16,1,1,60,12\n"
    b"c,vllm,llama-3.1-8b,h200_sxm,bf16,agg,1000,200,32,2,1,40,9\n"
)
THROUGHPUT = (
    b"framework_version,concurrency_or_rate,metric,model,gpu,precision,tp,pp,isl,osl,value\n"
    b"0.14.0,max-throughput,output_tok_s_total,LLaMA v3.1 8B,H200-SXM-141GB,FP8,1,1,1000,1000,"
    b"20000\n"
)


@pytest.fixture(scope="module")
def plan_json() -> bytes:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(
            [
                "plan",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h200",
                "--max-gpus",
                "2",
                "--isl",
                "1000",
                "--osl",
                "200",
                "--ttft-ms",
                "3000",
                "--tpot-ms",
                "60",
                "--concurrency",
                "8",
                "--format",
                "json",
            ]
        )
    assert rc == 0
    return out.getvalue().encode()


def _mutate_file(draw: Callable[..., Any], data: bytes, hostile: tuple[str, ...]) -> bytes:
    """Apply up to three mutations (or none) to ``data``."""
    for _ in range(draw(st.sampled_from(MUTATIONS))):
        op = draw(
            st.sampled_from(
                (
                    "number",
                    "number",
                    "insert",
                    "drop_line",
                    "dup_line",
                    "truncate",
                    "non_utf8",
                    "empty",
                )
            )
        )
        nums = list(NUMBER.finditer(data))
        if op == "number" and nums:
            m = nums[draw(st.integers(0, len(nums) - 1))]
            data = data[: m.start()] + draw(st.sampled_from(hostile)).encode() + data[m.end() :]
        elif op == "insert":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(st.binary(max_size=12)) + data[at:]
        elif op in ("drop_line", "dup_line"):
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i : i + 1] = [] if op == "drop_line" else [lines[i], lines[i]]
            data = b"\n".join(lines)
        elif op == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif op == "non_utf8":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + b"\xff\xfe" + data[at:]
        else:
            data = b""
    return data


class Case:
    """Builds one command line in a temporary folder."""

    def __init__(self, draw: Callable[..., Any], tmp: Path, plan: bytes) -> None:
        self.draw, self.tmp, self.plan = draw, tmp, plan

    def file(self, name: str, data: bytes, hostile: tuple[str, ...]) -> str:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_mutate_file(self.draw, data, hostile))
        return str(path)

    def model(self) -> str:
        kind = self.draw(st.sampled_from(("bundled", "bundled", "dense", "moe")))
        if kind == "bundled":
            return self.draw(
                st.sampled_from(
                    (
                        "llama-3.1-8b",
                        "llama-3.1-8b",
                        "qwen3-30b-a3b",
                        "deepseek-v3",
                        "gpt-oss-20b",
                        "qwen3.5-397b-a17b",
                        "nope",
                    )
                )
            )
        return self.file(
            f"{kind}/config.json",
            _config_text() if kind == "dense" else _moe_config_text(),
            HOSTILE_JSON,
        )

    def hw(self) -> list[str]:
        if not self.draw(st.booleans()):
            return []
        self.file("hw/fuzz.yaml", _gpu_yaml(), HOSTILE_YAML)
        return ["--hardware-dir", str(self.tmp / "hw")]

    def gpu(self) -> str:
        return self.draw(
            st.sampled_from(
                (
                    "h200",
                    "h200",
                    "h100_sxm",
                    "b200",
                    "a100",
                    "l40s",
                    "mi300x",
                    "gb200",
                    "fuzz_gpu",
                    "x",
                )
            )
        )


def _base(case: Case, command: str) -> list[str]:
    d, t = case.draw, case.tmp
    wl = ["--isl", "1000", "--osl", "200"]
    load = d(st.sampled_from((["--concurrency", "8"], ["--rate", "2"], ["--rate", "1e6"])))
    if command == "gpus":
        return ["gpus", *case.hw(), "--format", d(st.sampled_from(("json", "table")))]
    if command == "models":
        return ["models", "--format", "json"]
    if command == "memory":
        return [
            "memory",
            "--model",
            case.model(),
            "--gpu",
            case.gpu(),
            *case.hw(),
            "--tp",
            "2",
            *wl,
        ]
    if command == "kernel":
        op = d(
            st.sampled_from(
                (
                    ["--op", "gemm", "--m", "64", "--n", "4096", "--k", "4096"],
                    [
                        "--op",
                        "attention_decode",
                        "--batch",
                        "8",
                        "--kv-len",
                        "2048",
                        "--heads",
                        "32",
                        "--kv-heads",
                        "8",
                    ],
                    ["--op", "comm", "--n-gpus", "4", "--bytes", "1e6"],
                )
            )
        )
        return ["kernel", "--gpu", case.gpu(), *op]
    if command in ("estimate", "simulate"):
        mode = d(
            st.sampled_from(
                ([], ["--mode", "disagg", "--prefill-workers", "1", "--decode-workers", "2"])
            )
        )
        extra = ["--requests", "60"] if command == "simulate" else []
        trace = ["--trace", case.file("trace.csv", TRACE, HOSTILE)] if d(st.booleans()) else []
        return [
            command,
            "--model",
            case.model(),
            "--gpu",
            case.gpu(),
            *wl,
            *load,
            *mode,
            *extra,
            *trace,
            "--format",
            "json",
        ]
    if command == "plan":
        return [
            "plan",
            "--model",
            case.model(),
            "--gpu",
            case.gpu(),
            *case.hw(),
            "--max-gpus",
            "4",
            *wl,
            "--ttft-ms",
            "3000",
            "--tpot-ms",
            "60",
            *load[:1],
            load[1] if load[1] != "1e6" else "50",
        ]
    if command == "fleet":
        return ["fleet", "--spec", case.file("fleet.yaml", FLEET, HOSTILE_YAML), "--format", "json"]
    if command == "emit":
        return [
            "emit",
            "--plan",
            case.file("plan.json", case.plan, HOSTILE_JSON),
            "--backend",
            d(st.sampled_from(("vllm", "sglang", "trtllm"))),
            "--out",
            str(t / "emit"),
        ]
    if command == "report":
        return [
            "report",
            "--plan",
            case.file("plan.json", case.plan, HOSTILE_JSON),
            d(st.sampled_from(("--csv", "--html", "--xlsx"))),
            str(t / "report.out"),
        ]
    if command in ("validate e2e", "validate decisions"):
        return [*command.split(), "--data", case.file("e2e.csv", E2E, HOSTILE), "--format", "json"]
    if command == "validate throughput":
        return [
            "validate",
            "throughput",
            "--data",
            case.file("tp.csv", THROUGHPUT, HOSTILE),
            "--format",
            "json",
        ]
    if command in ("validate kernels", "calibrate fit"):
        case.file("tables/gemm.csv", OUR_GEMM, HOSTILE)
        case.file("tables/meta.yaml", b"gpu: h100_sxm\n", HOSTILE_YAML)
        if command == "validate kernels":
            return ["validate", "kernels", "--data", str(t / "tables"), "--format", "json"]
        return [
            "calibrate",
            "fit",
            "--gpu",
            "h100",
            "--tables",
            str(t / "tables"),
            "--out",
            str(t / "fit"),
        ]
    if command == "kernels import":
        src = case.file("aic/gemm_perf.csv", AIC_GEMM, HOSTILE)
        return [
            "kernels",
            "import",
            "--format",
            "aiconfigurator",
            d(st.sampled_from((src, str(t / "aic")))),
            "--gpu",
            d(st.sampled_from(("h100", "h200_sxm", "newgpu"))),
            "--out",
            str(t / "kout"),
        ]
    if command == "calibrate run":  # hostile --ops only: a valid op list would start a benchmark
        return [
            "calibrate",
            "run",
            "--gpu",
            "cpu",
            "--quick",
            "--ops",
            d(st.sampled_from(("bogus", "x;y", "é"))),
            "--out",
            str(t / "run"),
        ]
    assert command == "ui"
    return ["ui", "--port", "8600"]


COMMANDS = (
    "gpus",
    "models",
    "memory",
    "kernel",
    "estimate",
    "simulate",
    "plan",
    "fleet",
    "emit",
    "report",
    "validate e2e",
    "validate decisions",
    "validate throughput",
    "validate kernels",
    "calibrate fit",
    "kernels import",
    "calibrate run",
    "ui",
)
PROTECTED = {"calibrate run": ("--ops",), "plan": ("--max-gpus",)}
"""Flags whose values the mutator leaves alone (a valid --ops list would start real benchmarks; plan
search budgets are issue 18's; --max-gpus is still bounded by the argparse type, tested
elsewhere)."""


def _mutate_flags(draw: Callable[..., Any], command: str, argv: list[str]) -> list[str]:
    argv = list(argv)
    flags = [
        i for i, a in enumerate(argv) if a.startswith("--") and a not in PROTECTED.get(command, ())
    ]
    for _ in range(draw(st.sampled_from(MUTATIONS))):
        op = draw(st.sampled_from(("value", "value", "drop", "add", "junk")))
        if op == "value" and flags:
            i = draw(st.sampled_from(flags))
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                argv[i + 1] = draw(st.sampled_from(HOSTILE))
        elif op == "drop" and flags:
            i = draw(st.sampled_from(flags))
            has_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            del argv[i : i + 2 if has_value else i + 1]
            flags = [
                j
                for j, a in enumerate(argv)
                if a.startswith("--") and a not in PROTECTED.get(command, ())
            ]
        elif op == "add":
            argv += [
                draw(
                    st.sampled_from(
                        (
                            "--tp",
                            "--pp",
                            "--ep",
                            "--dp",
                            "--isl",
                            "--osl",
                            "--concurrency",
                            "--max-num-seqs",
                            "--gpu-memory-utilization",
                            "--prefix-hit",
                            "--spec-draft-len",
                            "--bench-requests",
                            "--arrival-cv",
                            "--seed",
                            "--kv-dtype",
                            "--weight-quant",
                            "--percentile",
                            "--objective",
                        )
                    )
                ),
                draw(st.sampled_from(HOSTILE)),
            ]
        elif op == "junk":
            argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(HOSTILE)))
    return argv


def _run(argv: list[str]) -> tuple[int | None, BaseException | None, float]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["rc"] = main(argv)
        except BaseException as exc:  # noqa: BLE001 - every escape is the failure we look for
            box["exc"] = exc

    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        worker = threading.Thread(target=target, daemon=True)
        worker.start()
        worker.join(CASE_TIMEOUT_S)
    assert not worker.is_alive(), f"hang: planner {' '.join(argv)}"
    return box.get("rc"), box.get("exc"), time.perf_counter() - start


@settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_fuzz_cli(data: st.DataObject, plan_json: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        cmd_ui.subprocess, "call", lambda cmd: 0
    )  # `planner ui` must not start a server
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    with tempfile.TemporaryDirectory(prefix="planner-fuzz-") as tmp:
        case = Case(data.draw, Path(tmp), plan_json)
        argv = _mutate_flags(data.draw, command, _base(case, command))
        data.draw(st.just(argv), label="argv")
        # relative outputs ("0", "abc", "../../x") land inside the case's folder, never elsewhere
        cwd = Path(tmp) / "a" / "b" / "cwd"
        cwd.mkdir(parents=True)
        with monkeypatch.context() as mp:
            mp.chdir(cwd)
            rc, exc, _ = _run(argv)
    assert exc is None, f"planner {' '.join(argv)} raised {type(exc).__name__}: {exc}"
    assert rc in ALLOWED_EXIT, f"planner {' '.join(argv)} exited {rc}"
