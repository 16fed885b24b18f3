"""Fitted efficiency parameters per GPU (``kernels_db/fitted/<gpu>.yaml``) and the defaults used
for GPUs without any (those predictions are flagged ``roofline_uncalibrated``).

Compute families use ``RooflineParams`` in ``kernels_db.roofline.roofline_time``; collectives use
the alpha-beta model ``latency_s + bytes·algo_factor / bus_bandwidth_bytes_per_s`` (``CommParams``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hardware.errors import PlannerInputError
from hardware.input_files import read_yaml
from kernels_db import paths

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class RooflineParams(BaseModel):
    """Named efficiency parameters of one compute op family and dtype."""

    model_config = _FROZEN
    launch_s: float = Field(ge=0, description="Fixed cost per kernel (launch + tail), seconds.")
    compute_eff: float = Field(
        gt=0, le=1.0, description="Asymptotic fraction of dense peak FLOP/s (at most 100%)."
    )
    compute_half_flops: float = Field(
        ge=0, description="FLOPs at which compute efficiency is half its maximum."
    )
    memory_eff: float = Field(
        gt=0, le=1.0, description="Asymptotic fraction of peak HBM bandwidth (at most 100%)."
    )
    memory_half_bytes: float = Field(
        ge=0, description="Bytes at which memory efficiency is half its maximum."
    )
    pad_rows: float = Field(
        default=0.0, ge=0, description="GEMM only: rows of m wasted by tile padding, on average."
    )
    parallel_half_units: float = Field(
        default=0.0,
        ge=0,
        description="Parallel work units (decode: batch x kv heads x KV splits; prefill: query "
        "tiles; GEMM: output tiles) at which the achieved FLOP/s and bandwidth are half their "
        "maximum; decode units are serial streams, so there the rate is proportional to the units "
        "up to this many and flat after. 0 = always saturated.",
    )
    cache_speedup: float = Field(
        default=1.0,
        ge=1.0,
        description="How many times faster than DRAM a working set resident in the GPU's "
        "last-level cache (``l2_cache_bytes``) is read (GEMM, attention); 1 = no cache term. "
        "Serving GEMMs have no resident share (``costs.WORKING_SET``).",
    )

    tile_s: float = Field(
        default=0.0,
        ge=0,
        description="Prefill attention: fixed cost of one thread-block tile averaged over the SMs, "
        "seconds (``kernels_db.roofline.prefill_tiles``); 0 = no tile term.",
    )
    split_kv: bool = Field(
        default=False,
        description="Decode attention: the kernel splits a long KV over several thread blocks "
        "(multi-block mode, ``kernels_db.roofline.decode_kv_splits``), each reading the query and "
        "writing a partial output, and pays one more fixed cost (``launch_s``) for merging the "
        "parts once the KV spans more than one chunk; chosen by the fit (both are tried).",
    )

    gemv_memory_eff: float | None = Field(
        default=None,
        ge=0,
        le=1.0,
        description="GEMM only: share of the spec DRAM bandwidth that the matrix-vector kernel a "
        "library runs for a single row (m = 1) reaches; its cached share is read "
        "``cache_speedup`` times faster, as the GEMM's. The library runs it where it is faster "
        "than the tiled GEMM (``kernels_db.roofline.gemv_time``). None (or 0): no such path "
        "(the fit ships none where the tiled GEMM is as fast on every measured row).",
    )
    gemv_launch_s: float | None = Field(
        default=None,
        ge=0,
        description="GEMM only: fixed cost of that matrix-vector kernel (launch, tail and, for an "
        "FP8 op, the activation quantize before it), seconds.",
    )
    cache_cliff_power: float | None = Field(
        default=None,
        ge=0,
        description="GEMM only: steepness of the loss of L2 residency of a benchmark's cyclic "
        "sweep over its working set, 1 / (1 + (working set / L2)^power); None (or 0): the "
        "shared assumption ``kernels_db.roofline.CACHE_RESIDENCY_POWER`` (the fit ships none "
        "where it prices no measured row differently).",
    )

    def as_array(self) -> np.ndarray:
        """(launch_s, compute_eff, compute_half_flops, memory_eff, memory_half_bytes,
        parallel_half_units, cache_speedup, tile_s, split_kv as 0/1, gemv_memory_eff,
        gemv_launch_s, cache_cliff_power)."""
        return np.array(
            [
                self.launch_s,
                self.compute_eff,
                self.compute_half_flops,
                self.memory_eff,
                self.memory_half_bytes,
                self.parallel_half_units,
                self.cache_speedup,
                self.tile_s,
                float(self.split_kv),
                self.gemv_memory_eff or 0.0,
                self.gemv_launch_s or 0.0,
                self.cache_cliff_power or 0.0,
            ]
        )


class CommLine(BaseModel):
    """One alpha-beta line: ``latency_s + bytes * algo_factor / bus_bandwidth_bytes_per_s``."""

    model_config = _FROZEN
    latency_s: float = Field(ge=0, description="Start-up latency (alpha), seconds.")
    bus_bandwidth_bytes_per_s: float = Field(
        gt=0, description="Achieved bus bandwidth (nccl-tests busbw), bytes/s."
    )


MAX_SMALL_LINES: Final[int] = 2
"""Latency-optimised lines a collective may have besides its bandwidth-optimised one: NCCL has three
protocols (LL, LL128, Simple; NCCL docs, NCCL_PROTO) and TensorRT-LLM's all-reduce three
implementations (one-shot, two-shot, NCCL), so at most three lines in all."""


class CommParams(BaseModel):
    """Alpha-beta parameters of one collective at one GPU count: the bandwidth-optimised line
    (``latency_s``, ``bus_bandwidth_bytes_per_s``: NCCL's Simple protocol, the one large messages
    run) and up to ``MAX_SMALL_LINES`` latency-optimised lines with lower latency and bandwidth
    (NCCL LL/LL128, one-shot kernels). A library runs the fastest protocol for each message size, so
    the time is the minimum over the lines (``kernels_db.comm.alpha_beta``)."""

    model_config = _FROZEN
    latency_s: float = Field(
        ge=0, description="Start-up latency (alpha) of the bandwidth-optimised line, seconds."
    )
    bus_bandwidth_bytes_per_s: float = Field(
        gt=0,
        description="Achieved bus bandwidth (nccl-tests busbw) of the bandwidth-optimised line, "
        "bytes/s.",
    )
    small_lines: tuple[CommLine, ...] = Field(
        default=(),
        max_length=MAX_SMALL_LINES,
        description="Latency-optimised lines for small messages (fewest first: lowest latency); "
        "empty = one line for every size.",
    )

    def extra_lines(self) -> list[tuple[float, float]]:
        """(latency_s, bus bandwidth) of ``MAX_SMALL_LINES`` small-message lines, padded with the
        main line (which leaves the minimum unchanged)."""
        out = [(ln.latency_s, ln.bus_bandwidth_bytes_per_s) for ln in self.small_lines]
        pad = (self.latency_s, self.bus_bandwidth_bytes_per_s)
        return out + [pad] * (MAX_SMALL_LINES - len(out))


class FitError(BaseModel):
    """Error of the fitted model on the rows it was fitted to (absolute percentage error)."""

    model_config = _FROZEN
    n: int = Field(ge=0, description="Rows compared.")
    median_ape_pct: float = Field(ge=0, description="Median absolute percentage error, percent.")
    p90_ape_pct: float = Field(
        ge=0, description="90th percentile absolute percentage error, percent."
    )


class FittedTo(BaseModel):
    """What a family's parameters were fitted to."""

    model_config = _FROZEN
    files: tuple[str, ...] = Field(description="Table files (names) the rows came from.")
    rows: int = Field(ge=0, description="Rows used.")
    sources: tuple[str, ...] = Field(default=(), description="Upstream sources of those rows.")


