"""The launch flags of the InferenceMAX runs in the shared measurements
(``inferencemax_recipes.yaml``).

No row of ``silicon_measured.csv`` records its launch flags, so ``validation.e2e`` replays each row
at its engine's defaults. The InferenceMAX runs were launched by public scripts
(github:SemiAnalysisAI/InferenceX) that set some flags away from those defaults: the KV-cache
dtype, the per-step token budget and the memory flag. A row of the dated exports
(``source_file=YYYY-MM-DD.csv; model=<label>; ...``, aggregated), or of the result-database dump
whose id names its model (``model_label``), whose model label, engine and GPU match a recipe is
replayed at the recipe's flags instead (``recipe_kv_dtype``, ``recipe_arrays``). Every entry names
the script and commit it was read from.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from hardware.input_files import read_yaml

RECIPES_FILE = Path(__file__).with_name("inferencemax_recipes.yaml")
KV_DTYPES = ("bf16", "fp8")
ACTIVATION_SCALES = ("static", "token", "block", "tensor")
TOKENS_RULES = ("clients_plus_isl",)
"""``max_num_tokens_rule`` values: ``clients_plus_isl`` is the DeepSeek-R1 TensorRT-LLM scripts'
``MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)/64*64 ))``: one prompt and every client's decode token per
step, rounded up to 64."""
EXPORT_ROW = re.compile(r"^source_file=\d{4}-\d{2}-\d{2}\.csv; model=([^;]+);")
"""``silicon_data_source`` of a dated-export row, capturing its model label."""
DUMP_ROW = re.compile(r"^db-dump/\d{4}-\d{2}-\d{2}; ")
"""``silicon_data_source`` of a row of the InferenceMAX result-database dump (its last ``;`` field
is the image, ``disagg_recipes``), which records no model label: its id's first word is
InferenceX's ``model-prefix`` (``DUMP_MODEL_PREFIXES``)."""
DUMP_MODEL_PREFIXES: dict[str, str] = {"dsr1": "DeepSeek-R1"}
"""InferenceX ``model-prefix`` -> the dated exports' model label, for the prefixes whose dump rows
the replay reads: ``dsr1`` is every ``dsr1-*`` entry's ``model: deepseek-ai/DeepSeek-R1-0528``
(``.github/configs/nvidia-master.yaml`` @c040b5cf2, e.g. ``dsr1-fp8-h200-trt``), the exports'
``model=DeepSeek-R1``. The dump's ``model_path`` is no guide: it records these runs as
deepseek-ai/DeepSeek-V3."""
MEASURED = re.compile(r"measured=(\d{4}-\d{2}-\d{2})")
"""The measurement date a dated-export row's ``silicon_data_source`` records."""
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_TOKENS = 1 << 20
MAX_BALANCE_ITERS = 10_000


@dataclass(frozen=True)
class BatchWait:
    """TensorRT-LLM ``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio`` as a script set
    them, for the runs it set them on: ISL and OSL (None: any) and TP below ``tp_below``."""

    timeout_iters: int
    max_tokens_ratio: float
    isl: int | None = None
    osl: int | None = None
    tp_below: int | None = None

    def applies(self, isl: float, osl: float, tp: float) -> bool:
        """Whether a run of nominal ``isl``/``osl`` at TP ``tp`` had it."""
        return (
            (self.isl is None or isl == self.isl)
            and (self.osl is None or osl == self.osl)
            and (self.tp_below is None or tp < self.tp_below)
        )


@dataclass(frozen=True)
class Recipe:
    """One script's flags for one model label, engine and set of GPUs."""

    model: str
    backend: str
    systems: tuple[str, ...]
    kv_dtype: str | None
    max_num_tokens: float | None
    max_num_tokens_rule: str | None
    memory_fraction: float | None
    source: str
    adp_balance_timeout_iters: int | None = None
    """TensorRT-LLM ``attention_dp_config: {enable_balance: true, timeout_iters: N}``, which the
    script sets only where it enables attention DP (``serving.adp_balance_wait``)."""
    expert_parallel_all_ranks: bool = False
    """The script ran the MoE layers expert-parallel over every GPU of the worker (``--ep_size``
    = TP x attention DP), whatever MoE layout the export records (``recipe_expert_parallel``)."""
    batch_wait: BatchWait | None = None
    """TensorRT-LLM batch waiting where the script set it (``serving.batch_wait``)."""
    measured_from: str = ""
    """First measurement date (ISO, inclusive) the entry covers; "" for no bound."""
    measured_before: str = ""
    """Measurement date (ISO, exclusive) from which a later script applies; "" for no bound."""
    activation_scale: str = ""
    """How the checkpoint the script served scales its FP8 activations
    (``planner.model.quantization.ActivationScale``), where the row's model label names another
    checkpoint (a 16-bit model name for an FP8 run); "" = as the label's checkpoint says."""

    def covers(self, measured: str) -> bool:
        """Whether a run measured on ``measured`` (ISO date; "" unknown) used this script."""
        if not (self.measured_from or self.measured_before):
            return True
        return bool(measured) and (
            (not self.measured_from or measured >= self.measured_from)
            and (not self.measured_before or measured < self.measured_before)
        )

    def tokens(self, clients: float, isl: float) -> float:
        """The step token budget the script set for ``clients`` clients of ``isl``-token prompts
        (NaN when it sets none)."""
        if self.max_num_tokens is not None:
            return self.max_num_tokens
        if self.max_num_tokens_rule == "clients_plus_isl":
            return float(math.ceil((clients + isl + 64) / 64) * 64)
        return math.nan


