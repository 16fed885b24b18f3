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
        raise PlannerInputError(
            where, "must hold a mapping of GPU fields (name, key, memory_bytes, ...)"
        )
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
                    f"hardware file {path}: key",
                    f"'{spec.key}' is also defined in {seen[spec.key]}",
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
    raise PlannerInputError(
        "--gpu", f"unknown GPU '{name}'{hint}; known: {', '.join(sorted(specs))}"
    )


_MEMORY_IN_LABEL = re.compile(r"(\d+(?:\.\d+)?)\s*G(?:i?B)?\b", re.IGNORECASE)
_COUNT_PREFIX = re.compile(r"^\s*\d+\s*x\s*", re.IGNORECASE)
_VENDOR_PREFIX = re.compile(r"^\s*(nvidia|amd|intel)\s+", re.IGNORECASE)


def _label_candidates(label: str) -> list[str]:
    """``label`` and shorter forms: without parentheses, a leading 'Nx' count, a vendor word, then
    with trailing '-' segments dropped one at a time ('H200-SXM-141GB-CTS' -> ... -> 'H200')."""
    base = _VENDOR_PREFIX.sub("", _COUNT_PREFIX.sub("", re.sub(r"\(.*?\)", "", label))).strip()
    out = [label, base]
    parts = base.split("-")
    out += ["-".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
    return [c for c in out if c.strip()]


def _memory_conflict(label: str, spec: GpuSpec) -> str | None:
    """A memory size written in ``label`` (e.g. '40GB') that is not the spec's, within 10%."""
    for m in _MEMORY_IN_LABEL.finditer(re.sub(r"\(.*?\)", "", label)):
        gb = float(m.group(1))
        if not (0.9 * gb * 1e9 <= spec.memory_bytes <= 1.1 * gb * 2**30):
            return f"label says {m.group(0)}, {spec.key} has {spec.memory_bytes / 1e9:.0f} GB"
    return None


def resolve_label(label: str, extra_dirs: Iterable[str | Path] = ()) -> GpuSpec:
    """The GPU a data set's free-text accelerator label names ('NVIDIA H100-SXM-80GB',
    'AMD Instinct MI300X-NPS1-SPX-192GB-750W', 'B200-180GB (DGX B200)', '8xH100 ...').

    Tries the label, then shorter forms (``_label_candidates``) against the catalog's names and
    aliases. Refuses (``PlannerInputError``) a label whose parentheses say the variant is not
    stated, a memory size that contradicts the matched spec, and a label no form of which is
    known."""
    if re.search(r"\(.*not stated.*\)", label, re.IGNORECASE):
        raise PlannerInputError("gpu", f"'{label}': the label says the variant is not stated")
    specs = all_gpus(extra_dirs)
    names = {normalize(n): s.key for s in specs.values() for n in (s.key, s.name, *s.aliases)}
    for cand in _label_candidates(label):
        key = names.get(normalize(cand))
        if key is not None:
            conflict = _memory_conflict(label, specs[key])
            if conflict:
                raise PlannerInputError("gpu", f"'{label}': {conflict}")
            return specs[key]
    raise PlannerInputError(
        "gpu", f"'{label}': no GPU of the catalog matches; known: {', '.join(sorted(specs))}"
    )