class RooflineFamilyFit(BaseModel):
    """One compute family: parameters per dtype (or kv dtype for decode attention)."""

    model_config = _FROZEN
    params: dict[str, RooflineParams] = Field(
        description="Fitted roofline parameters per dtype (or dtype variant) of the family."
    )
    fitted_to: FittedTo = Field(description="The measured rows the parameters were fitted to.")
    fit_error: FitError = Field(description="In-sample error of the fit on those rows.")


class CommFamilyFit(BaseModel):
    """Collectives: parameters per collective name, then per GPU count."""

    model_config = _FROZEN
    params: dict[str, dict[int, CommParams]] = Field(
        description="Fitted alpha-beta parameters per collective and GPU count."
    )
    fitted_to: FittedTo = Field(description="The measured rows the parameters were fitted to.")
    fit_error: FitError = Field(description="In-sample error of the fit on those rows.")


class FittedGpu(BaseModel):
    """All fitted parameters of one GPU."""

    model_config = _FROZEN
    gpu: str = Field(description="GPU key, e.g. 'h200_sxm'.")
    date: str = Field(description="Date of the fit, ISO format.")
    command: str = Field(description="Command that reproduces the fit.")
    spec_used: dict[str, float] = Field(
        description="Peak FLOP/s and bandwidths the efficiencies are relative to."
    )
    families: dict[str, RooflineFamilyFit] = Field(
        default_factory=dict, description="Compute op families."
    )
    comm: CommFamilyFit | None = Field(
        default=None, description="Collectives (latency + bytes / bus bandwidth lines)."
    )
    param_bounds: dict[str, tuple[float, float, str]] = Field(
        default_factory=dict,
        description="(lowest, highest, unit) of every fitted parameter, as the fit applied them "
        "(``kernels_db.fit.PARAM_BOUNDS``, ``COMM_BOUNDS``).",
    )
    notes: str = Field(default="", description="Free text: what the fit was run on.")


