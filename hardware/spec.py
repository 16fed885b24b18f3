"""Typed GPU and interconnect specification (one YAML per GPU under ``hardware/specs``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4"]
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "int4")

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ScaleUpLink(BaseModel):
    """GPU-to-GPU fabric inside one scale-up domain (NVLink, Infinity Fabric, PCIe)."""

    model_config = _FROZEN
    name: str = Field(description="Link technology, e.g. 'NVLink4'.")
    bandwidth_bytes_per_s: float = Field(
        gt=0, description="Per-GPU bandwidth in one direction, bytes/s (half the 'bidirectional' figure)."
    )
    domain_size: int = Field(ge=1, description="GPUs reachable over this link (8 for HGX, 72 for NVL72).")
    latency_s: float = Field(default=2e-6, ge=0, description="Per-message start-up latency, seconds.")
    nvls: bool = Field(default=False, description="NVLink SHARP (in-switch reductions) available.")


class GpuSpec(BaseModel):
    """One accelerator. Every numeric field must have an entry in ``sources``."""

    model_config = _FROZEN
    name: str = Field(description="Canonical name, e.g. 'H200-SXM'.")
    key: str = Field(pattern=r"^[a-z0-9_]+$", description="Lower-case id used on the CLI, e.g. 'h200_sxm'.")
    aliases: tuple[str, ...] = Field(default=(), description="Other accepted names (case-insensitive).")
    vendor: Literal["nvidia", "amd", "intel", "google", "other"]
    architecture: str = Field(description="Chip generation, e.g. 'hopper'.")
    memory_bytes: float = Field(gt=0, description="Device memory, bytes.")
    hbm_bandwidth_bytes_per_s: float = Field(gt=0, description="Peak device-memory bandwidth, bytes/s.")
    peak_flops_per_s: dict[Dtype, float] = Field(
        description="Dense (non-sparse) tensor-core peak per dtype, FLOP/s (OP/s for int types)."
    )
    sm_count: int = Field(ge=1, description="Streaming multiprocessors / compute units.")
    power_watts: float = Field(gt=0, description="Board power (TDP), watts.")
    price_per_gpu_hour_usd: float = Field(
        gt=0,
        description="ASSUMPTION, editable: default on-demand cloud price per GPU-hour in USD; "
        "override with --price-per-gpu-hour.",
    )
    scale_up: ScaleUpLink
    scale_out_bandwidth_bytes_per_s: float = Field(
        gt=0, description="Scale-out NIC bandwidth per GPU, one direction, bytes/s."
    )
    pcie_bandwidth_bytes_per_s: float = Field(gt=0, description="Host PCIe bandwidth per direction, bytes/s.")
    sources: dict[str, str] = Field(description="Field name -> where its number comes from.")
    notes: str = Field(default="", description="Free text.")

    @model_validator(mode="after")
    def _every_number_has_a_source(self) -> GpuSpec:
        needed = [
            "memory_bytes",
            "hbm_bandwidth_bytes_per_s",
            "peak_flops_per_s",
            "sm_count",
            "power_watts",
            "price_per_gpu_hour_usd",
            "scale_up",
            "scale_out_bandwidth_bytes_per_s",
            "pcie_bandwidth_bytes_per_s",
        ]
        missing = [f for f in needed if not self.sources.get(f, "").strip()]
        if missing:
            raise ValueError(f"sources missing for {', '.join(missing)}")
        if "bf16" not in self.peak_flops_per_s and "fp16" not in self.peak_flops_per_s:
            raise ValueError("peak_flops_per_s needs at least bf16 or fp16")
        return self

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; falls back to the next wider dtype the chip has.

        A GPU without native fp8/fp4 runs those weights through bf16 math (weight-only quantization).
        """
        order = {
            "fp4": ("fp4", "fp8", "bf16", "fp16"),
            "int4": ("int4", "int8", "fp8", "bf16", "fp16"),
            "fp8": ("fp8", "bf16", "fp16"),
            "int8": ("int8", "bf16", "fp16"),
            "bf16": ("bf16", "fp16"),
            "fp16": ("fp16", "bf16"),
            "tf32": ("tf32", "fp32"),
            "fp32": ("fp32",),
        }
        for d in order.get(dtype, (dtype,)):
            if d in self.peak_flops_per_s:
                return float(self.peak_flops_per_s[d])  # type: ignore[index]
        raise KeyError(dtype)

    def supports(self, dtype: str) -> bool:
        """True when the tensor cores run ``dtype`` natively."""
        return dtype in self.peak_flops_per_s
