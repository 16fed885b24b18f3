"""The search space as a frozen spec, and its enumeration into flat candidate arrays.

A *worker* is one engine instance: a parallelism split (tp, pp, dp, ep), engine knobs
(max running requests, chunk size = ``max_num_batched_tokens``, KV memory fraction, KV dtype)
and a weight dtype. Aggregated plans replicate one worker; disaggregated plans pair a prefill
worker with a decode worker. :func:`enumerate_workers` lays every legal combination out as
numpy arrays (one entry per candidate) so the memory and performance models evaluate them all
at once.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from hardware.spec import HOST_GPUS_MAX
from planner.emitters.capabilities import KnownFailure
from planner.model.spec import ModelSpec
from planner.perf.batch import WEIGHT_QUANTS, KvDtype, WeightQuant
from planner.perf.deployment import Parallelism, ShapeRules, placement_problem
from planner.perf.memory_plan import check_parallelism

_FROZEN = ConfigDict(frozen=True, extra="forbid")

Mode = Literal["agg", "disagg"]
QUANTS: tuple[str, ...] = WEIGHT_QUANTS
"""Weight format names in ``planner.perf.batch.WeightQuant`` order (the codes of ``Workers.quant``,
shared with :class:`planner.perf.batch.CandidateArrays`)."""


class SearchSpace(BaseModel):
    """Which deployments the planner may consider (the defaults cover common engine settings)."""

    model_config = _FROZEN
    gpus: tuple[str, ...] = Field(min_length=1, description="GPU keys to consider.")
    max_gpus: int = Field(ge=1, description="Upper bound on GPUs of the whole deployment.")
    modes: tuple[Mode, ...] = Field(
        default=("agg", "disagg"), min_length=1, description="Deployment modes searched."
    )
    tp: tuple[int, ...] = Field(
        default=(1, 2, 4, 8, 16, 32, 64),
        description="Tensor-parallel sizes (those above the GPU's scale-up domain are skipped).",
    )
    pp: tuple[int, ...] = Field(default=(1, 2, 4), description="Pipeline-parallel sizes.")
    dp: tuple[int, ...] = Field(
        default=(1, 2, 4, 8, 16, 32, 64),
        description=(
            "Attention-DP sizes (MoE and MLA models only); the size that fills the scale-up "
            "domain (e.g. 72 / tp on NVL72) is added."
        ),
    )
    max_num_seqs: tuple[int, ...] = Field(
        default=(8, 16, 32, 64, 128, 256, 512), description="Max running requests per worker."
    )
    chunk_tokens: tuple[int, ...] = Field(
        default=(1024, 2048, 4096, 8192, 16384), description="max_num_batched_tokens choices."
    )
    mem_fractions: tuple[float, ...] = Field(
        default=(0.85, 0.9, 0.95), description="gpu_memory_utilization choices."
    )
    kv_dtypes: tuple[str, ...] = Field(
        default=("bf16", "fp8"), description="KV cache data types searched."
    )
    weight_quants: tuple[str, ...] = Field(
        default=(), description="Allowed weight dtypes; () = checkpoint only."
    )
    concurrency_per_worker: tuple[int, ...] = Field(
        default=(1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512),
        description="Closed-loop clients per worker swept when no load is given.",
    )
    node_gpus: int | None = Field(
        default=None, ge=1, description="Round GPU counts up to whole nodes of this size."
    )
    shape_rules: ShapeRules = Field(
        default_factory=ShapeRules, description="Worker shapes the target engine can launch."
    )
    known_failures: tuple[KnownFailure, ...] = Field(
        default=(),
        description="Worker shapes the target engine is reported to crash on (not searched).",
    )


@dataclass(frozen=True)
class Workers:
    """Flat arrays, one entry per worker candidate (all the same length)."""

    gpu: np.ndarray  # index into SearchSpace.gpus
    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    ep: np.ndarray
    quant: np.ndarray
    """``planner.perf.batch.WeightQuant`` values."""
    kv: np.ndarray
    """``planner.perf.batch.KvDtype`` values."""
    max_num_seqs: np.ndarray
    chunk: np.ndarray
    mem_frac: np.ndarray

    @property
    def size(self) -> int:
        return int(self.tp.size)

    @property
    def gpus_per_worker(self) -> np.ndarray:
        return self.tp * self.pp * self.dp

    def columns(self, prefix: str = "") -> dict[str, np.ndarray]:
        """:class:`planner.perf.batch.CandidateArrays` columns of these workers
        (``prefix``: ``prefill_``)."""
        cols = {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": self.ep,
            "max_num_batched_tokens": self.chunk,
        }
        out = {prefix + k: v.astype(float) for k, v in cols.items()}
        if not prefix:
            out |= {
                "max_num_seqs": self.max_num_seqs.astype(float),
                "weight_quant": self.quant.astype(float),
                "kv_dtype": self.kv.astype(float),
            }
        return out

    def take(self, idx: np.ndarray) -> Workers:
        """The candidates at ``idx`` (boolean mask or integer indices)."""
        return Workers(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


EP_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
"""Expert-parallel sizes tried (those dividing tp*dp), plus tp*dp itself (one group per rank)."""


def legal_splits(
    model: ModelSpec, space: SearchSpace, domain_size: int, node_gpus: int | None = None
) -> list[Parallelism]:
    """Parallelism splits the model accepts within max_gpus: TP inside one scale-up domain, DP/EP
    and PP across hosts of ``node_gpus`` (default: the domain up to 8) over the scale-out network
    (:func:`planner.perf.deployment.placement_problem`), launchable under the space's shape
    rules and none of its engine's known failures."""
    node = node_gpus or min(domain_size, HOST_GPUS_MAX)
    out = []
    for tp, pp in itertools.product(space.tp, space.pp):
        for dp in _dp_sizes(model, space, tp, domain_size):
            if tp * pp * dp > space.max_gpus or (tp * dp > domain_size and pp > 1):
                continue  # PP joins stages that each fit one domain
            for ep in _ep_sizes(model, tp * dp, tp * dp > node):
                p = Parallelism(tp=tp, pp=pp, dp=dp, ep=ep)
                if placement_problem(p, domain_size, node) is not None:
                    continue
                if space.shape_rules.problem(p, node) is not None:
                    continue
                if any(f.matches(p) for f in space.known_failures):
                    continue
                try:
                    check_parallelism(model, p)
                except ValueError:
                    continue
                out.append(p)
    return out