def whole_in_range(v: object, lo: int, hi: int) -> bool:
    """Whether ``v`` is a whole number (not a bool) in [lo, hi]."""
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _batch_wait(where: str, raw: object, backend: object) -> BatchWait | None:
    """The ``batch_wait`` mapping of an entry (None when absent), checked."""
    if raw is None:
        return None
    keys = {"timeout_iters", "max_tokens_ratio", "isl", "osl", "tp_below"}
    if not isinstance(raw, dict) or not set(raw) <= keys:
        raise PlannerInputError(
            "recipes", f"{where}: batch_wait must be a mapping of {sorted(keys)}"
        )
    if backend != "trtllm":
        raise PlannerInputError(
            "recipes", f"{where}: batch_wait is a TensorRT-LLM option (backend trtllm)"
        )
    iters, ratio = raw.get("timeout_iters"), raw.get("max_tokens_ratio")
    if not isinstance(iters, int) or not whole_in_range(iters, 1, MAX_BALANCE_ITERS):
        raise PlannerInputError(
            "recipes",
            f"{where}: batch_wait.timeout_iters must be a whole number in [1, {MAX_BALANCE_ITERS}]",
        )
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise PlannerInputError(
            "recipes", f"{where}: batch_wait.max_tokens_ratio must be in (0, 1]"
        )
    for k in ("isl", "osl", "tp_below"):
        if raw.get(k) is not None and not whole_in_range(raw[k], 1, MAX_TOKENS):
            raise PlannerInputError(
                "recipes", f"{where}: batch_wait.{k} must be a whole number in [1, {MAX_TOKENS}]"
            )
    opt = {k: int(raw[k]) if raw.get(k) is not None else None for k in ("isl", "osl", "tp_below")}
    return BatchWait(iters, float(ratio), opt["isl"], opt["osl"], opt["tp_below"])


