"""Load GPU specs from the bundled YAML folder and any user folders (``--hardware-dir``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from hardware.errors import PlannerInputError
from hardware.input_files import key_line, parse_yaml, read_text
from hardware.spec import GpuSpec

SPECS_DIR = Path(__file__).with_name("specs")


def normalize(name: str) -> str:
    """'H200-SXM', 'h200 sxm', 'h200_sxm' -> 'h200sxm'."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def load_spec_file(path: Path) -> GpuSpec:
    """Parse one YAML spec; errors name the file and the field."""
    where = f"hardware file {path}"
    text = read_text(path, "GPU YAML", "hardware file")
    raw = parse_yaml(text, where)
    if not isinstance(raw, dict):
        raise PlannerInputError(where, "must hold a mapping of GPU fields (name, key, memory_bytes, ...)")
    try:
        return GpuSpec.model_validate(raw)
    except ValidationError as exc:
        locs = [".".join(str(p) for p in e["loc"]) or "spec" for e in exc.errors()]
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        more = f" (also bad: {', '.join(locs[1:])})" if len(locs) > 1 else ""
        line = key_line(text, str(exc.errors()[0]["loc"][0])) if exc.errors()[0]["loc"] else 1
        raise PlannerInputError(f"{where}:{line}: {locs[0]}", f"{msg}{more}") from None


def _spec_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))


@lru_cache(maxsize=16)
def _load_dirs(dirs: tuple[str, ...], _stamp: tuple[tuple[str, int], ...]) -> dict[str, GpuSpec]:
    # _stamp (file paths and mtimes) only keys the cache, so an edited file is read again.
    specs: dict[str, GpuSpec] = {}
    for d in dirs:
        seen: dict[str, Path] = {}
        for path in _spec_files(Path(d)):
            spec = load_spec_file(path)
            if spec.key in seen:
                raise PlannerInputError(
                    f"hardware file {path}: key", f"'{spec.key}' is also defined in {seen[spec.key]}"
                )
            seen[spec.key] = path
            specs[spec.key] = spec  # later folders override bundled specs
    return specs


def all_gpus(extra_dirs: Iterable[str | Path] = ()) -> dict[str, GpuSpec]:
    """All known GPUs by key: bundled specs, then each extra folder (which may override)."""
    dirs = (str(SPECS_DIR), *(str(d) for d in extra_dirs))
    for d in dirs[1:]:
        if not Path(d).is_dir():
            raise PlannerInputError("--hardware-dir", f"{d} is not a folder")
    stamp = tuple((str(p), p.stat().st_mtime_ns) for d in dirs for p in _spec_files(Path(d)))
    return _load_dirs(dirs, stamp)


def get_gpu(name: str, extra_dirs: Iterable[str | Path] = ()) -> GpuSpec:
    """Resolve a GPU by key, canonical name or alias (case and punctuation insensitive).

    A user spec (from ``extra_dirs``) wins over a bundled one that claims the same name.
    """
    specs = all_gpus(extra_dirs)
    wanted = normalize(name)
    names: dict[str, str] = {}  # normalized name -> key
    for spec in specs.values():
        for n in (spec.key, spec.name, *spec.aliases):
            names[normalize(n)] = spec.key
    if wanted in names:
        return specs[names[wanted]]
    close = difflib.get_close_matches(wanted, list(names), n=1) if wanted else []
    hint = f" (did you mean '{names[close[0]]}'?)" if close else ""
    raise PlannerInputError("--gpu", f"unknown GPU '{name}'{hint}; known: {', '.join(sorted(specs))}")
