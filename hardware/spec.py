"""Typed GPU and interconnect specification (one YAML per GPU under ``hardware/specs``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from hardware.frozen import FrozenSpec

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4"]
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")

_FROZEN = ConfigDict(frozen=True, extra="forbid")
PositiveFlops = Annotated[float, Field(gt=0)]


class ScaleUpLink(BaseModel):
    """GPU-to-GPU fabric inside one scale-up domain (NVLink, Infinity Fabric, PCIe)."""

    model_config = _FROZEN
    name: str = Field(description="Link technology, e.g. 'NVLink4'.")
    bandwidth_bytes_per_s: float = Field(
        gt=0,
        description="Per-GPU bandwidth in one direction, bytes/s (half the 'bidirectional' "
        "figure).",
    )
    domain_size: int = Field(
        ge=1, description="GPUs reachable over this link (8 for HGX, 72 for NVL72)."
    )
    latency_s: float = Field(
        default=2e-6, ge=0, description="Per-message start-up latency, seconds."
    )
    nvls: bool = Field(default=False, description="NVLink SHARP (in-switch reductions) available.")
    host_gpus: int | None = Field(
        default=None,
        ge=1,
        description="GPUs of one host inside the domain (one OS instance: one launch line of a "
        "multi-node worker); None = the domain up to 8 (an HGX baseboard). NVL72: 4 per tray.",
    )


_NEEDS_SOURCE: tuple[str, ...] = (
    "memory_bytes",
    "hbm_bandwidth_bytes_per_s",
    "peak_flops_per_s",
    "sm_count",
    "power_watts",
    "price_per_gpu_hour_usd",
    "scale_up",
    "scale_out_bandwidth_bytes_per_s",
    "pcie_bandwidth_bytes_per_s",
)
_SOURCE_IF_SET: tuple[str, ...] = (
    "host_kv_bandwidth_bytes_per_s",
    "ssd_kv_bandwidth_bytes_per_s",
    "l2_cache_bytes",
    "matmul_ceiling_flops_per_s",
    "idle_power_w",
    "power_cap_w",
)
HOST_GPUS_MAX = 8
"""GPUs of one host when the spec gives no ``scale_up.host_gpus``: an HGX/DGX baseboard holds 8."""


def _names_a_field(source_key: str, flops: dict[str, float] | None) -> bool:
    """'memory_bytes', 'peak_flops_per_s.fp8' (a listed dtype) or 'scale_up.domain_size'."""
    top, _, sub = source_key.partition(".")
    if top not in GpuSpec.model_fields:
        return False
    if not sub:
        return True
    if top == "peak_flops_per_s":
        return flops is None or sub in flops
    return top == "scale_up" and sub in ScaleUpLink.model_fields


class GpuSpec(FrozenSpec):
    """One accelerator. Every numeric field must have an entry in ``sources``."""

    model_config = _FROZEN
    name: str = Field(description="Canonical name, e.g. 'H200-SXM'.")
    key: str = Field(
        pattern=r"^[a-z0-9_]+$", description="Lower-case id used on the CLI, e.g. 'h200_sxm'."
    )
    aliases: tuple[str, ...] = Field(
        default=(), description="Other accepted names (case-insensitive)."
    )
    vendor: Literal["nvidia", "amd", "intel", "google", "other"] = Field(description="Chip vendor.")
    architecture: str = Field(description="Chip generation, e.g. 'hopper'.")
    memory_bytes: float = Field(gt=0, description="Device memory, bytes.")
    hbm_bandwidth_bytes_per_s: float = Field(
        gt=0, description="Peak device-memory bandwidth, bytes/s."
    )
    peak_flops_per_s: dict[Dtype, PositiveFlops] = Field(
        description="Dense (non-sparse) tensor-core peak per dtype, FLOP/s (OP/s for int types)."
    )
    sm_count: int = Field(ge=1, description="Streaming multiprocessors / compute units.")
    power_watts: float = Field(gt=0, description="Board power (TDP), watts.")
    idle_power_w: float | None = Field(
        default=None,
        gt=0,
        description="Board power idle (clocks parked, nothing running), watts; None = the "
        "transferred idle fraction of the TDP (planner/calibration/power.yaml).",
    )
    power_cap_w: float | None = Field(
        default=None,
        gt=0,
        description="Board power limit below the TDP the product ships with, watts; None = the "
        "TDP. `--power-cap GPU=W` sets one per request.",
    )
    price_per_gpu_hour_usd: float = Field(
        gt=0,
        description="ASSUMPTION, editable: default on-demand cloud price per GPU-hour in USD; "
        "override with --price-per-gpu-hour.",
    )
    purchase_unit_gpus: int = Field(
        default=1,
        ge=1,
        description="GPUs bought or rented together: the smallest unit a deployment pays for "
        "(4: one compute tray of an NVL72 rack; 1: rented singly); `--node-gpus` overrides it. "
        "Needs a source when not 1.",
    )
    scale_up: ScaleUpLink = Field(description="The GPU-to-GPU link inside one node or rack domain.")
    scale_out_bandwidth_bytes_per_s: float = Field(
        gt=0, description="Scale-out NIC bandwidth per GPU, one direction, bytes/s."
    )
    pcie_bandwidth_bytes_per_s: float = Field(
        gt=0, description="Host PCIe bandwidth per direction, bytes/s."
    )
    host_kv_bandwidth_bytes_per_s: float | None = Field(
        default=None,
        gt=0,
        description="Host memory to one GPU when loading offloaded KV blocks, one direction, "
        "bytes/s; None = the host link (pcie_bandwidth_bytes_per_s).",
    )
    ssd_kv_bandwidth_bytes_per_s: float | None = Field(
        default=None,
        gt=0,
        description="Local SSD read bandwidth available to one GPU for KV blocks, bytes/s; None = "
        "no stated SSD tier (`--ssd-gbps` gives one).",
    )
    l2_cache_bytes: float | None = Field(
        default=None,
        gt=0,
        description="Last-level on-chip cache a kernel's working set can stay resident in, "
        "bytes (NVIDIA L2; AMD Infinity Cache; a CPU's L3). None = unknown: no cache term in the "
        "kernel model.",
    )
    matmul_ceiling_flops_per_s: dict[Dtype, PositiveFlops] | None = Field(
        default=None,
        description="Measured maximum achievable matmul FLOP/s per dtype (best shape of a "
        "brute-force search, e.g. MAMF); None = not measured. Scales the default GEMM efficiency "
        "of a GPU without kernel fits (kernels_db.transfer).",
    )
    sources: dict[str, str] = Field(
        description="Field name -> where its number comes from; 'field.sub' (e.g. "
        "'peak_flops_per_s.fp4', 'scale_up.domain_size') cites one entry when it has a different "
        "source."
    )
    notes: str = Field(default="", description="Free text.")

    @field_validator("peak_flops_per_s")
    @classmethod
    def _has_a_half_precision_peak(cls, flops: dict[str, float]) -> dict[str, float]:
        if "bf16" not in flops and "fp16" not in flops:
            raise ValueError("needs at least a bf16 or fp16 peak")
        return flops

    @field_validator("sources")
    @classmethod
    def _every_number_has_a_source(
        cls, sources: dict[str, str], info: ValidationInfo
    ) -> dict[str, str]:
        """Every numeric field is cited; every citation is non-empty and names a real field."""
        missing = [f for f in _NEEDS_SOURCE if f not in sources]
        missing += [f for f in _SOURCE_IF_SET if info.data.get(f) is not None and f not in sources]
        if info.data.get("purchase_unit_gpus", 1) != 1 and "purchase_unit_gpus" not in sources:
            missing.append("purchase_unit_gpus")
        if missing:
            raise ValueError(f"missing for {', '.join(missing)}")
        empty = [k for k, v in sources.items() if not v.strip()]
        if empty:
            raise ValueError(f"empty for {', '.join(empty)}")
        flops = info.data.get("peak_flops_per_s")  # absent when that field itself failed
        unknown = [k for k in sources if not _names_a_field(k, flops)]
        if unknown:
            raise ValueError(f"name unknown fields: {', '.join(unknown)}")
        return sources

    @property
    def node_gpus(self) -> int:
        """GPUs of one host: ``scale_up.host_gpus``, else the scale-up domain up to 8."""
        return self.scale_up.host_gpus or min(self.scale_up.domain_size, HOST_GPUS_MAX)

    def math_dtype(self, dtype: str) -> str:
        """The tensor-core dtype that runs GEMMs with ``dtype`` weights: ``dtype`` itself where the
        chip has it, else the next wider one.

        4-bit weights without native 4-bit math run as weight-only quantization: the kernels
        (Marlin, Machete, Triton MXFP4 ``matmul_ogs``, TRT-LLM W4A16) dequantize them into 16-bit
        math, so fp4 and int4 fall back to bf16, not to fp8/int8 (W4A8 variants exist but are
        opt-in). fp8 without fp8 tensor cores (A100) is likewise weight-only in bf16.
        """
        order = {
            "fp4": ("fp4", "bf16", "fp16"),
            "int4": ("int4", "bf16", "fp16"),
            "fp8": ("fp8", "bf16", "fp16"),
            # FP6 runs on the FP8 tensor-core path (NVIDIA HGX B200 datasheet: "FP8/FP6 Tensor
            # Core" one figure); without FP8, at 16-bit like the others
            "fp6": ("fp6", "fp8", "bf16", "fp16"),
            "int8": ("int8", "bf16", "fp16"),
            "bf16": ("bf16", "fp16"),
            "fp16": ("fp16", "bf16"),
            "tf32": ("tf32", "fp32"),
            "fp32": ("fp32",),
        }
        for d in order.get(dtype, (dtype,)):
            if d in self.peak_flops_per_s:
                return d
        raise KeyError(dtype)

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s of GEMMs with ``dtype`` weights (at ``math_dtype``)."""
        return float(self.peak_flops_per_s[self.math_dtype(dtype)])  # type: ignore[index]

    def supports(self, dtype: str) -> bool:
        """True when the tensor cores run ``dtype`` natively."""
        return dtype in self.peak_flops_per_s
