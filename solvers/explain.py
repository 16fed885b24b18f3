"""Explain infeasible requests (the binding constraint of a found plan is :mod:`solvers.binding`).

Infeasible requests raise :class:`hardware.errors.InfeasibleError` whose message carries the
closest achievable value and what to relax.
"""

from __future__ import annotations

import numpy as np

from hardware.errors import InfeasibleError


def _fmt(ms: float) -> str:
    return f"{ms:.3g} ms" if np.isfinite(ms) else "unbounded"


def infeasible_slo(
    ttft_ms: np.ndarray,
    tpot_ms: np.ndarray,
    slo_ttft: float,
    slo_tpot: float,
    percentile: str,
    where: str,
) -> InfeasibleError:
    """The error for 'no candidate meets both SLOs', naming the closest achievable value."""
    min_tpot, min_ttft = float(np.min(tpot_ms)), float(np.min(ttft_ms))
    if min_tpot > slo_tpot:
        return InfeasibleError(
            "TPOT",
            f"no configuration {where} reaches {percentile} TPOT <= {slo_tpot:g} ms; the closest "
            f"achievable is {_fmt(min_tpot)} (relax --tpot-ms to >= {min_tpot:.3g}, or allow "
            "more/faster GPUs)",
            binding_constraint="TPOT",
        )
    if min_ttft > slo_ttft:
        return InfeasibleError(
            "TTFT",
            f"no configuration {where} reaches {percentile} TTFT <= {slo_ttft:g} ms; the closest "
            f"achievable is {_fmt(min_ttft)} (relax --ttft-ms to >= {min_ttft:.3g}, shorten the "
            "prompt, or allow more GPUs)",
            binding_constraint="TTFT",
        )
    ratio = np.maximum(ttft_ms / slo_ttft, tpot_ms / slo_tpot)
    i = int(np.argmin(ratio))
    bind = "TTFT" if ttft_ms[i] / slo_ttft >= tpot_ms[i] / slo_tpot else "TPOT"
    return InfeasibleError(
        bind,
        f"TTFT and TPOT cannot both be met {where}; closest: {percentile} TTFT "
        f"{_fmt(float(ttft_ms[i]))} with TPOT {_fmt(float(tpot_ms[i]))} (relax --ttft-ms to >= "
        f"{ttft_ms[i]:.3g} or --tpot-ms to >= {tpot_ms[i]:.3g})",
        binding_constraint=bind,
    )


def infeasible_budget(
    rate: float, best_rate: float, gpus_needed: int | None, max_gpus: int
) -> InfeasibleError:
    """The error for 'the SLO is reachable but not at this rate within max_gpus'."""
    need = f"; serving it needs {gpus_needed} GPUs (raise --max-gpus)" if gpus_needed else ""
    return InfeasibleError(
        "GPU budget",
        f"{rate:g} requests/s does not fit in {max_gpus} GPUs within the SLO; the closest "
        f"achievable is {best_rate:.3g} requests/s{need}",
        binding_constraint="GPU budget",
    )


def infeasible_over_budget(max_gpus: int, gpus_needed: int, config: str) -> InfeasibleError:
    """The error for 'the request is met, but not within the GPU budget': names the budget."""
    return InfeasibleError(
        "GPU budget",
        f"nothing within the budget of --max-gpus {max_gpus:,} meets the request, and the budget "
        f"is what fails: the fewest GPUs that meet it are {gpus_needed:,} ({config}); raise "
        f"--max-gpus to >= {gpus_needed:,}",
        binding_constraint="GPU budget",
    )


def infeasible_throughput(
    rate: float, capacity: float, max_gpus: int, where: str
) -> InfeasibleError:
    """The error for 'every deployment in the budget saturates at this rate': compute binds."""
    if capacity > 0:
        closest = (
            f"the closest achievable is {capacity:.3g} requests/s at full batch, SLOs aside "
            f"(lower --rate to <= {capacity:.3g}, or raise --max-gpus to about "
            f"{int(np.ceil(max_gpus * rate / capacity)):,})"
        )
    else:
        closest = "no deployment reaches a steady state (lower --rate or raise --max-gpus)"
    return InfeasibleError(
        "compute",
        f"{rate:g} requests/s saturates every configuration {where}: the GPUs' compute "
        f"cannot keep up; {closest}",
        binding_constraint="compute",
    )


def infeasible_memory(
    model: str, gpus: tuple[str, ...], max_gpus: int, detail: str
) -> InfeasibleError:
    """The error for 'the model fits nowhere in the space'."""
    return InfeasibleError(
        "memory",
        f"{model} fits on none of {', '.join(gpus)} with up to {max_gpus} GPUs; closest: {detail} "
        "(relax: raise --max-gpus, choose a GPU with more memory, or allow fp8/fp4 weights)",
        binding_constraint="memory",
    )
