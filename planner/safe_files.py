"""Writing generated files safely: nothing overwritten without ``--force``, no symlink followed,
every file written whole or not at all.

Each file is written to a new temporary file (``tempfile.mkstemp``: created exclusively, so a
planted link at a predictable name cannot redirect it) in the target's folder, then renamed over
the target. ``os.replace`` replaces a link at the target rather than writing through it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from planner.errors import PlannerInputError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def prepare_out_dir(out_dir: str | Path, force: bool, flag: str = "--out") -> Path:
    """The output folder, created if missing; a non-empty folder or a link needs ``force``."""
    out = Path(out_dir)
    if out.is_symlink() and not force:
        raise PlannerInputError(
            flag,
            f"{str(out)!r} is a symbolic link; refusing to write "
            "through it (pass --force to accept)",
        )
    if out.exists() and not out.is_dir():
        raise PlannerInputError(flag, f"{str(out)!r} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise PlannerInputError(
            flag,
            f"folder {str(out)!r} is not empty; choose an empty folder "
            "or pass --force to overwrite the files it would write",
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PlannerInputError(flag, f"cannot create folder {str(out)!r}: {exc.strerror}") from exc
    return out


def check_new_file(path: Path, force: bool, flag: str) -> None:
    """Refuse an existing target (file or link) unless ``force``; a folder is always refused."""
    if path.is_dir() and not path.is_symlink():
        raise PlannerInputError(flag, f"{str(path)!r} is a folder, expected a file name")
    if os.path.lexists(path) and not force:
        raise PlannerInputError(flag, f"{str(path)!r} already exists; pass --force to replace it")


def write_new_file(
    path: Path, data: bytes, force: bool = False, flag: str = "--out", executable: bool = False
) -> Path:
    """Write ``data`` to ``path`` through a fresh temporary file and a rename."""
    check_new_file(path, force, flag)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_all_new(
    outputs: Mapping[Path, bytes], force: bool = False, flags: Mapping[Path, str] | None = None
) -> list[Path]:
    """Check every target first, then write them all (nothing is written when one is refused)."""
    names = flags or {}
    for path in outputs:
        check_new_file(path, force, names.get(path, "--out"))
    return [write_new_file(p, d, True, names.get(p, "--out")) for p, d in outputs.items()]


CSV_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not run: text beginning with ``= + - @``, a tab or a CR gets a
    leading apostrophe (OWASP's CSV-injection advice). Numbers are left as numbers."""
    if isinstance(value, str) and value.startswith(CSV_FORMULA_PREFIXES):
        return "'" + value
    return value


def check_out_path(flag: str, path: str | Path) -> Path:
    """The output path, after checking that its folder exists and that it is not a folder itself."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise PlannerInputError(flag, f"folder {str(folder)!r} does not exist")
    if p.is_dir():
        raise PlannerInputError(flag, f"{str(p)!r} is a folder, expected a file name")
    return p