def _dp_sizes(model: ModelSpec, space: SearchSpace, tp: int, domain_size: int) -> list[int]:
    """Attention-DP sizes for ``tp``: 1 for dense GQA models (attention-DP only pays off with
    experts to share or a replicated MLA latent cache), else the space's plus the domain filler."""
    if model.moe is None and model.mla is None:
        return [1]
    fill = [domain_size // tp] if domain_size % tp == 0 and tp <= domain_size else []
    return sorted(set(space.dp) | set(fill))


def _ep_sizes(model: ModelSpec, ranks: int, wide: bool) -> list[int]:
    """Expert-parallel sizes dividing ``ranks`` (1 for dense models); ranks wider than a host
    (``wide``) spread the experts over all of them or none."""
    if model.moe is None:
        return [1]
    if wide:
        return [1, ranks]
    return sorted({e for e in EP_SIZES if ranks % e == 0} | {ranks})


def quant_choices(model: ModelSpec, space: SearchSpace) -> tuple[str, ...]:
    """Weight dtypes to try: the checkpoint's, plus those the user allows."""
    allowed = space.weight_quants or (model.weight_dtype,)
    return tuple(dict.fromkeys(q for q in allowed if q in QUANTS))


def _grid(*axes: np.ndarray) -> list[np.ndarray]:
    mesh = np.meshgrid(*axes, indexing="ij")
    return [a.ravel() for a in mesh]


def enumerate_workers(
    model: ModelSpec,
    space: SearchSpace,
    gpu_index: int,
    domain_size: int,
    max_num_seqs: tuple[int, ...] | None = None,
    kv_dtypes: tuple[str, ...] | None = None,
    node_gpus: int | None = None,
) -> Workers:
    """Every legal worker for one GPU type; chunks smaller than max_num_seqs are dropped (engines
    refuse them)."""
    splits = legal_splits(model, space, domain_size, node_gpus)
    if not splits:
        return _empty()
    par = np.array([[p.tp, p.pp, p.dp, p.ep] for p in splits])
    quants = np.array([WeightQuant.of(q) for q in quant_choices(model, space)])
    kvs = np.array([KvDtype.of(k) for k in (kv_dtypes or space.kv_dtypes)])
    seqs = np.array(max_num_seqs or space.max_num_seqs)
    chunks = np.array(space.chunk_tokens)
    fracs = np.array(space.mem_fractions)
    si, qi, ki, bi, ci, fi = _grid(np.arange(len(splits)), quants, kvs, seqs, chunks, fracs)
    keep = ci >= bi
    si, qi, ki, bi, ci, fi = (a[keep] for a in (si, qi, ki, bi, ci, fi))
    return Workers(
        gpu=np.full(si.size, gpu_index),
        tp=par[si, 0],
        pp=par[si, 1],
        dp=par[si, 2],
        ep=par[si, 3],
        quant=qi,
        kv=ki,
        max_num_seqs=bi,
        chunk=ci,
        mem_frac=fi,
    )


def _empty() -> Workers:
    z = np.zeros(0, dtype=int)
    return Workers(
        gpu=z, tp=z, pp=z, dp=z, ep=z, quant=z, kv=z, max_num_seqs=z, chunk=z, mem_frac=np.zeros(0)
    )


def concat(parts: list[Workers]) -> Workers:
    """Join worker arrays (e.g. over GPU types)."""
    if not parts:
        return _empty()
    return Workers(
        **{k: np.concatenate([getattr(p, k) for p in parts]) for k in Workers.__dataclass_fields__}
    )
