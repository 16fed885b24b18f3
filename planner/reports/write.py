"""Write report files all-or-nothing: every output is built in memory and every folder checked first."""

from __future__ import annotations

import os
from pathlib import Path

from planner.errors import PlannerInputError


def check_out_path(flag: str, path: str | Path) -> Path:
    """The output path, after checking that its folder exists and that it is not a folder itself."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise PlannerInputError(flag, f"folder {str(folder)!r} does not exist")
    if p.is_dir():
        raise PlannerInputError(flag, f"{str(p)!r} is a folder, expected a file name")
    return p


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file in the same folder and rename it into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)  # plain open(): the file gets the user's umask, unlike mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_all(outputs: dict[Path, bytes]) -> None:
    """Write every built output; callers check all paths before building anything."""
    for path, data in outputs.items():
        write_atomic(path, data)
