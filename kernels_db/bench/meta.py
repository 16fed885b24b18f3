"""``meta.yaml`` beside the tables: GPU, driver, library versions, date, tool, kernel_source per
table, and the git SHA of the bench that produced them."""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
from pathlib import Path

import torch

from kernels_db.bench import shapes

TOOL = "kernels_db.bench (planner calibrate run)"
REPO_DIR = Path(__file__).resolve().parents[2]


def _cmd(args: list[str], cwd: Path | None = None) -> str:
    """First line of a command's stdout, or '' when it is missing or fails."""
    try:
        res = subprocess.run(args, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (
        res.stdout.strip().splitlines()[0].strip()
        if res.returncode == 0 and res.stdout.strip()
        else ""
    )


def git_sha() -> str:
    """``git rev-parse HEAD`` of the bench's checkout, '+dirty' when kernels_db/bench has edits."""
    sha = _cmd(["git", "rev-parse", "HEAD"], REPO_DIR)
    if not sha:
        return "unknown"
    dirty = _cmd(["git", "status", "--porcelain", "--", "kernels_db/bench"], REPO_DIR)
    return f"{sha}+dirty" if dirty else sha


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return "not installed"
    return str(triton.__version__)


def cpu_name() -> str:
    """CPU model from /proc/cpuinfo, else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(device: str, device_name: str) -> dict[str, object]:
    """Where and with what the tables were measured."""
    driver = ""
    if device == "cuda":
        driver = _cmd(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"]
        )
    return {
        "device_name": device_name,
        "driver": driver or "n/a",
        "torch": str(torch.__version__),
        "triton": _triton_version(),
        "cuda": torch.version.cuda or "n/a",
        "python": platform.python_version(),
        "host": f"{platform.system()} {platform.machine()}, {cpu_name()}",
        "cpu_threads": torch.get_num_threads(),
    }


def build_meta(
    gpu_key: str,
    device: str,
    device_name: str,
    tables: dict[str, list[dict[str, object]]],
    *,
    quick: bool,
    timer: str,
    notes: list[str],
) -> dict[str, object]:
    """The whole ``meta.yaml`` mapping for a folder holding ``tables`` (file name -> rows)."""
    per_table = {
        name: sorted({str(r["kernel_source"]) for r in rows})
        for name, rows in sorted(tables.items())
    }
    sources = sorted({s for v in per_table.values() for s in v})
    return {
        "gpu": gpu_key,
        **environment(device, device_name),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "tool": TOOL,
        "git_sha": git_sha(),
        "quick": quick,
        "timer": timer,
        "kernel_source": ", ".join(sources),
        "tables": {
            name: {"kernel_source": ", ".join(v), "rows": len(tables[name])}
            for name, v in per_table.items()
        },
        "conventions": {
            Path(n).stem: shapes.CONVENTIONS[Path(n).stem]
            for n in sorted(tables)
            if Path(n).stem in shapes.CONVENTIONS
        },
        "notes": notes,
    }
