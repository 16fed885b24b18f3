"""Decode caps of the InferenceMAX disaggregated runs in the shared measurements
(``inferencemax_disagg.yaml``).

A disaggregated row of the result-database dumps (``silicon_data_source`` ``db-dump/...;
config_id=...; <image>``) records its deployment's layout and client count but not the decode
engine's batch cap: its ``decode_batch_size`` is the clients per decode rank of that sweep point
(lab/notes/disagg.md), so read as the cap it never binds. InferenceMAX (now
InferenceX) launched these runs from ``.github/configs/nvidia-master.yaml``, whose disaggregated
search-space entries name, per image, GPU, precision, ISL/OSL, prefill and decode layout and
client list, the launch recipe (an NVIDIA srt-slurm recipe ``..._batch<N>_...yaml``, whose
``batch<N>`` is the decode worker's ``max_batch_size`` per attention-DP rank, or a
``DECODE_MAX_BATCH_SIZE=<N>`` setting). Several of those runs put more clients on a deployment
than its decode slots (e.g. 27 clients on 3 decode workers of 8 slots), so requests wait for a
slot; that wait is most of the time to first token the rows measure at their sweep tops.

A row that matches an entry here (model, image, GPU, precision, ISL, OSL, prefill and decode
workers / GPUs / expert parallelism, and its client count in the entry's list) is replayed with
the entry's cap as its decode ``max_num_seqs`` (``decode_cap``); other rows keep the reading
above. Every entry names the file version and search-space entry it was read from. Where an entry
also names its ``decode_routers`` (with ``routers_source``: NVIDIA srt-slurm launches that put
nginx in front of several round-robin dynamo frontends), the replay lets requests wait on a full
decode worker while another has a free slot (``decode_routers``, ``serving.routed_running``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

from hardware.catalog import all_gpus
from hardware.errors import PlannerInputError
from hardware.input_files import read_yaml
from lab.recipes import DUMP_ROW, whole_in_range

DISAGG_FILE = Path(__file__).with_name("inferencemax_disagg.yaml")
MAX_WORKERS = 1024
MAX_GPUS = 1024
MAX_TOKENS = 1 << 20
MAX_CLIENTS = 1 << 20
MAX_BATCH = 1 << 16
MAX_ROUTERS = 64


@dataclass(frozen=True)
class Layout:
    """One role's deployment: workers, GPUs per worker (TP x attention DP), expert parallelism."""

    workers: int
    gpus: int
    ep: int


@dataclass(frozen=True)
class DisaggRecipe:
    """The decode cap of one InferenceMAX disaggregated deployment at the listed client counts."""

    model: str
    image: str
    system: str
    precision: str
    isl: int
    osl: int
    prefill: Layout
    decode: Layout
    concurrency: frozenset[int]
    decode_max_batch_size: int
    source: str
    decode_routers: int | None = None
    """Round-robin routers that placed requests on the decode workers without looking at their
    free slots (``serving.routed_running``), where the launch recipe says how many; None: not
    read (the replay lets requests fill free slots)."""
    routers_source: str = ""

    def key(self) -> tuple[object, ...]:
        """What a row must equal (besides its client count) to match this entry."""
        return (
            self.model,
            self.image,
            self.system,
            self.precision,
            self.isl,
            self.osl,
            self.prefill,
            self.decode,
        )


def _whole(where: str, name: str, v: object, hi: int) -> int:
    if not isinstance(v, int) or not whole_in_range(v, 1, hi):
        raise PlannerInputError(
            "disagg recipes", f"{where}: {name} must be a whole number in [1, {hi}]"
        )
    return v


def _text(where: str, name: str, v: object) -> str:
    if not isinstance(v, str) or not v.strip():
        raise PlannerInputError("disagg recipes", f"{where}: {name} must be a non-empty string")
    return v


def _layout(where: str, name: str, raw: object) -> Layout:
    if not isinstance(raw, dict) or set(raw) != {"workers", "gpus", "ep"}:
        raise PlannerInputError(
            "disagg recipes", f"{where}: {name} must be a mapping of workers, gpus and ep"
        )
    return Layout(
        _whole(where, f"{name}.workers", raw["workers"], MAX_WORKERS),
        _whole(where, f"{name}.gpus", raw["gpus"], MAX_GPUS),
        _whole(where, f"{name}.ep", raw["ep"], MAX_GPUS),
    )


