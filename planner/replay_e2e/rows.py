"""Reading the rows of public measurement tables: version strings, model and GPU names, error stats.

Names resolve only through the catalogs: models through ``planner.model.bundled.find_bundled`` (its
keys,
names, HF ids and aliases), accelerators through ``hardware.catalog.resolve_label`` (the GPU specs'
names and aliases). The few text rules here are generic (a 'v' before a version number, words in
parentheses), never lists of names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from hardware.catalog import resolve_label
from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from planner.model.bundled import BundledModel, find_bundled, refusal

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: object) -> tuple[int, ...] | None:
    """The first 'major.minor[.patch]' written anywhere in ``text`` ('0.20 (per doc text)',
    'post-1.0', 'v0.14.0'); None when there is none."""
    m = _VERSION.search(str(text)) if text is not None and not pd.isna(text) else None
    if m is None:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def _model_candidates(text: str) -> list[str]:
    """``text``, without a 'v' before version digits ('LLaMA v3.1 70B' -> 'LLaMA 3.1 70B'), without
    parenthesised words, and each parenthesised phrase's first word
    ('(Llama-2-7b per build config)' -> 'Llama-2-7b')."""
    plain = re.sub(r"\bv(?=\d)", "", text, flags=re.IGNORECASE)
    out = [text, plain, re.sub(r"\(.*?\)", "", plain).strip()]
    out += [inner.split()[0] for inner in re.findall(r"\((.*?)\)", text) if inner.split()]
    return [c for c in dict.fromkeys(out) if c]


def resolve_model(text: object) -> BundledModel | None:
    """The bundled model a table's model column names, or None (counted as ``unknown_model``)."""
    if text is None or pd.isna(text) or not str(text).strip():
        return None
    for cand in _model_candidates(str(text)):
        found = find_bundled(cand)
        if found is not None:
            return found
    return None


def unresolved_model_reason(text: object) -> str:
    """Skip reason of a model name ``resolve_model`` does not resolve: ``refused_model`` when the
    catalog refuses it by name (``planner/model/configs/refused.yaml`` gives the reason),
    ``unknown_model`` otherwise."""
    if text is not None and not pd.isna(text) and refusal(str(text)) is not None:
        return "refused_model"
    return "unknown_model"


def resolve_gpu(text: object) -> GpuSpec | None:
    """The GPU spec a table's accelerator label names, or None (ambiguous or unknown)."""
    if text is None or pd.isna(text) or not str(text).strip():
        return None
    try:
        return resolve_label(str(text))
    except PlannerInputError:
        return None


def error_group(
    by: str, key: str, pred: Iterable[float], meas: Iterable[float], metric: str = "throughput"
) -> dict[str, object]:
    """{by, key, n, <metric>: {median_ape_pct, p90_ape_pct, median_signed_pct}} of predicted vs
    measured values (absolute and signed percentage errors)."""
    p, m = np.asarray(list(pred), dtype=float), np.asarray(list(meas), dtype=float)
    signed = (p - m) / m * 100.0
    ape = np.abs(signed)
    stats = {
        "median_ape_pct": float(np.median(ape)) if len(ape) else float("nan"),
        "p90_ape_pct": float(np.percentile(ape, 90)) if len(ape) else float("nan"),
        "median_signed_pct": float(np.median(signed)) if len(signed) else float("nan"),
    }
    return {"by": by, "key": key, "n": int(len(p)), metric: stats}


def grouped(
    out: pd.DataFrame,
    by: Iterable[str],
    pred: str = "pred_value",
    meas: str = "value",
    metric: str = "throughput",
) -> list[dict[str, object]]:
    """``error_group`` overall and for each value of each column of ``by``."""
    if out.empty:
        return [error_group("overall", "all", [], [], metric)]
    groups = [error_group("overall", "all", out[pred], out[meas], metric)]
    for col in by:
        for key, sub in out.groupby(col):
            groups.append(error_group(col, str(key), sub[pred], sub[meas], metric))
    return groups


def count(skipped: dict[str, int], reason: str) -> None:
    """Add one row to ``skipped[reason]``."""
    skipped[reason] = skipped.get(reason, 0) + 1
