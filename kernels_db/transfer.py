"""Fitted efficiencies for GPUs without a fit of their own, transferred from a measured sibling.

Rule (one, stated): a GPU with no ``kernels_db/fitted/<key>.yaml`` takes the fit of the *closest
fitted GPU of the same vendor and architecture*, distance ``|ln(bf16 peak ratio)| + |ln(HBM
bandwidth ratio)|`` (B300 <- B200, GB200 <- B200, H20 / H800 / GH200 <- H100 or H200, L40 / RTX 4090
<- L40S, A100 PCIe <- A100 SXM). What transfers and how it is scaled to the target:

- efficiencies (``compute_eff``, ``memory_eff``) stay fractions of the *target's* peaks, so the
  time scales with the target's FLOP/s and bandwidth (the roofline divides by them);
- the sizes at which efficiency is half its maximum keep their time scale: ``compute_half_flops``
  x (target / donor bf16 peak), ``memory_half_bytes`` x (target / donor HBM bandwidth);
- ``parallel_half_units`` (decode / prefill attention, GEMM tiles) x (target / donor SM count),
  ``tile_s`` (a tile's cost averaged over the SMs) x (donor / target SM count); launch costs, tile
  padding, the cache speed-up and ``split_kv`` stay as fitted;
- collectives (alpha-beta) transfer only over the same kind of scale-up link (NVLink, xGMI, PCIe):
  bus bandwidth x (target / donor per-GPU link bandwidth), latency as fitted.

A dtype or family the donor has no fit for stays on the default efficiencies (tag
``roofline_uncalibrated``), and a GPU of an architecture with no fitted sibling (MI300X, MI325X and
MI355X today: no AMD GPU has measured kernel tables) stays ``roofline_uncalibrated`` everywhere; no
fit is carried across vendors or architectures. Ops priced from a transferred fit carry the
provenance tag ``transferred:<donor key>``. Donor fits are read from the fitted folder at run time,
so a refit of a donor moves its siblings with it.

Measured matmul ceiling (GPUs with neither a fit nor a fitted sibling): the default GEMM efficiency
was taken from the fits of ``DEFAULT_FIT_GPUS``, whose measured best-shape matmul throughput (MAMF,
``GpuSpec.matmul_ceiling_flops_per_s``) is a median ``REFERENCE`` share of their bf16 peaks. A GPU
whose own measured bf16 ceiling is a smaller (larger) share of its peak gets the default GEMM and
grouped-GEMM compute efficiency scaled by (its share / reference share), for every dtype
(ASSUMPTION: lower-precision GEMMs lose the same fraction; NVIDIA's fp8 MAMF shares are 3-7 points
below bf16). The ops keep the tag ``roofline_uncalibrated`` (no per-op fit), and
``calibration(spec)`` says that the ceiling was used and where it comes from.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from hardware.catalog import all_gpus
from hardware.spec import GpuSpec
from kernels_db import fitted, paths
from kernels_db.comm import scale_up_link as cm_link
from kernels_db.fitted import (
    CommFamilyFit,
    FittedGpu,
    RooflineFamilyFit,
    RooflineParams,
)

TRANSFERRED_PREFIX = "transferred:"
DEFAULT_FIT_GPUS: tuple[str, ...] = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm")
"""The GPUs whose fits gave ``fitted.DEFAULT_PARAMS`` (see its comment)."""
CEILING_RATIO_BOUNDS: tuple[float, float] = (0.3, 1.25)
"""Range the ceiling scale factor is clipped to (the default GEMM efficiency stays in (0, 1))."""
CEILING_OPS: tuple[str, ...] = ("gemm", "moe")


def provenance_tag(donor: str) -> str:
    """The provenance tag of ops priced from ``donor``'s transferred fit."""
    return f"{TRANSFERRED_PREFIX}{donor}"