def _entry(path: Path, i: int, raw: object) -> DisaggRecipe:
    where = f"{path}: deployments[{i}]"
    fields = {
        "model",
        "image",
        "system",
        "precision",
        "isl",
        "osl",
        "prefill",
        "decode",
        "concurrency",
        "decode_max_batch_size",
        "source",
    }
    routing = {"decode_routers", "routers_source"}
    if not isinstance(raw, dict) or set(raw) not in (fields, fields | routing):
        raise PlannerInputError(
            "disagg recipes",
            f"{where}: needs exactly {sorted(fields)}, and optionally both of {sorted(routing)}",
        )
    clients = raw["concurrency"]
    if not isinstance(clients, list) or not clients:
        raise PlannerInputError("disagg recipes", f"{where}: concurrency must list client counts")
    return DisaggRecipe(
        model=_text(where, "model", raw["model"]),
        image=_text(where, "image", raw["image"]),
        system=_text(where, "system", raw["system"]),
        precision=_text(where, "precision", raw["precision"]),
        isl=_whole(where, "isl", raw["isl"], MAX_TOKENS),
        osl=_whole(where, "osl", raw["osl"], MAX_TOKENS),
        prefill=_layout(where, "prefill", raw["prefill"]),
        decode=_layout(where, "decode", raw["decode"]),
        concurrency=frozenset(_whole(where, "concurrency", c, MAX_CLIENTS) for c in clients),
        decode_max_batch_size=_whole(
            where, "decode_max_batch_size", raw["decode_max_batch_size"], MAX_BATCH
        ),
        source=_text(where, "source", raw["source"]),
        decode_routers=(
            _whole(where, "decode_routers", raw["decode_routers"], MAX_ROUTERS)
            if "decode_routers" in raw
            else None
        ),
        routers_source=(
            _text(where, "routers_source", raw["routers_source"]) if "routers_source" in raw else ""
        ),
    )


def load_disagg_recipes(path: Path = DISAGG_FILE) -> tuple[DisaggRecipe, ...]:
    """The entries of ``path``, checked: one cap per deployment and client count."""
    raw = read_yaml(path, "calibration YAML", "disagg recipes")
    if not isinstance(raw, dict) or not isinstance(raw.get("deployments"), list):
        raise PlannerInputError("disagg recipes", f"{path}: needs a 'deployments' list")
    entries = tuple(_entry(path, i, e) for i, e in enumerate(raw["deployments"]))
    seen: dict[tuple[object, ...], int] = {}
    for i, e in enumerate(entries):
        for c in e.concurrency:
            k = (*e.key(), c)
            if k in seen:
                raise PlannerInputError(
                    "disagg recipes",
                    f"{path}: deployments[{i}] repeats deployments[{seen[k]}] at {c} clients",
                )
            seen[k] = i
    return entries


@cache
def _index() -> dict[tuple[object, ...], DisaggRecipe]:
    return {(*e.key(), c): e for e in load_disagg_recipes() for c in e.concurrency}


def _int(v: object) -> int | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f == int(f) and f > 0 else None


def _layout_of(row: pd.Series, role: str) -> Layout | None:
    """A row's ``role`` (``prefill_`` / ``decode_``) layout as the entries give it."""
    vals = [_int(row.get(f"{role}{c}")) for c in ("num_workers", "tp_size", "moe_ep_size")]
    dp = _int(row.get(f"{role}attention_dp_size")) or 1
    if any(v is None for v in vals):
        return None
    workers, tp, ep = (int(v) for v in vals)  # type: ignore[arg-type]
    return Layout(workers, tp * dp, ep)


def _dump_image(row: pd.Series) -> str | None:
    """The image a disaggregated dump row ran (the last ``;`` field of its
    ``silicon_data_source``), or None for any other row."""
    source = str(row.get("silicon_data_source", ""))
    if row.get("mode") != "disagg" or not DUMP_ROW.match(source):
        return None
    return source.split(";")[-1].strip()


