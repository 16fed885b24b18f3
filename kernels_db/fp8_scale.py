"""The dynamic per-tensor activation scale of an FP8 GEMM: a pass over its input before it runs.

An FP8 GEMM whose activation scale is computed at run time for the whole tensor first reduces the
absolute maximum of its 16-bit input (one read of m x k elements and a reduction across the GPU),
then quantizes with that scale and runs the GEMM. Quantizing with a known scale (static, or per
token / per 128-value group, each scale computed inside the same pass) is one single pass that
every FP8 GEMM pays; the whole-tensor maximum is the extra step, priced here.

Who pays it:

- **The measured tables.** AIConfigurator's TensorRT-LLM GEMM collector (``collect_gemm.py`` @
  dec5f4cd, the one that made the 1.3.0rc20 tables) builds its fp8 weights without an input scale,
  "so TRT-LLM's FP8QDQ method runs its dynamic-quantization path and the collected fp8 GEMM
  includes the compute-scale overhead" (its comment); ``FP8QDQLinearMethod.apply``
  (``tensorrt_llm/_torch/modules/linear.py``) calls ``quantize_e4m3_per_tensor`` there and
  ``static_quantize_e4m3_per_tensor`` when the checkpoint has an input scale. Those rows are priced
  with the pass (``kernels_db.harness``), so the fitted GEMM is the GEMM a serving engine runs.
- **Serving**, where the weights were quantized on load from a 16-bit checkpoint (``--quantization
  fp8`` of the engines: dynamic per-tensor activation scales, vLLM PR #4118) or the checkpoint
  asks for dynamic per-tensor scales (``planner.model.quantization``: ``activation_scale``
  "tensor").
  Static checkpoints (ModelOpt FP8, ``activation_scheme: static``) and per-token or block-scaled
  ones (DeepSeek-style 128-value groups, ``FP8_DYNAMIC``) do not.

Time of one pass: ``fixed_s + bytes x ((1 - r) + r / cache_speedup) / (memory_eff x HBM)``, bytes =
2 m k (the 16-bit input read once), r = its L2-resident share (``roofline.resident_share``). The
three constants per GPU (``PARAM_BOUNDS``) are fitted to AIConfigurator's own measurement of this
step, ``compute_scale`` = dynamic minus static quantization time
(``collector/trtllm/collect_computescale.py``, tables
``aic-core/src/aiconfigurator_core/systems/data/<gpu>/quantize/trtllm/1.3.0rc20/
computescale_perf.parquet`` @ 095f58a5, 1,628 (m, k) points per GPU) by
``python -m kernels_db.tools.fp8_scale_fit --aic-data DIR --out kernels_db/fp8_scale.yaml``;
AIConfigurator prices its static FP8 GEMM the same way (collected fp8 GEMM minus this step). A
GPU without its own constants takes those of the closest measured GPU of the same vendor and
architecture (``kernels_db.transfer.distance``), else the median of the measured ones (``DEFAULT``).

Regeneration order: the pass constants first (this command), then the kernel fit (``planner
calibrate fit``, whose fp8 rows are priced with the pass), then ``block_compute_share`` again
(this command: it is fitted against the committed per-tensor FP8 GEMM fit), so a refit of either
is followed by both.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hardware.catalog import all_gpus
from hardware.errors import PlannerInputError
from hardware.input_files import key_line, read_text, read_yaml
from hardware.spec import GpuSpec
from kernels_db import roofline as rf
from kernels_db.paths import PACKAGE_DIR
from kernels_db.transfer import distance

TENSOR_SCALE: Final[str] = "tensor_scale"
"""Optional GEMM column (not a table key): how many dynamic per-tensor activation-scale passes over
the m x k input the op runs before its GEMMs (0 = none; a merged op of several GEMMs counts one per
input). Set by the harness reading of fp8 table rows and by serving ops of online-quantized FP8."""
BLOCK_SCALE: Final[str] = "block_scale"
"""Optional GEMM column (not a table key): 1 where the GEMM applies 128 x 128 block scales while
it accumulates (DeepSeek-style FP8), which runs it at ``block_compute_share`` of the per-tensor
FP8 GEMM's compute rate."""
CONSTANTS_FILE: Final[Path] = PACKAGE_DIR / "fp8_scale.yaml"
PARAM_BOUNDS: Final[dict[str, tuple[float, float, str]]] = {
    "fixed_s": (1e-7, 2e-4, "s; the reduction's launches and its grid-wide sync, 0.1 us to 200 us"),
    "memory_eff": (
        0.01,
        1.0,
        "share of the spec DRAM bandwidth the reduction reads at, 1% to 100%",
    ),
    "cache_speedup": (1.0, 10.0, "x DRAM; how much faster an L2-resident input is read"),
}
BLOCK_BOUNDS: Final[tuple[float, float, str]] = (
    0.05,
    1.0,
    "share of the per-tensor FP8 GEMM's compute rate a block-scaled FP8 GEMM reaches (the scale "
    "multiply of every 128-deep partial sum on the CUDA cores, DeepSeek-V3 report sec. 3.3.2)",
)