def distance(a: GpuSpec, b: GpuSpec) -> float:
    """|ln(bf16 peak ratio)| + |ln(HBM bandwidth ratio)| (0 for identical chips)."""
    return abs(math.log(a.peak_flops("bf16") / b.peak_flops("bf16"))) + abs(
        math.log(a.hbm_bandwidth_bytes_per_s / b.hbm_bandwidth_bytes_per_s)
    )


def donor_for(spec: GpuSpec, fitted_dir: Path = paths.FITTED_DIR) -> GpuSpec | None:
    """The closest bundled GPU of the same vendor and architecture that has a fit; None if none."""
    siblings = [
        g
        for g in all_gpus().values()
        if g.key != spec.key
        and g.vendor == spec.vendor
        and g.architecture == spec.architecture
        and paths.fitted_path(g.key, fitted_dir).is_file()
    ]
    if not siblings:
        return None
    return min(siblings, key=lambda g: (distance(spec, g), g.key))


def _scaled(prm: RooflineParams, target: GpuSpec, donor: GpuSpec) -> RooflineParams:
    """Donor parameters at the target's time scales (module docstring)."""
    flops = target.peak_flops("bf16") / donor.peak_flops("bf16")
    bw = target.hbm_bandwidth_bytes_per_s / donor.hbm_bandwidth_bytes_per_s
    sms = target.sm_count / donor.sm_count
    return prm.model_copy(
        update={
            "compute_half_flops": prm.compute_half_flops * flops,
            "memory_half_bytes": prm.memory_half_bytes * bw,
            "parallel_half_units": prm.parallel_half_units * sms,
            "tile_s": prm.tile_s / sms,
        }
    )


def _comm(fit: CommFamilyFit | None, target: GpuSpec, donor: GpuSpec) -> CommFamilyFit | None:
    """Donor collectives at the target's link bandwidth; None across link kinds."""
    if fit is None or cm_link(target) != cm_link(donor):
        return None
    ratio = target.scale_up.bandwidth_bytes_per_s / donor.scale_up.bandwidth_bytes_per_s
    params = {
        name: {
            n: p.model_copy(
                update={
                    "bus_bandwidth_bytes_per_s": p.bus_bandwidth_bytes_per_s * ratio,
                    "small_lines": tuple(
                        ln.model_copy(
                            update={
                                "bus_bandwidth_bytes_per_s": ln.bus_bandwidth_bytes_per_s * ratio
                            }
                        )
                        for ln in p.small_lines
                    ),
                }
            )
            for n, p in by_n.items()
        }
        for name, by_n in fit.params.items()
    }
    return fit.model_copy(update={"params": params})


def transferred(target: GpuSpec, donor: GpuSpec, fit: FittedGpu) -> FittedGpu:
    """``fit`` (of ``donor``) carried over to ``target`` by the stated rule."""
    families = {
        op: RooflineFamilyFit(
            params={k: _scaled(p, target, donor) for k, p in fam.params.items()},
            fitted_to=fam.fitted_to,
            fit_error=fam.fit_error,
        )
        for op, fam in fit.families.items()
    }
    spec_used = {
        "peak_flops_per_s.bf16": target.peak_flops("bf16"),
        "hbm_bandwidth_bytes_per_s": target.hbm_bandwidth_bytes_per_s,
    }
    return FittedGpu(
        gpu=target.key,
        date=fit.date,
        command=f"transferred from {donor.key}: {fit.command}",
        spec_used=spec_used,
        families=families,
        comm=_comm(fit.comm, target, donor),
        notes=f"{provenance_tag(donor.key)} (kernels_db.transfer rule)",
    )


def ceiling_share(spec: GpuSpec) -> float | None:
    """Measured bf16 matmul ceiling / bf16 peak of ``spec``; None when not measured."""
    ceil = (spec.matmul_ceiling_flops_per_s or {}).get("bf16")
    return ceil / spec.peak_flops("bf16") if ceil else None