def _entry(path: Path, i: int, raw: object) -> Recipe:
    where = f"{path}: recipes[{i}]"
    if not isinstance(raw, dict):
        raise PlannerInputError("recipes", f"{where}: not a mapping")
    systems = raw.get("systems")
    if not all(isinstance(raw.get(k), str) and raw[k] for k in ("model", "backend", "source")):
        raise PlannerInputError("recipes", f"{where}: needs model, backend and source")
    if not isinstance(systems, list) or not systems or not all(isinstance(s, str) for s in systems):
        raise PlannerInputError("recipes", f"{where}: 'systems' must list GPU keys")
    kv = raw.get("kv_dtype")
    if kv is not None and kv not in KV_DTYPES:
        raise PlannerInputError("recipes", f"{where}: kv_dtype {kv!r} not one of {KV_DTYPES}")
    tokens, rule = raw.get("max_num_tokens"), raw.get("max_num_tokens_rule")
    if tokens is not None and not whole_in_range(tokens, 1, MAX_TOKENS):
        raise PlannerInputError(
            "recipes", f"{where}: max_num_tokens must be a whole number in [1, {MAX_TOKENS}]"
        )
    if rule is not None and rule not in TOKENS_RULES:
        raise PlannerInputError(
            "recipes", f"{where}: max_num_tokens_rule not one of {TOKENS_RULES}"
        )
    mem = raw.get("memory_fraction")
    if mem is not None and (
        isinstance(mem, bool) or not isinstance(mem, (int, float)) or not 0.05 <= mem <= 1.0
    ):
        raise PlannerInputError("recipes", f"{where}: memory_fraction must be in [0.05, 1]")
    if tokens is not None and rule is not None:
        raise PlannerInputError("recipes", f"{where}: give max_num_tokens or its rule, not both")
    adp = raw.get("adp_balance_timeout_iters")
    if adp is not None and not whole_in_range(adp, 1, MAX_BALANCE_ITERS):
        raise PlannerInputError(
            "recipes",
            f"{where}: adp_balance_timeout_iters must be a whole number in "
            f"[1, {MAX_BALANCE_ITERS}]",
        )
    if adp is not None and raw.get("backend") != "trtllm":
        raise PlannerInputError(
            "recipes",
            f"{where}: adp_balance_timeout_iters is a TensorRT-LLM option (backend trtllm)",
        )
    ep_all = raw.get("expert_parallel_all_ranks", False)
    if not isinstance(ep_all, bool):
        raise PlannerInputError("recipes", f"{where}: expert_parallel_all_ranks must be true/false")
    batch_wait = _batch_wait(where, raw.get("batch_wait"), raw.get("backend"))
    act = raw.get("activation_scale", "")
    if act != "" and act not in ACTIVATION_SCALES:
        raise PlannerInputError(
            "recipes", f"{where}: activation_scale {act!r} not one of {ACTIVATION_SCALES}"
        )
    dates = {k: raw.get(k, "") for k in ("measured_from", "measured_before")}
    for k, v in dates.items():
        if isinstance(v, dt.date):
            dates[k] = v.isoformat()
        elif v != "" and not (isinstance(v, str) and ISO_DATE.fullmatch(v)):
            raise PlannerInputError("recipes", f"{where}: {k} must be a date (YYYY-MM-DD)")
    if (
        dates["measured_from"]
        and dates["measured_before"]
        and (dates["measured_from"] >= dates["measured_before"])
    ):
        raise PlannerInputError("recipes", f"{where}: measured_from is not before measured_before")
    return Recipe(
        model=str(raw["model"]),
        backend=str(raw["backend"]),
        systems=tuple(systems),
        kv_dtype=kv,
        max_num_tokens=float(tokens) if tokens is not None else None,
        max_num_tokens_rule=rule,
        memory_fraction=float(mem) if mem is not None else None,
        source=str(raw["source"]),
        adp_balance_timeout_iters=adp,
        expert_parallel_all_ranks=ep_all,
        batch_wait=batch_wait,
        measured_from=str(dates["measured_from"]),
        measured_before=str(dates["measured_before"]),
        activation_scale=str(act),
    )


def load_recipes(path: Path = RECIPES_FILE) -> tuple[Recipe, ...]:
    """The recipes of ``path`` (an input error naming the file and entry for a malformed one)."""
    raw = read_yaml(path, "calibration YAML", "recipes")
    if not isinstance(raw, dict) or not isinstance(raw.get("recipes"), list):
        raise PlannerInputError("recipes", f"{path}: needs a 'recipes' list")
    out = tuple(_entry(path, i, r) for i, r in enumerate(raw["recipes"]))
    spans: dict[tuple[str, str, str], list[Recipe]] = {}
    for r in out:
        for s in r.systems:
            spans.setdefault((r.model, r.backend, s), []).append(r)
    for key, rs in spans.items():
        # entries of one model, engine and GPU must cover disjoint measurement dates
        ordered = sorted(rs, key=lambda r: r.measured_from)
        for a, b in itertools.pairwise(ordered):
            if not a.measured_before or a.measured_before > b.measured_from:
                raise PlannerInputError(
                    "recipes", f"{path}: {'/'.join(key)} listed twice for the same dates"
                )
    return out


@cache
def _by_key(path: Path = RECIPES_FILE) -> dict[tuple[str, str, str], tuple[Recipe, ...]]:
    out: dict[tuple[str, str, str], tuple[Recipe, ...]] = {}
    for r in load_recipes(path):
        for s in r.systems:
            out[(r.model, r.backend, s)] = (*out.get((r.model, r.backend, s), ()), r)
    return out


def model_label(row: pd.Series | dict[str, object]) -> str | None:
    """The InferenceMAX model label of a row: a dated export's ``model=``, a dump row's id prefix
    (``DUMP_MODEL_PREFIXES``); None for other rows."""
    source = str(row.get("silicon_data_source", ""))
    m = EXPORT_ROW.match(source)
    if m is not None:
        return m.group(1)
    if DUMP_ROW.match(source):
        return DUMP_MODEL_PREFIXES.get(str(row.get("id", "")).split("_", 1)[0])
    return None


def recipe_for(row: pd.Series | dict[str, object]) -> Recipe | None:
    """The recipe an aggregated InferenceMAX row (a dated export's, or a dump row whose id names
    its model, ``model_label``) ran with, if one is listed (the entry whose measurement dates cover
    the row's ``measured=`` date)."""
    label = model_label(row)
    if label is None or row.get("mode") != "agg":
        return None
    when = MEASURED.search(str(row.get("silicon_data_source", "")))
    measured = when.group(1) if when else ""
    for r in _by_key().get((label, str(row.get("backend")), str(row.get("system"))), ()):
        if r.covers(measured):
            return r
    return None


