"""Behaviour check for restructures: run a fixed list of product commands, save their outputs,
and compare two saved runs field by field.

    python -m lab.check_behaviour run --out DIR      # outputs of this checkout into DIR
    python -m lab.check_behaviour compare OLD NEW    # every numeric field equal, exit 1 if not

Timing fields (``search_seconds``, "evaluated in ... s", ``seconds``) are dropped, and module paths
that moved are mapped old -> new (``MOVED``) before comparing, so a provenance string naming
``planner.perf.serving`` equals one naming its new home.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "validation"
E2E = SHARED / "e2e"

# Old module path -> new module path: the layout of issue 45 (planner/ subpackages by role).
MOVED: dict[str, str] = {
    "planner.model_parser": "planner.model.parser",
    "planner.model_spec": "planner.model.spec",
    "planner.models": "planner.model.bundled",
    "planner.quantization": "planner.model.quantization",
    "planner.params": "planner.model.params",
    "planner.model_configs": "planner.model.configs",
    "planner.workload": "planner.workload.spec",
    "planner.traces": "planner.workload.traces",
    "planner.trace_gen": "planner.workload.trace_gen",
    "planner.trace_windows": "planner.workload.windows",
    "planner.opgraph": "planner.perf.opgraph",
    "planner.step_model": "planner.perf.step",
    "planner.memory": "planner.perf.memory_plan",
    "planner.memory_batch": "planner.perf.memory",
    "planner.serving": "planner.perf.serving",
    "planner.queueing": "planner.perf.queueing",
    "planner.batch_eval": "planner.perf.batch",
    "planner.role_eval": "planner.perf.roles",
    "planner.kernels_adapter": "planner.perf.pricer",
    "planner.simulator": "planner.perf.simulator",
    "planner.replay": "planner.perf.replay",
    "planner.estimate": "planner.perf.estimate",
    "planner.deployment": "planner.perf.deployment",
    "planner.workers": "planner.perf.workers",
    "planner.engine_calibration": "planner.engines.calibration",
    "planner.calibration_profile": "planner.calibration.profile",
    "planner.calibration_data": "planner.calibration.data",
    "planner.bands": "planner.uncertainty.bands",
    "planner.calibration_bands": "planner.uncertainty.profile_bands",
    "planner.validation.fit_engines": "lab.fit_engines",
    "planner.validation.bands": "lab.bands",
    "planner.validation.holdout": "planner.replay_e2e.holdout",
    "planner.validation.protocol": "lab.protocol",
    "planner.validation.self_calibration": "lab.self_calibration",
}
PREPARE = Path(__file__).with_name("prepare_e2e.py")
"""Where the e2e rows are prepared into the documented layout (``python -m lab.prepare_e2e``);
a checkout without it reads ``silicon_measured.csv`` directly."""
MOVED_TEXT: dict[str, str] = {
    **{
        f"{e}: planner/calibration/engines.yaml": f"{e}: planner/engines/{e}/constants.yaml"
        for e in ("vllm", "sglang", "trtllm")
    },
    "planner/calibration/engines.yaml": "planner/engines/*/constants.yaml",
}
"""Literal text that moved (applied first, in this order): engine constants' files."""

TIMING_KEYS = {"search_seconds", "seconds", "elapsed_s", "wall_s"}
TIMING_TEXT = re.compile(r"evaluated in [0-9.]+ s|in [0-9.]+ s\b")

LLAMA = ["--model", "llama-3.1-70b", "--isl", "4000", "--osl", "500"]
DSR1 = ["--model", "deepseek-r1", "--isl", "1000", "--osl", "2000"]
SLO = ["--ttft-ms", "1000", "--tpot-ms", "30", "--percentile", "p90"]


def _e2e_rows(out: Path) -> Path:
    """The e2e rows the validate commands read: the lab step's prepared file where this checkout
    has the step, else the shared file itself."""
    raw = E2E / "silicon_measured.csv"
    if not PREPARE.is_file() or not raw.is_file():
        return raw
    rows = out / "e2e_rows.csv"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lab.prepare_e2e",
            "--data",
            str(raw),
            "--out",
            str(rows),
            "--force",
        ],
        check=True,
        cwd=PREPARE.parents[1],
    )
    return rows