def reference_share() -> float:
    """Median ``ceiling_share`` of the ``DEFAULT_FIT_GPUS`` that have a measured bf16 ceiling."""
    gpus = all_gpus()
    shares = sorted(
        s for k in DEFAULT_FIT_GPUS if k in gpus and (s := ceiling_share(gpus[k])) is not None
    )
    if not shares:
        raise ValueError("no default-fit GPU has a measured bf16 matmul ceiling")
    mid = len(shares) // 2
    return shares[mid] if len(shares) % 2 else (shares[mid - 1] + shares[mid]) / 2.0


def ceiling_ratio(spec: GpuSpec) -> float | None:
    """Scale of the default GEMM compute efficiency from the GPU's measured matmul ceiling (module
    docstring); None without a measured bf16 ceiling."""
    share = ceiling_share(spec)
    if share is None:
        return None
    lo, hi = CEILING_RATIO_BOUNDS
    return min(max(share / reference_share(), lo), hi)


def default_params(spec: GpuSpec, op: str, has_fit: bool) -> RooflineParams:
    """Default parameters of family ``op`` for ``spec``: ``fitted.DEFAULT_PARAMS``, with the GEMM
    compute efficiency scaled to the measured matmul ceiling when the GPU has no fit of its own
    nor a transferred one."""
    prm = fitted.DEFAULT_PARAMS[op]
    ratio = None if has_fit or op not in CEILING_OPS else ceiling_ratio(spec)
    if ratio is None:
        return prm
    return prm.model_copy(update={"compute_eff": prm.compute_eff * ratio})


def calibration(spec: GpuSpec, fitted_dir: Path | None = None) -> dict[str, object]:
    """What prices this GPU's kernels: its own fit, a sibling's (``transferred:<donor>``), or the
    default efficiencies (``roofline_uncalibrated``), with the measured matmul ceiling if used.
    ``fitted_dir`` defaults to the folder ``KernelDB.for_gpu`` reads (user folder first)."""
    fit, donor = fit_for(spec, fitted_dir or paths.fitted_root(spec.key))
    if fit is not None:
        kind = provenance_tag(donor) if donor else "fitted"
        how = "own fit" if not donor else f"fit of {donor} scaled by peaks and bandwidth"
        return {"kind": kind, "detail": f"{how} (kernels_db/fitted, kernels_db.transfer rule)"}
    out: dict[str, object] = {
        "kind": "roofline_uncalibrated",
        "detail": f"no fit and no fitted {spec.vendor} {spec.architecture} sibling: "
        "default efficiencies",
    }
    ratio = ceiling_ratio(spec)
    if ratio is not None:
        share = ceiling_share(spec)
        eff = fitted.DEFAULT_PARAMS["gemm"].compute_eff
        out["detail"] = (
            f"{out['detail']}; GEMM compute efficiency {eff:.2f} x {ratio:.3f} = {eff * ratio:.3f} "
            f"from the measured bf16 matmul ceiling ({share:.1%} of peak vs "
            f"{reference_share():.1%} for the default-fit GPUs)"
        )
        out["matmul_ceiling_source"] = spec.sources.get("matmul_ceiling_flops_per_s", "")
    return out


@lru_cache(maxsize=64)
def _fit_for(spec_json: str, fitted_dir: Path) -> tuple[FittedGpu | None, str | None]:
    spec = GpuSpec.model_validate_json(spec_json)
    own = fitted.load(spec.key, fitted_dir)
    if own is not None:
        return own, None
    donor = donor_for(spec, fitted_dir)
    donor_fit = fitted.load(donor.key, fitted_dir) if donor is not None else None
    if donor is None or donor_fit is None:
        return None, None
    return transferred(spec, donor, donor_fit), donor.key


def fit_for(
    spec: GpuSpec, fitted_dir: Path = paths.FITTED_DIR
) -> tuple[FittedGpu | None, str | None]:
    """(fit, donor key): the GPU's own fit (donor None), a transferred one, or (None, None)."""
    return _fit_for(spec.model_dump_json(), fitted_dir)