def matching_recipe(row: pd.Series, clients: float) -> DisaggRecipe | None:
    """The entry a disaggregated dump row ran under at ``clients`` clients, or None."""
    image = _dump_image(row)
    if image is None:
        return None
    prefill, decode = _layout_of(row, "prefill_"), _layout_of(row, "decode_")
    isl, osl, n = _int(row.get("isl")), _int(row.get("osl")), _int(round(clients))
    if prefill is None or decode is None or isl is None or osl is None or n is None:
        return None
    key = (
        str(row.get("model_path")),
        image,
        str(row.get("system")),
        str(row.get("precision")),
        isl,
        osl,
        prefill,
        decode,
        n,
    )
    return _index().get(key)


def decode_routers(row: pd.Series, clients: float) -> float:
    """How many slot-blind round-robin routers fed a disaggregated dump row's decode workers
    (``DisaggRecipe.decode_routers``), or NaN where no entry says."""
    e = matching_recipe(row, clients)
    return float(e.decode_routers) if e is not None and e.decode_routers else math.nan


def decode_cap(row: pd.Series, clients: float) -> float:
    """The decode ``max_num_seqs`` per attention-DP rank a disaggregated dump row ran with
    (``matching_recipe``), or NaN where no entry names it."""
    e = matching_recipe(row, clients)
    return float(e.decode_max_batch_size) if e is not None else math.nan


@dataclass(frozen=True)
class ExpertParallelLaunch:
    """A disaggregated launch whose script ran every worker with attention DP as DEP: the MoE
    layers expert-parallel over all of the worker's GPUs (SGLang ``--enable-deepep-moe``, which
    sets ``ep_size`` to ``tp_size``), whatever expert parallelism the dump records."""

    model: str
    image: str
    system: str
    source: str

    def key(self) -> tuple[str, str, str]:
        """What a row must equal to match: its model, image and GPU."""
        return (self.model, self.image, self.system)


LAUNCH_FIELDS = ("model", "image", "system", "source")


def _launch(path: Path, i: int, raw: object) -> ExpertParallelLaunch:
    where = f"{path}: expert_parallel_launches[{i}]"
    if not isinstance(raw, dict) or set(raw) != set(LAUNCH_FIELDS):
        raise PlannerInputError("disagg recipes", f"{where}: needs exactly {list(LAUNCH_FIELDS)}")
    vals = {k: _text(where, k, raw[k]) for k in LAUNCH_FIELDS}
    for k in ("model", "image", "system"):
        if vals[k] != vals[k].strip():
            raise PlannerInputError("disagg recipes", f"{where}: {k} has surrounding spaces")
    keys = sorted(all_gpus())
    if vals["system"] not in keys:
        raise PlannerInputError(
            "disagg recipes",
            f"{where}: system {vals['system']!r} is not a GPU key; known: {', '.join(keys)}",
        )
    return ExpertParallelLaunch(**vals)


def load_expert_parallel_launches(path: Path = DISAGG_FILE) -> tuple[ExpertParallelLaunch, ...]:
    """The ``expert_parallel_launches`` of ``path`` (none where the file lists none), checked: one
    entry per model, image and GPU."""
    raw = read_yaml(path, "calibration YAML", "disagg recipes")
    if not isinstance(raw, dict):
        raise PlannerInputError("disagg recipes", f"{path}: needs a mapping at the top level")
    launches = raw.get("expert_parallel_launches", [])
    if not isinstance(launches, list):
        raise PlannerInputError(
            "disagg recipes", f"{path}: expert_parallel_launches must be a list"
        )
    out = tuple(_launch(path, i, e) for i, e in enumerate(launches))
    seen: dict[tuple[str, str, str], int] = {}
    for i, e in enumerate(out):
        if e.key() in seen:
            raise PlannerInputError(
                "disagg recipes",
                f"{path}: expert_parallel_launches[{i}] repeats expert_parallel_launches"
                f"[{seen[e.key()]}]",
            )
        seen[e.key()] = i
    return out


@cache
def _launch_keys() -> frozenset[tuple[str, str, str]]:
    return frozenset(e.key() for e in load_expert_parallel_launches())


def launch_expert_parallel(row: pd.Series) -> bool:
    """Whether a disaggregated dump row's launch ran its attention-DP workers as DEP
    (``ExpertParallelLaunch``): matched on the row's model, image (the last field of its
    ``silicon_data_source``) and GPU."""
    image = _dump_image(row)
    return image is not None and (
        (str(row.get("model_path")), image, str(row.get("system"))) in _launch_keys()
    )
