"""The busiest expert-parallel rank of a fused-MoE layer: how its grouped GEMMs are priced, checked
against AIConfigurator's fused-MoE tables.

A step of an expert-parallel MoE layer lasts as long as its busiest rank. ``planner.perf.opgraph``
prices that rank's grouped GEMMs as a balanced layer at its load, T(f x n): the layer's n tokens
times the busiest / mean load factor f (``opgraph.moe_imbalance``). Multiplying the balanced time
by the factor, f x T(n), would charge a weight-bound (decode) layer for rows that cost it almost
nothing: it reads the same experts whatever their rows.

AIConfigurator timed every fused-MoE shape of its tables under balanced routing and under a skewed
one, ``power_law_1.01`` (per-expert loads drawn from a power law of exponent 1.01 between 1 and
0.8 n tokens, each at most n, scaled to n x top-k pairs; the busiest EP rank is the one timed:
``collector/helper.py``, github:ai-dynamo/aiconfigurator @095f58a51). ``power_law_load`` gives
the busiest rank's load factor of such routing (a seeded Monte Carlo of that description, our own
code); ``compare`` prices each balanced / skewed pair of a GPU's tables both ways with the shipped
kernel tier; ``summary`` reports the median |ln(priced / measured)| of the skewed / balanced
latency ratio:

    python -m kernels_db.tools.moe_load_check --aic-data DIR [--gpu h200_sxm] [--pairs 3000]

DIR is AIConfigurator's ``aic-core/src/aiconfigurator_core/systems/data`` folder, read at
``<gpu>/moe/<engine>/<version>/moe_perf.parquet``. On H200 (@095f58a51: SGLang 0.5.9, TensorRT-LLM
1.2.0rc5 and 1.3.0rc20, vLLM 0.14; 3,000 pairs per table at EP 2-16, 12,000 in all), 2026-12-02:
f x T(n) 0.242, T(f x n) 0.104; up to 64 tokens the measured ratio is 0.99-1.06 where f x T(n)
says 1.26-1.31 and T(f x n) 1.04-1.08.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from kernels_db.aiconfigurator import DTYPE_NAMES, read_parquet
from kernels_db.lookup import KernelDB

SKEWED: Final[str] = "power_law_1.01"
"""The skewed routing of the tables compared with ``balanced``."""
ALPHA: Final[float] = 1.01
"""Its power-law exponent."""
MAX_EP: Final[int] = 16
"""Largest EP size compared (wider layouts run with redundant experts in practice)."""
KEYS: Final[tuple[str, ...]] = (
    "moe_dtype",
    "num_tokens",
    "hidden_size",
    "inter_size",
    "topk",
    "num_experts",
    "moe_tp_size",
    "moe_ep_size",
)
TOKEN_BINS: Final[tuple[float, ...]] = (0, 64, 512, 2047, 8192, np.inf)
TOKEN_LABELS: Final[tuple[str, ...]] = ("<=64", "65-512", "513-2047", "2048-8192", ">8192")


def power_law_load(
    tokens: float,
    experts: int,
    topk: int,
    ep: int,
    alpha: float = ALPHA,
    samples: int = 48,
    seed: int = 0,
) -> float:
    """Mean over ``samples`` draws of the busiest EP rank's share of the token-expert pairs over
    the mean share, when each expert's load is drawn from a power law of exponent ``alpha``
    between 1 and 0.8 x ``tokens`` (0.01 and 2 when there are fewer pairs than experts), scaled to
    ``tokens`` x ``topk`` pairs, and capped at ``tokens`` (an expert takes a token once), the
    excess spread over the others in proportion; experts sit on the ranks in drawn order."""
    if not (tokens > 0 and experts > 0 and 0 < topk <= experts and ep > 0):
        raise PlannerInputError("moe_load", "tokens, experts, topk and ep must be positive")
    if experts % ep:
        raise PlannerInputError("moe_load", f"{experts} experts do not split over {ep} ranks")
    experts, topk, ep = int(experts), int(topk), int(ep)
    if ep == 1:
        return 1.0
    pairs = tokens * topk
    lo, hi = (1.0, max(0.8 * tokens, 1.01)) if pairs > experts else (0.01, 2.0)
    a = 1.0 - alpha
    u = np.random.default_rng(seed).random((samples, experts))
    load = ((hi**a - lo**a) * u + lo**a) ** (1.0 / a)
    load *= pairs / load.sum(axis=1, keepdims=True)
    for _ in range(experts):  # each pass fills at least one expert to the cap
        over = np.clip(load - tokens, 0.0, None).sum(axis=1, keepdims=True)
        if float(over.max()) <= 1e-9 * pairs:
            break
        load = np.minimum(load, tokens)
        room = np.where(load < tokens, load, 0.0)
        load += over * room / np.maximum(room.sum(axis=1, keepdims=True), 1e-300)
    ranks = load.reshape(samples, ep, experts // ep).sum(axis=2)
    return float(np.mean(ranks.max(axis=1) / ranks.mean(axis=1)))


def _table_pairs(path: Path, df: pd.DataFrame) -> pd.DataFrame:
    """Balanced / skewed latency pairs (seconds) of one table at EP 2..``MAX_EP``."""
    need = {*KEYS, "distribution", "latency"}
    if not need <= set(df.columns):
        raise PlannerInputError(str(path), f"needs columns {', '.join(sorted(need))}")
    if "kernel_source" in df.columns:  # TensorRT-LLM's non-gated and min-latency variants
        df = df[~df["kernel_source"].astype(str).str.contains("nongated|min_latency")]
    df = df[
        df["distribution"].isin(["balanced", SKEWED])
        & df["moe_dtype"].astype(str).map(DTYPE_NAMES).isin(["bf16", "fp8"])
    ]
    sizes = df[[*KEYS[1:], "latency"]].to_numpy(dtype=float)
    if not np.isfinite(sizes).all() or (sizes <= 0).any():
        raise PlannerInputError(str(path), "sizes and latency (ms) must be positive and finite")
    df = df[(df["moe_ep_size"] > 1) & (df["moe_ep_size"] <= MAX_EP)]
    df = df[df["num_experts"] % df["moe_ep_size"] == 0]
    wide = df.groupby([*KEYS, "distribution"])["latency"].min().unstack("distribution")
    if "balanced" not in wide or SKEWED not in wide:
        return pd.DataFrame()
    wide = wide.dropna(subset=["balanced", SKEWED]).reset_index()
    return pd.DataFrame(
        {
            "dtype": wide["moe_dtype"].astype(str).map(DTYPE_NAMES),
            "tokens": wide["num_tokens"].astype(float),
            "hidden": wide["hidden_size"].astype(float),
            "inter": wide["inter_size"] / wide["moe_tp_size"],
            "topk": wide["topk"].astype(int),
            "experts": wide["num_experts"].astype(int),
            "ep": wide["moe_ep_size"].astype(int),
            "balanced_s": wide["balanced"] * 1e-3,
            "skewed_s": wide[SKEWED] * 1e-3,
        }
    )


def read_pairs(root: Path, gpu: str, per_table: int, seed: int = 0) -> pd.DataFrame:
    """Up to ``per_table`` pairs (seeded sample) of each ``<root>/<gpu>/moe/<engine>/<version>/
    moe_perf.parquet``, with an ``engine`` column ``<engine>/<version>``."""
    found = sorted((root / gpu / "moe").glob("*/*/moe_perf.parquet"))
    if not found:
        raise PlannerInputError("--aic-data", f"no {gpu}/moe/<engine>/<version>/moe_perf.parquet")
    parts = []
    for path in found:
        pairs = _table_pairs(path, read_parquet(path, "--aic-data"))
        if pairs.empty:  # a table without both routings
            continue
        if len(pairs) > per_table:
            pairs = pairs.sample(per_table, random_state=seed)
        parts.append(pairs.assign(engine=f"{path.parent.parent.name}/{path.parent.name}"))
    if not parts:
        raise PlannerInputError("--aic-data", f"no {gpu} table has both routings at EP 2-{MAX_EP}")
    return pd.concat(parts, ignore_index=True)


def compare(pairs: pd.DataFrame, db: KernelDB) -> pd.DataFrame:
    """``pairs`` with the measured skewed / balanced ratio and the two priced ones: ``time_x_f``
    (the balanced time times the busiest rank's load factor f) and ``t_of_fn`` (the balanced
    layer priced at f x the tokens)."""
    f = np.array(
        [
            power_law_load(n, e, k, ep)
            for n, e, k, ep in zip(
                pairs["tokens"], pairs["experts"], pairs["topk"], pairs["ep"], strict=True
            )
        ]
    )
    t_n, t_fn = np.zeros(len(pairs)), np.zeros(len(pairs))
    h, inter, k, e, ep = (
        pairs[c].to_numpy(float) for c in ("hidden", "inter", "topk", "experts", "ep")
    )
    tokens = pairs["tokens"].to_numpy(float)
    dtypes = pairs["dtype"].to_numpy()
    for dt in sorted(set(dtypes)):
        s = dtypes == dt
        t_n[s] = db.moe(tokens[s], h[s], inter[s], k[s], e[s], ep[s], dt).seconds
        t_fn[s] = db.moe(tokens[s] * f[s], h[s], inter[s], k[s], e[s], ep[s], dt).seconds
    return pairs.assign(
        measured=pairs["skewed_s"] / pairs["balanced_s"], time_x_f=f, t_of_fn=t_fn / t_n
    )


def summary(compared: pd.DataFrame) -> pd.DataFrame:
    """Median |ln(priced / measured)| of both pricings per engine table and overall, with the
    median ratios per token range."""
    c = compared.assign(
        err_time_x_f=np.abs(np.log(compared["time_x_f"] / compared["measured"])),
        err_t_of_fn=np.abs(np.log(compared["t_of_fn"] / compared["measured"])),
        tokens_range=pd.cut(compared["tokens"], list(TOKEN_BINS), labels=list(TOKEN_LABELS)),
    )
    stats = {
        k: (k, "median") for k in ("measured", "time_x_f", "t_of_fn", "err_time_x_f", "err_t_of_fn")
    } | {"n": ("measured", "size")}
    by = c.groupby(["engine", "tokens_range"], observed=True).agg(**stats).reset_index()
    whole = c.groupby("engine").agg(**stats).reset_index().assign(tokens_range="all")
    overall = c.assign(engine="all").groupby("engine").agg(**stats).reset_index()
    return pd.concat([by, whole, overall.assign(tokens_range="all")], ignore_index=True)