def recipe_kv_dtype(row: pd.Series | dict[str, object]) -> str | None:
    """The KV-cache dtype the row's recipe set, or None."""
    r = recipe_for(row)
    return r.kv_dtype if r is not None else None


BLOCK_SCALED_MODE = "fp8_block"
"""``gemm_quant_mode`` of rows whose FP8 GEMMs are block-scaled (128-value groups)."""


def activation_scales(rows: pd.DataFrame) -> pd.Series:
    """Per row, the activation scale its FP8 GEMMs ran with where the row or its recipe says so
    (``Recipe.activation_scale``; a ``gemm_quant_mode`` of ``fp8_block``: "block"); "" where
    neither does (the model label's checkpoint decides)."""
    out = pd.Series("", index=rows.index, dtype=object)
    if "gemm_quant_mode" in rows:
        out[rows["gemm_quant_mode"].astype(str) == BLOCK_SCALED_MODE] = "block"
    for i, row in rows.iterrows():
        r = recipe_for(row)
        if r is not None and r.activation_scale:
            out[i] = r.activation_scale
    return out


def recipe_expert_parallel(row: pd.Series | dict[str, object]) -> bool:
    """Whether the row's recipe ran the MoE layers expert-parallel over every GPU of the worker."""
    r = recipe_for(row)
    return r is not None and r.expert_parallel_all_ranks


class RecipeArrays(NamedTuple):
    """Per prepared row, the flags its recipe set (``recipe_arrays``)."""

    chunk: np.ndarray
    """Step token budget; NaN where none is set."""
    memory_flag: np.ndarray
    """Memory flag in its engine's own meaning; NaN where none is set."""
    adp_balance_iters: np.ndarray
    """TensorRT-LLM attention-DP balance ``timeout_iters``; 0 where off."""
    batch_wait_iters: np.ndarray
    """TensorRT-LLM ``batch_wait_timeout_iters``; 0 where off."""
    batch_wait_tokens: np.ndarray
    """Its threshold, ``batch_wait_max_tokens_ratio`` x the row's step token budget; 0 where off."""


def recipe_arrays(rows: pd.DataFrame) -> RecipeArrays:
    """The flags each prepared row's recipe set (``RecipeArrays``), in one pass over the rows. The
    budget's clients are ``c_concurrency``; the memory flag is in its engine's own meaning: vLLM
    ``--gpu-memory-utilization``, TensorRT-LLM ``free_gpu_memory_fraction``, SGLang
    ``--mem-fraction-static`` (``memory_batch.default_pool_util``); the balance timeout
    (TensorRT-LLM ``timeout_iters``) only on rows with attention DP (``c_dp`` > 1), where the
    script enabled it; batch waiting only on rows without attention DP (TensorRT-LLM ignores it
    there) of the lengths and TPs the script set it for, its threshold against the recipe's token
    budget (off where the recipe sets none)."""
    n = len(rows)
    out = RecipeArrays(np.full(n, np.nan), np.full(n, np.nan), *(np.zeros(n) for _ in range(3)))
    for i, (_, row) in enumerate(rows.iterrows()):
        r = recipe_for(row)
        if r is None:
            continue
        out.chunk[i] = r.tokens(float(row.get("c_concurrency", 1.0)), float(row["isl"]))
        if r.memory_fraction is not None:
            out.memory_flag[i] = r.memory_fraction
        dp = float(row.get("c_dp", 1.0))
        if r.adp_balance_timeout_iters is not None and dp > 1:
            out.adp_balance_iters[i] = r.adp_balance_timeout_iters
        bw = r.batch_wait
        tp = float(row.get("c_tp", row.get("tp_size", 1.0)))
        if bw is not None and dp <= 1 and bw.applies(float(row["isl"]), float(row["osl"]), tp):
            if np.isfinite(out.chunk[i]):
                out.batch_wait_iters[i] = bw.timeout_iters
                out.batch_wait_tokens[i] = bw.max_tokens_ratio * out.chunk[i]
    return out


def recipe_chunks(rows: pd.DataFrame) -> np.ndarray:
    """The step token budget of ``recipe_arrays``."""
    return recipe_arrays(rows).chunk


def recipe_memory_flags(rows: pd.DataFrame) -> np.ndarray:
    """The memory flag of ``recipe_arrays``."""
    return recipe_arrays(rows).memory_flag
