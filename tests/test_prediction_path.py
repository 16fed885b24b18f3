"""docs/architecture.md "How a prediction is made" names the files `planner estimate` passes to the
kernel lookup; a real run is traced (``sys.setprofile``) and must pass through exactly those."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import traceback
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
LOOKUPS = ("price_codes", "comm_codes")
"""The kernels_db functions that look a kernel up."""
MAX_FILES = 6
"""Files a reader follows from ``planner estimate`` to the lookup (``planner/cli/main.py`` only
dispatches and is not counted)."""


def _readme_files() -> list[str]:
    text = (ROOT / "docs/architecture.md").read_text()
    section = text.split("## How a prediction is made", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\d+\. `([\w/]+\.py)`", section, re.MULTILINE)


def _traced_path() -> list[traceback.FrameSummary]:
    from planner.cli.main import main

    found: list[list[traceback.FrameSummary]] = []

    def hook(frame: FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if not found and event == "call" and code.co_name in LOOKUPS:
            if code.co_filename.endswith("kernels_db/lookup.py"):
                found.append(traceback.extract_stack(frame))

    argv = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100", "--concurrency", "8"]
    sys.setprofile(hook)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main([*argv, "--format", "json"])
    finally:
        sys.setprofile(None)
    assert found, "no kernel lookup seen"
    return [
        f
        for f in found[0]
        if f.filename.startswith(str(ROOT))
        and "/tests/" not in f.filename
        and "site-packages" not in f.filename
    ]


def test_readme_names_the_files_of_the_prediction_path() -> None:
    frames = _traced_path()
    files: list[str] = []
    for f in frames:
        rel = str(Path(f.filename).relative_to(ROOT))
        if rel != "planner/cli/main.py" and rel not in files:
            files.append(rel)
    assert files == _readme_files(), f"traced {files} ({len(frames)} frames)"
    assert len(files) <= MAX_FILES, f"{len(files)} files on the path (issue 23 asks <= 6)"
    assert files[-1] == "kernels_db/lookup.py"
    assert f"({len(frames)} frames;" in (ROOT / "docs/architecture.md").read_text()
