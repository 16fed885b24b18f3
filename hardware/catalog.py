"""Load GPU specs from the bundled YAML folder and any user folders (``--hardware-dir``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from hardware.spec import GpuSpec
from hardware.errors import PlannerInputError

SPECS_DIR = Path(__file__).with_name("specs")


def normalize(name: str) -> str:
    """'H200-SXM', 'h200 sxm', 'h200_sxm' -> 'h200sxm'."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def load_spec_file(path: Path) -> GpuSpec:
    """Parse one YAML spec; errors name the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise PlannerInputError("hardware", f"cannot read {path}: {exc}".splitlines()[0]) from exc
    if not isinstance(raw, dict):
        raise PlannerInputError("hardware", f"{path} must hold a mapping of GPU fields")
    try:
        return GpuSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "spec"
        raise PlannerInputError(f"hardware {path.name}: {loc}", err["msg"]) from exc


@lru_cache(maxsize=16)
def _load_dirs(dirs: tuple[str, ...]) -> dict[str, GpuSpec]:
    specs: dict[str, GpuSpec] = {}
    for d in dirs:
        folder = Path(d)
        if not folder.is_dir():
            raise PlannerInputError("--hardware-dir", f"{folder} is not a folder")
        for path in sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")):
            spec = load_spec_file(path)
            specs[spec.key] = spec  # later folders override bundled specs
    return specs


def all_gpus(extra_dirs: Iterable[str | Path] = ()) -> dict[str, GpuSpec]:
    """All known GPUs by key: bundled specs, then each extra folder (which may override)."""
    return _load_dirs((str(SPECS_DIR), *(str(d) for d in extra_dirs)))


def get_gpu(name: str, extra_dirs: Iterable[str | Path] = ()) -> GpuSpec:
    """Resolve a GPU by key, canonical name or alias (case and punctuation insensitive)."""
    specs = all_gpus(extra_dirs)
    wanted = normalize(name)
    for spec in specs.values():
        names = (spec.key, spec.name, *spec.aliases)
        if wanted in {normalize(n) for n in names}:
            return spec
    choices = sorted(specs)
    close = difflib.get_close_matches(name.lower(), choices + [a.lower() for s in specs.values() for a in s.aliases], n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise PlannerInputError("--gpu", f"unknown GPU '{name}'{hint}; known: {', '.join(choices)}")
