"""What a deployment pays for: GPUs bought in whole purchase units, and its costs per token.

A purchase unit is the smallest number of GPUs bought or rented together (``GpuSpec
.purchase_unit_gpus``: one 4-GPU compute tray of an NVL72 rack, 1 where GPUs are rented singly;
``--node-gpus`` overrides it). Workers are packed into units as the emitters place them on hosts
(``planner.emitters.common.place``): a worker that fits one unit never straddles two, a wider one
takes whole units of its own. Each role of a disaggregated deployment is packed on its own.
"""

from __future__ import annotations

import numpy as np

from hardware.spec import GpuSpec
from solvers.candidates import Block

SECONDS_PER_HOUR = 3600.0


def units_bought(gpus_per_worker: np.ndarray, workers: np.ndarray, unit: int) -> np.ndarray:
    """Purchase units of ``unit`` GPUs that hold ``workers`` workers of ``gpus_per_worker`` GPUs
    each (elementwise)."""
    g = np.asarray(gpus_per_worker, dtype=int)
    n = np.asarray(workers, dtype=int)
    per_unit = np.maximum(unit // np.maximum(g, 1), 1)
    return np.where(g <= unit, -(-n // per_unit), n * -(-g // unit))


def purchase_unit(gpu: GpuSpec, node_gpus: int | None) -> tuple[int, str]:
    """(GPUs per purchase unit, where that number comes from): ``--node-gpus`` when given, else
    the GPU spec's ``purchase_unit_gpus`` and its source."""
    if node_gpus is not None:
        return node_gpus, "--node-gpus"
    src = gpu.sources.get("purchase_unit_gpus", "not stated in the spec: rented singly")
    return gpu.purchase_unit_gpus, f"{gpu.key} purchase_unit_gpus: {src}"


def gpus_bought(b: Block, unit: int) -> np.ndarray:
    """Per candidate of ``b``, the GPUs bought in units of ``unit`` GPUs."""
    if b.mode == "agg":
        assert b.workers is not None
        return units_bought(b.workers.gpus_per_worker, b.replicas, unit) * unit
    assert b.prefill is not None and b.decode is not None and b.units is not None
    u = b.units
    pre = units_bought(b.prefill.gpus_per_worker[u.p], u.x, unit)
    dec = units_bought(b.decode.gpus_per_worker[u.d], u.y, unit)
    return np.asarray((pre + dec) * unit)


def role_gpus_bought(b: Block, node_gpus: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate of ``b``, GPUs bought for (prefill, decode) workers, each role in whole
    purchase units of its own GPU type (``--node-gpus`` for both when given); an aggregated
    block's are (0, all)."""
    unit = purchase_unit(b.gpu, node_gpus)[0]
    if b.mode == "agg":
        return np.zeros(b.size, dtype=int), gpus_bought(b, unit)
    assert b.prefill is not None and b.decode is not None and b.units is not None
    u, unit_p = b.units, purchase_unit(b.pre_gpu, node_gpus)[0]
    pre = units_bought(b.prefill.gpus_per_worker[u.p], u.x, unit_p) * unit_p
    dec = units_bought(b.decode.gpus_per_worker[u.d], u.y, unit) * unit
    return np.asarray(pre), np.asarray(dec)


def cost_per_million(cost_per_hour: np.ndarray, tokens_per_s: np.ndarray) -> np.ndarray:
    """USD per 1e6 tokens at ``tokens_per_s`` for a deployment costing ``cost_per_hour``."""
    return cost_per_hour / (SECONDS_PER_HOUR * np.maximum(tokens_per_s, 1e-12)) * 1e6
