"""The ``nvidia.com/gpu.product`` node label of each NVIDIA GPU, for Kubernetes node selection.

NVIDIA's GPU feature discovery labels a node with the name NVML reports for its GPU, cleaned by
``sanitise`` in github:NVIDIA/k8s-device-plugin internal/lm/resource.go @ v0.20.0
(1b826acc6af3079d8923bac395c3124b8861a9a6): characters other than ``A-Za-z0-9-_.`` and space
dropped, runs of spaces joined by one ``-`` ("NVIDIA H100 80GB HBM3" -> ``NVIDIA-H100-80GB-HBM3``).
A GPU whose driver reports more than one name (by board or driver release) lists each.
"""

from __future__ import annotations

import re

from planner.errors import PlannerInputError

LLM_C = "github:karpathy/llm.c llmc/mfu.h @0e69e3ae466694915e9f7e5742b3c55edacc20fd (gpu_db names)"
DYNAMO_GFD = (
    "github:ai-dynamo/dynamo deploy/operator/internal/controller/enrich_hardware_test.go "
    "@df888f6860e247b5a16039d659db61cd64a9d2d7 (GFD labels NVIDIA-B200, NVIDIA-H200-SXM5-141GB)"
)
PUBLIC = "public Kubernetes manifests selecting nvidia.com/gpu.product on this GPU (GitHub search)"

# hardware spec key -> (names as NVML reports them, where each name was read); a GPU missing here
# is refused rather than given a guessed label (its pods would never be scheduled)
NVML_NAMES: dict[str, tuple[tuple[str, ...], str]] = {
    "a100_sxm": (("NVIDIA A100-SXM4-80GB",), LLM_C),
    "a100_pcie": (("NVIDIA A100-PCIE-80GB",), LLM_C),
    "h100_sxm": (("NVIDIA H100 80GB HBM3",), LLM_C),
    "h100_pcie": (("NVIDIA H100 PCIe",), LLM_C),
    "rtx_4090": (("NVIDIA GeForce RTX 4090",), LLM_C),
    "h200_sxm": (("NVIDIA H200", "NVIDIA H200 SXM5 141GB"), f"{PUBLIC}; {DYNAMO_GFD}"),
    "b200_sxm": (("NVIDIA B200",), DYNAMO_GFD),
    "gb200": (("NVIDIA GB200",), PUBLIC),
    "l4": (("NVIDIA L4",), PUBLIC),
    "l40s": (("NVIDIA L40S",), PUBLIC),
}

LABEL_KEY = "nvidia.com/gpu.product"


def gfd_label(nvml_name: str) -> str:
    """The label value GPU feature discovery derives from an NVML device name."""
    kept = re.sub(r"[^A-Za-z0-9\-_. ]", "", nvml_name)
    return "-".join(kept.split())


def product_labels(gpu_key: str) -> tuple[str, ...]:
    """Every ``nvidia.com/gpu.product`` value a node with GPU ``gpu_key`` may carry."""
    entry = NVML_NAMES.get(gpu_key)
    if entry is None:
        known = ", ".join(sorted(NVML_NAMES))
        raise PlannerInputError(
            "plan.best.deployment.gpu",
            f"no {LABEL_KEY} node label is known for GPU {gpu_key!r} (known: {known}); "
            "Kubernetes manifests select nodes by it (add its NVML name to "
            "planner/emitters/k8s_gpus.py)",
        )
    return tuple(gfd_label(n) for n in entry[0])