# Defaults for uncalibrated GPUs: rounded medians of the fits shipped in kernels_db/fitted (H100,
# H200, B200, A100; L40S left out as an outlier; decode: the GQA bf16 fits). ASSUMPTION for any GPU
# without its own fit.
DEFAULT_PARAMS: Final[dict[str, RooflineParams]] = {
    "gemm": RooflineParams(
        launch_s=4e-6,
        compute_eff=0.75,
        compute_half_flops=5e8,
        memory_eff=0.8,
        memory_half_bytes=2e6,
        pad_rows=16.0,
    ),
    "attention_prefill": RooflineParams(
        launch_s=1e-5,
        compute_eff=0.5,
        compute_half_flops=2e9,
        memory_eff=0.6,
        memory_half_bytes=4e6,
    ),
    "attention_decode": RooflineParams(
        launch_s=8e-6,
        compute_eff=0.19,
        compute_half_flops=1e8,
        memory_eff=0.85,
        memory_half_bytes=1.2e7,
        pad_rows=260.0,
        parallel_half_units=0.7,
    ),
    "memcpy": RooflineParams(
        launch_s=3e-6,
        compute_eff=1.0,
        compute_half_flops=0.0,
        memory_eff=0.8,
        memory_half_bytes=1e6,
    ),
}
DEFAULT_PARAMS["mla_prefill"] = DEFAULT_PARAMS["attention_prefill"]
# no fit: MLA decode computes on tensor cores as prefill attention does (``COMPUTE_LENDER``)
DEFAULT_PARAMS["mla_decode"] = DEFAULT_PARAMS["attention_decode"].model_copy(
    update={
        "compute_eff": DEFAULT_PARAMS["attention_prefill"].compute_eff,
        "compute_half_flops": DEFAULT_PARAMS["attention_prefill"].compute_half_flops,
    }
)
GROUPED_GEMM_COMPUTE_FRACTION: Final[float] = 0.3
"""ASSUMPTION (fitted end to end, no grouped-GEMM kernel table): a fused-MoE grouped expert GEMM
reaches this fraction of the compute efficiency of a dense GEMM of the same FLOPs (few rows per
expert, per-expert tile padding, token permutation in and out, block-scale activation quantization).
Memory-bound (decode) expert GEMMs keep the dense bandwidth. How it was chosen: the share of a
closed-loop benchmark's requests in its first lockstep wave is a property of the benchmark harness,
not of the model, so refitting that one share per measurement campaign
(``python -m lab.protocol``) should give MoE and dense campaigns the same shares. At
0.5 the MoE campaigns of ``silicon_measured.csv`` needed a row-weighted mean share of 0.32 against
0.19 for the dense ones (their prefill priced too fast, the queueing made up for it); at 0.4 / 0.3 /
0.25 / 0.2: 0.28 / 0.24 / 0.20 / 0.18 against 0.19. End to end, with the engine constants refit for
each value, aggregated TTFT median APE 27.8 (0.5) / 27.3 (0.4) / 25.2 (0.3) / 24.8-25.3 (0.25) %,
disaggregated 29.3 / 34 / 29.5 / 30.3 %; 0.3 is the value between share consistency and the
disaggregated rows (mostly Blackwell DeepSeek deployments). History: 1 -> 0.5 (2026-11-29, MoE TTFT
14% low) -> 0.3."""


