"""Write report files all-or-nothing: every output is built in memory and every folder checked
first."""

from __future__ import annotations

from pathlib import Path

from planner.safe_files import check_out_path as check_out_path
from planner.safe_files import write_all_new


def write_all(
    outputs: dict[Path, bytes], force: bool = False, flags: dict[Path, str] | None = None
) -> None:
    """Write every built output; an existing file or link is refused unless ``force`` (checked
    for all of them before any is written), and no link is followed (``planner.safe_files``)."""
    write_all_new(outputs, force, flags)
