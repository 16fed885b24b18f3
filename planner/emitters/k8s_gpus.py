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

# hardware spec key -> names as `nvidia-smi --query-gpu=name` prints them (NVML nvmlDeviceGetName)
NVML_NAMES: dict[str, tuple[str, ...]] = {
    "a100_sxm": ("NVIDIA A100-SXM4-80GB",),
    "a100_pcie": ("NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"),
    "h100_sxm": ("NVIDIA H100 80GB HBM3",),
    "h100_pcie": ("NVIDIA H100 PCIe",),
    "h100_nvl": ("NVIDIA H100 NVL",),
    "h200_sxm": ("NVIDIA H200", "NVIDIA H200 SXM5 141GB"),
    "h800": ("NVIDIA H800",),
    "h20": ("NVIDIA H20",),
    "b200_sxm": ("NVIDIA B200",),
    "gb200": ("NVIDIA GB200",),
    "l4": ("NVIDIA L4",),
    "l40": ("NVIDIA L40",),
    "l40s": ("NVIDIA L40S",),
    "rtx_4090": ("NVIDIA GeForce RTX 4090",),
    "rtx_pro_6000": ("NVIDIA RTX PRO 6000 Blackwell Server Edition",),
}
NVML_SOURCE = (
    "names printed by nvidia-smi on these boards; the label form of NVIDIA-H200, "
    "NVIDIA-H200-SXM5-141GB and NVIDIA-B200 as GPU feature discovery publishes them: "
    "github:ai-dynamo/dynamo deploy/operator/internal/gpu/discovery_test.go"
)

LABEL_KEY = "nvidia.com/gpu.product"


def gfd_label(nvml_name: str) -> str:
    """The label value GPU feature discovery derives from an NVML device name."""
    kept = re.sub(r"[^A-Za-z0-9\-_. ]", "", nvml_name)
    return "-".join(kept.split())


def product_labels(gpu_key: str) -> tuple[str, ...]:
    """Every ``nvidia.com/gpu.product`` value a node with GPU ``gpu_key`` may carry."""
    names = NVML_NAMES.get(gpu_key)
    if not names:
        known = ", ".join(sorted(NVML_NAMES))
        raise PlannerInputError(
            "plan.best.deployment.gpu",
            f"no {LABEL_KEY} node label is known for GPU {gpu_key!r} (known: {known}); "
            "Kubernetes manifests select nodes by it",
        )
    return tuple(gfd_label(n) for n in names)