class ScalePass(BaseModel):
    """Constants of one GPU's dynamic per-tensor scale pass (``PARAM_BOUNDS``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    fixed_s: float = Field(
        ge=PARAM_BOUNDS["fixed_s"][0],
        le=PARAM_BOUNDS["fixed_s"][1],
        description="Seconds of the reduction's launches and grid-wide sync (``PARAM_BOUNDS``).",
    )
    memory_eff: float = Field(
        ge=PARAM_BOUNDS["memory_eff"][0],
        le=PARAM_BOUNDS["memory_eff"][1],
        description="Share of the spec DRAM bandwidth the reduction reads its input at.",
    )
    cache_speedup: float = Field(
        ge=PARAM_BOUNDS["cache_speedup"][0],
        le=PARAM_BOUNDS["cache_speedup"][1],
        description="How many times faster an L2-resident input is read than from DRAM.",
    )
    rows: int = Field(default=0, ge=0, description="Measured (m, k) points it was fitted to.")
    source: str = Field(default="", description="The table it was fitted to.")
    block_compute_share: float = Field(
        default=1.0,
        ge=BLOCK_BOUNDS[0],
        le=BLOCK_BOUNDS[1],
        description="Compute rate of block-scaled FP8 GEMMs over the per-tensor FP8 GEMM's "
        "(``BLOCK_BOUNDS``); 1 = the same.",
    )
    block_rows: int = Field(default=0, ge=0, description="fp8_block GEMM rows it was fitted to.")


def seconds(
    m: np.ndarray | float, k: np.ndarray | float, spec: GpuSpec, sp: ScalePass
) -> np.ndarray:
    """Seconds of one pass over an (m x k) 16-bit input on ``spec`` (module docstring)."""
    nbytes = 2.0 * np.asarray(m, dtype=float) * np.asarray(k, dtype=float)
    resident = rf.resident_share(nbytes / float(spec.l2_cache_bytes or math.inf))
    read = nbytes * ((1.0 - resident) + resident / sp.cache_speedup)
    return np.asarray(sp.fixed_s + read / (sp.memory_eff * spec.hbm_bandwidth_bytes_per_s))


@lru_cache(maxsize=1)
def measured() -> dict[str, ScalePass]:
    """The packaged constants by GPU key (``CONSTANTS_FILE``)."""
    raw = read_yaml(CONSTANTS_FILE, "calibration YAML", "kernels_db")
    gpus = raw.get("gpus") if isinstance(raw, dict) else None
    if not isinstance(gpus, dict):
        raise PlannerInputError(f"{CONSTANTS_FILE}: gpus", "must map GPU keys to constants")
    out: dict[str, ScalePass] = {}
    for key, v in gpus.items():
        try:
            out[str(key)] = ScalePass.model_validate(v)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "constants"
            text = read_text(CONSTANTS_FILE, "calibration YAML", "kernels_db")
            line = key_line(text, str(key))  # the GPU's block, then its field inside it
            if err["loc"]:
                rest = "\n".join(text.splitlines()[line - 1 :])
                line += key_line(rest, str(err["loc"][0])) - 1
            raise PlannerInputError(
                f"{CONSTANTS_FILE}:{line}: gpus.{key}.{field}",
                err["msg"].removeprefix("Value error, "),
            ) from None
    return out


def default() -> ScalePass:
    """The median of the measured GPUs' constants (``DEFAULT`` in the module docstring)."""
    vals = list(measured().values())
    med = {
        f: float(np.median([getattr(v, f) for v in vals]))
        for f in (*PARAM_BOUNDS, "block_compute_share")
    }
    return ScalePass(**med, source="median of the measured GPUs (ASSUMPTION: no sibling measured)")


@lru_cache(maxsize=64)
def for_gpu(key: str) -> ScalePass:
    """The constants ``key`` prices with: its own, the closest measured sibling's, or
    ``default``."""
    own = measured()
    if key in own:
        return own[key]
    specs = all_gpus()
    spec = specs.get(key)
    siblings = [
        specs[g]
        for g in own
        if spec is not None
        and g in specs
        and specs[g].vendor == spec.vendor
        and specs[g].architecture == spec.architecture
    ]
    if spec is None or not siblings:
        return default()
    donor = min(siblings, key=lambda g: (distance(spec, g), g.key))
    return own[donor.key]
