"""Write report files all-or-nothing: every output is built in memory and every folder checked
first."""

from __future__ import annotations

from pathlib import Path

from planner.errors import PlannerInputError
from planner.safe_files import write_all_new


def check_out_path(flag: str, path: str | Path) -> Path:
    """The output path, after checking that its folder exists and that it is not a folder itself."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise PlannerInputError(flag, f"folder {str(folder)!r} does not exist")
    if p.is_dir():
        raise PlannerInputError(flag, f"{str(p)!r} is a folder, expected a file name")
    return p


def write_all(
    outputs: dict[Path, bytes], force: bool = False, flags: dict[Path, str] | None = None
) -> None:
    """Write every built output; an existing file or link is refused unless ``force`` (checked
    for all of them before any is written), and no link is followed (``planner.safe_files``)."""
    write_all_new(outputs, force, flags)
