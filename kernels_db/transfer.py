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
MI355X today) stays ``roofline_uncalibrated`` everywhere. Ops priced from a transferred fit carry
the provenance tag ``transferred:<donor key>``. Donor fits are read from the fitted folder at run
time, so a refit of a donor moves its siblings with it.
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


def held_out_check(folder: Path, fitted_dir: Path = paths.FITTED_DIR) -> list[dict[str, object]]:
    """How well the rule predicts a GPU that *has* measured tables, from its sibling's fit alone:
    per GPU of ``folder`` with a fitted same-architecture sibling, op group and method
    ('transferred:<donor>', the GPU's own in-sample 'fitted', the default 'roofline_uncalibrated'),
    n and median / p90 APE."""
    from kernels_db.folder import read_folder  # local: reading tables is only needed here
    from kernels_db.validate import evaluate_gpu

    out: list[dict[str, object]] = []
    specs = all_gpus()
    for key, tables in sorted(read_folder(folder).tables.items()):
        spec = specs.get(key)
        donor = donor_for(spec, fitted_dir) if spec is not None else None
        donor_fit = fitted.load(donor.key, fitted_dir) if donor is not None else None
        if spec is None or donor is None or donor_fit is None:
            continue
        none = FittedGpu(gpu=key, date="-", command="defaults", spec_used={})
        for tag, fit in (
            (provenance_tag(donor.key), transferred(spec, donor, donor_fit)),
            ("fitted", fitted.load(key, fitted_dir)),
            ("roofline_uncalibrated", none),
        ):
            out += [
                {**row, "method": tag}
                for row in evaluate_gpu(spec, tables, fit)
                if row["method"] == "fitted"
            ]
    return out


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(description="held-out check of the kernel-fit transfer rule")
    parser.add_argument("--data", type=Path, required=True, help="folder of measured kernel tables")
    print(json.dumps(held_out_check(parser.parse_args().data), indent=1))