def _grouped(prm: RooflineParams) -> RooflineParams:
    """A dense GEMM's parameters as a grouped expert GEMM's (``GROUPED_GEMM_COMPUTE_FRACTION``)."""
    return prm.model_copy(update={"compute_eff": prm.compute_eff * GROUPED_GEMM_COMPUTE_FRACTION})


DEFAULT_PARAMS["moe"] = _grouped(DEFAULT_PARAMS["gemm"])
# Families without their own fit borrow the fit of a measured one.
BORROW: Final[dict[str, str]] = {
    "mla_prefill": "attention_prefill",
    "mla_decode": "attention_decode",
    "moe": "gemm",
}


COMPUTE_LENDER: Final[dict[str, tuple[str, str]]] = {"mla_decode": ("attention_prefill", "bf16")}
"""Family and parameter set whose compute efficiency a borrowing family takes instead of its
lender's. MLA decode is compute-bound from about 128 query rows per latent KV (FlashMLA's analysis,
deepseek-ai/FlashMLA docs/20250422-new-kernel-deep-dive.md: up to 660 of 990 TFLOP/s on H800):
its compute runs as a tensor-core flash attention, which the prefill fit measures (H200 bf16: 56%
of peak), in 16-bit whatever the KV dtype; the grouped-query decode tables are memory-bound and do
not identify a compute efficiency (refits moved it from 16% to 8% on H200 with no change in fit
quality). Its bytes and fixed cost stay those of decode attention."""


def borrowed(
    op: str, params: dict[str, RooflineParams], compute: RooflineParams | None = None
) -> dict[str, RooflineParams]:
    """The parameters family ``op`` takes from the fit of ``BORROW[op]``: as fitted, except grouped
    expert GEMMs (``moe``) at ``GROUPED_GEMM_COMPUTE_FRACTION`` of the dense compute efficiency, and
    the compute efficiency of ``compute`` (``COMPUTE_LENDER``) where given."""
    if op == "moe":
        return {name: _grouped(prm) for name, prm in params.items()}
    if compute is None:
        return params
    update = {
        "compute_eff": compute.compute_eff,
        "compute_half_flops": compute.compute_half_flops,
    }
    return {name: prm.model_copy(update=update) for name, prm in params.items()}


# ASSUMPTION: NCCL small-message latency inside one node, ~10 us (order of the fitted alphas), and
# 80% of the link bandwidth as bus bandwidth.
DEFAULT_COMM_LATENCY_S: Final[float] = 1e-5
DEFAULT_COMM_BW_EFF: Final[float] = 0.8


def save(fit: FittedGpu, fitted_dir: Path = paths.FITTED_DIR) -> Path:
    """Write ``<fitted_dir>/<gpu>.yaml``."""
    path = paths.fitted_path(fit.gpu, fitted_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(fit.model_dump(mode="json", exclude_none=True), sort_keys=False))
    return path


@lru_cache(maxsize=32)
def load(gpu_key: str, fitted_dir: Path = paths.FITTED_DIR) -> FittedGpu | None:
    """Fitted parameters of ``gpu_key``, or None when there is no file."""
    path = paths.fitted_path(gpu_key, fitted_dir)
    if not path.is_file():
        return None
    try:
        return FittedGpu.model_validate(read_yaml(path, "GPU YAML", "fitted"))
    except (yaml.YAMLError, ValidationError) as exc:
        raise PlannerInputError("fitted", f"{path}: {exc}".splitlines()[0]) from exc
