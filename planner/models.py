"""Model catalog: bundled configs (``planner/model_configs``), HF ids, or a local ``config.json``."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from hardware.errors import PlannerInputError
from hardware.input_files import parse_json, read_json
from planner.model_parser import parse_config
from planner.model_spec import ModelSpec

BUNDLED_DIR = Path(__file__).with_name("model_configs")
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; refuse anything absurd


@dataclass(frozen=True)
class BundledModel:
    """A bundled config and the names it answers to."""

    key: str
    name: str
    hf_id: str
    aliases: tuple[str, ...]
    source: str
    path: Path


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", name.lower().replace("meta-llama-", "llama-"))


@lru_cache(maxsize=1)
def bundled_models() -> dict[str, BundledModel]:
    """Every bundled model by key."""
    out: dict[str, BundledModel] = {}
    for path in sorted(BUNDLED_DIR.glob("*.json")):
        meta = json.loads(path.read_text())["_bundled"]
        out[meta["key"]] = BundledModel(
            key=meta["key"], name=meta["name"], hf_id=meta["hf_id"],
            aliases=tuple(meta.get("aliases", ())), source=meta["source"], path=path,
        )
    return out


def _names(m: BundledModel) -> set[str]:
    names = {m.key, m.name, m.hf_id, m.hf_id.split("/")[-1], *m.aliases}
    names |= {a.split("/")[-1] for a in m.aliases}
    return {_norm(n) for n in names}


def find_bundled(ref: str) -> BundledModel | None:
    """Resolve a bundled model by key, display name, HF id or alias (case-insensitive)."""
    wanted = _norm(ref)
    for m in bundled_models().values():
        if wanted in _names(m):
            return m
    return None


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a config.json; malformed, truncated or oversized files are one-line input errors."""
    if path.is_dir():
        path = path / "config.json"
    data = read_json(path, "config.json", "--model")
    if not isinstance(data, dict):
        raise PlannerInputError("--model", f"{path} must hold a JSON object")
    return data


def parse_config_text(text: str, name: str = "uploaded config") -> ModelSpec:
    """Parse config.json content given as text (used by the web UI upload)."""
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise PlannerInputError("config.json", f"larger than {MAX_CONFIG_BYTES} bytes")
    data = parse_json(text, "config.json")
    return parse_config(data, name=name)


@lru_cache(maxsize=64)
def load_model(ref: str) -> ModelSpec:
    """A model from a bundled name / HF id / alias, or a path to a config.json (or its folder)."""
    if not ref or not ref.strip():
        raise PlannerInputError("--model", "must not be empty")
    bundled = find_bundled(ref)
    if bundled is not None:
        raw = json.loads(bundled.path.read_text())
        return parse_config(raw, name=bundled.name, hf_id=bundled.hf_id)
    path = Path(ref).expanduser()
    if path.exists() or ref.endswith(".json"):
        return parse_config(read_config_file(path), name=path.stem if path.is_file() else path.name)
    choices = sorted(bundled_models())
    close = difflib.get_close_matches(ref.lower(), choices, n=1, cutoff=0.5)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise PlannerInputError(
        "--model",
        f"unknown model '{ref}'{hint}; use a bundled name ({', '.join(choices)}), "
        "a Hugging Face id of one, or a path to a config.json",
    )