def _commands(rows: Path) -> dict[str, list[str]]:
    cmds: dict[str, list[str]] = {}
    for be in ("vllm", "sglang", "trtllm"):
        cmds[f"estimate_agg_{be}"] = [
            "estimate",
            *LLAMA,
            "--gpu",
            "h200",
            "--backend",
            be,
            "--tp",
            "8",
            "--concurrency",
            "32",
            "--format",
            "json",
        ]
        cmds[f"estimate_disagg_{be}"] = [
            "estimate",
            *DSR1,
            "--gpu",
            "h200",
            "--backend",
            be,
            "--mode",
            "disagg",
            "--prefill-tp",
            "8",
            "--decode-tp",
            "8",
            "--prefill-workers",
            "1",
            "--decode-workers",
            "1",
            "--rate",
            "2",
            "--format",
            "json",
        ]
        cmds[f"plan_agg_{be}"] = [
            "plan",
            *LLAMA,
            "--gpu",
            "h200",
            "--max-gpus",
            "8",
            *SLO,
            "--backend",
            be,
            "--format",
            "json",
        ]
    cmds["plan_disagg_dsr1"] = [
        "plan",
        *DSR1,
        "--gpu",
        "h200",
        "--max-gpus",
        "32",
        "--ttft-ms",
        "2000",
        "--tpot-ms",
        "50",
        "--percentile",
        "p90",
        "--backend",
        "sglang",
        "--format",
        "json",
    ]
    cmds["plan_multi_gpu"] = [
        "plan",
        "--model",
        "qwen3-32b",
        "--isl",
        "2000",
        "--osl",
        "300",
        "--gpu",
        "h100,h200,b200",
        "--max-gpus",
        "16",
        *SLO,
        "--format",
        "json",
    ]
    if E2E.is_dir():
        cmds["validate_e2e_holdout"] = [
            "validate",
            "e2e",
            "--data",
            str(rows),
            "--holdout",
            "campaign",
            "--format",
            "json",
        ]
        cmds["validate_decisions"] = [
            "validate",
            "decisions",
            "--data",
            str(rows),
            "--format",
            "json",
        ]
        cmds["validate_throughput"] = [
            "validate",
            "throughput",
            "--data",
            str(E2E / "trtllm_perf_overview.csv"),
            "--format",
            "json",
        ]
        cmds["validate_kernels"] = [
            "validate",
            "kernels",
            "--data",
            str(SHARED / "kernels"),
            "--format",
            "json",
        ]
    return cmds


def _planner(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planner", *args],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def run(out: Path, only: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, args in _commands(_e2e_rows(out)).items():
        if only and only not in name:
            continue
        res = _planner(args)
        (out / f"{name}.json").write_text(
            json.dumps(
                {
                    "args": args,
                    "rc": res.returncode,
                    "stdout": res.stdout,
                    "stderr": res.stderr[-4000:],
                },
                indent=1,
            )
        )
        print(f"{name}: rc {res.returncode}", file=sys.stderr)
    emit_dir = out / "emit"
    for plan in sorted(out.glob("plan_*.json")):
        rec = json.loads(plan.read_text())
        if rec["rc"] != 0:
            continue
        plan_file = out / f"{plan.stem}.plan"
        plan_file.write_text(rec["stdout"])
        for be in ("vllm", "sglang", "trtllm"):
            dest = emit_dir / f"{plan.stem}_{be}"
            res = _planner(
                [
                    "emit",
                    "--plan",
                    str(plan_file),
                    "--backend",
                    be,
                    "--out",
                    str(dest),
                    "--force",
                    "--format",
                    "json",
                ]
            )
            files = (
                {
                    p.relative_to(dest).as_posix(): p.read_text()
                    for p in sorted(dest.rglob("*"))
                    if p.is_file()
                }
                if dest.is_dir()
                else {}
            )
            (out / f"emit_{plan.stem}_{be}.json").write_text(
                json.dumps({"rc": res.returncode, "stdout": res.stdout, "files": files}, indent=1)
            )


RUN_DIRS: list[str] = []
"""The two run folders being compared (their names differ in outputs that print paths)."""


def _map_paths(text: str) -> str:
    for d in RUN_DIRS:
        text = text.replace(d, "<run>")
    for old, new in MOVED_TEXT.items():
        text = text.replace(old, new)
    for old, new in sorted(MOVED.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)
        slash_old, slash_new = old.replace(".", "/"), new.replace(".", "/")
        text = re.sub(rf"(?<![\w/]){re.escape(slash_old)}(?=\.py\b|/)", slash_new, text)
    return TIMING_TEXT.sub("<timing>", text)


def _normal(value: object) -> object:
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _map_paths(value)
    return value


def _parsed(text: str) -> object:
    try:
        return _normal(json.loads(text))
    except json.JSONDecodeError:
        return _map_paths(text)


def _diff(a: object, b: object, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'new' if k in b else 'old'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append(f"{where}: {str(a)[:120]!r} != {str(b)[:120]!r}")


def compare(old: Path, new: Path) -> int:
    RUN_DIRS[:] = [str(old), str(new)]
    problems: list[str] = []
    for f in sorted(old.glob("*.json")):
        g = new / f.name
        if not g.exists():
            problems.append(f"{f.name}: missing in new")
            continue
        a, b = json.loads(f.read_text()), json.loads(g.read_text())
        for key in ("rc", "stdout", "files"):
            if key in a:
                x = _parsed(a[key]) if key == "stdout" else _normal(a[key])
                y = _parsed(b.get(key)) if key == "stdout" else _normal(b.get(key))
                _diff(x, y, f"{f.name}:{key}", problems)
    for p in problems[:200]:
        print(p)
    print(f"{len(list(old.glob('*.json')))} outputs compared, {len(problems)} differences")
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", default=None, help="run only the commands whose name contains this")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.out, args.only)
        return 0
    return compare(args.old, args.new)


if __name__ == "__main__":
    raise SystemExit(main())
