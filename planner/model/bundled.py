"""Model catalog: bundled configs (``planner/model/configs``), HF ids,
or a local ``config.json``."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

from hardware.errors import PlannerInputError
from hardware.input_files import parse_json, read_json, read_packaged_yaml
from planner.model.parser import parse_config
from planner.model.spec import ModelSpec

BUNDLED_DIR = Path(__file__).with_name("configs")
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


# A Hugging Face repository id (owner/name) or a local path; no control characters, no shell
# metacharacters beyond what paths need, so an identity can reach a launch script safely.
_HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_PATH = re.compile(r"^[A-Za-z0-9._/~+@:=-][A-Za-z0-9._/~+@:= -]{0,1023}$")


def check_model_id(value: str, field: str = "--model-id") -> str:
    """A model identity as the engines take it: an HF id ``owner/name`` or a local path."""
    if _HF_ID.match(value) and ".." not in value:
        return value
    if (value.startswith(("/", "./", "~/")) or Path(value).is_absolute()) and _PATH.match(value):
        return value
    raise PlannerInputError(
        field,
        f"{value!r} is not a Hugging Face id (owner/name: letters, "
        "digits, '.', '_', '-') or a local path (starting with /, ./ or ~/, "
        "no control or shell characters)",
    )


@lru_cache(maxsize=1)
def bundled_models() -> dict[str, BundledModel]:
    """Every bundled checkpoint by key; each has its own HF id (identity)."""
    out: dict[str, BundledModel] = {}
    for path in sorted(BUNDLED_DIR.glob("*.json")):
        meta = json.loads(path.read_text())["_bundled"]
        out[meta["key"]] = BundledModel(
            key=meta["key"],
            name=meta["name"],
            hf_id=meta["hf_id"],
            aliases=tuple(meta.get("aliases", ())),
            source=meta["source"],
            path=path,
        )
    return out


def _names(m: BundledModel) -> set[str]:
    names = {m.key, m.name, m.hf_id, m.hf_id.split("/")[-1], *m.aliases}
    names |= {a.split("/")[-1] for a in m.aliases}
    return {_norm(n) for n in names}


def find_bundled(ref: str) -> BundledModel | None:
    """Resolve a bundled checkpoint: exact HF id first (case-insensitive), then key, display
    name, repository name or alias. Every name belongs to one checkpoint only (a test checks)."""
    wanted = ref.strip().lower()
    for m in bundled_models().values():
        if wanted == m.hf_id.lower() or wanted in (a.lower() for a in m.aliases if "/" in a):
            return m
    normed = _norm(ref)
    for m in bundled_models().values():
        if normed in _names(m):
            return m
    return None


REFUSED_FILE = BUNDLED_DIR / "refused.yaml"


@lru_cache(maxsize=1)
def refused_models() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Names the catalog refuses (``configs/refused.yaml``): key -> (reason, names)."""
    raw = cast(dict[str, Any], read_packaged_yaml(REFUSED_FILE))["refused"]
    return {r["key"]: (r["reason"], tuple(r["names"])) for r in raw}


def refusal(ref: str) -> tuple[str, str] | None:
    """(refused key, reason) when ``ref`` names a model the catalog refuses; None otherwise."""
    normed = _norm(ref)
    for key, (reason, names) in refused_models().items():
        if normed in {_norm(n) for n in (key, *names)}:
            return key, reason
    return None


def read_config_file(path: Path) -> dict[str, object]:
    """Read a config.json; malformed, truncated or oversized files are one-line input errors."""
    if path.is_dir():
        path = path / "config.json"
    data = read_json(path, "config.json", "--model")
    if not isinstance(data, dict):
        raise PlannerInputError("--model", f"{path} must hold a JSON object")
    return data


def _sibling_quant_config(path: Path) -> dict[str, object] | None:
    """ModelOpt's ``hf_quant_config.json`` next to a config.json (HF repository layout)."""
    folder = path if path.is_dir() else path.parent
    quant = folder / "hf_quant_config.json"
    return read_config_file(quant) if quant.is_file() else None


def parse_config_text(text: str, name: str = "uploaded config", model_id: str = "") -> ModelSpec:
    """Parse config.json content given as text (used by the web UI upload)."""
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise PlannerInputError("config.json", f"larger than {MAX_CONFIG_BYTES} bytes")
    data = parse_json(text, "config.json")
    ident = check_model_id(model_id, "model id") if model_id else ""
    return parse_config(data, name=ident or name, hf_id=ident)


def _bundled_spec(bundled: BundledModel) -> ModelSpec:
    raw = json.loads(bundled.path.read_text())
    return parse_config(
        raw, name=bundled.name, hf_id=bundled.hf_id, hf_quant_config=raw.get("_hf_quant_config")
    )


@lru_cache(maxsize=64)
def load_model(ref: str, model_id: str = "") -> ModelSpec:
    """A model from a bundled HF id / name / alias, or a path to a config.json (or its folder).

    A bundled checkpoint carries its own HF id. A local config.json has no identity unless
    ``model_id`` (the weights' HF id or local path, ``--model-id``) names it; without one the
    model can be estimated and planned but not emitted.
    """
    if not ref or not ref.strip():
        raise PlannerInputError("--model", "must not be empty")
    ident = check_model_id(model_id) if model_id else ""
    bundled = find_bundled(ref)
    if bundled is not None:
        if ident and ident != bundled.hf_id:
            raise PlannerInputError(
                "--model-id",
                f"'{ref}' is the bundled checkpoint "
                f"{bundled.hf_id}; --model-id {ident} names other weights "
                "(give that checkpoint's config.json with --model PATH)",
            )
        return _bundled_spec(bundled)
    refused = refusal(ref)
    if refused is not None:
        raise PlannerInputError("--model", f"'{ref}' is refused ({refused[0]}): {refused[1]}")
    path = Path(ref).expanduser()
    if path.exists() or ref.endswith(".json"):
        raw = read_config_file(path)
        name = ident or (path.stem if path.is_file() else path.name)
        return parse_config(
            raw, name=name, hf_id=ident, hf_quant_config=_sibling_quant_config(path)
        )
    choices = sorted(bundled_models())
    close = difflib.get_close_matches(ref.lower(), choices, n=1, cutoff=0.5)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise PlannerInputError(
        "--model",
        f"unknown model '{ref}'{hint}; use a bundled name ({', '.join(choices)}), "
        "the Hugging Face id of one, or a path to a config.json (with --model-id naming its "
        "weights)",
    )
