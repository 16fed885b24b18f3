"""`planner gpus` and `planner models`: what the planner knows about."""

from __future__ import annotations

import argparse
from typing import Any

from hardware.catalog import all_gpus
from kernels_db.transfer import calibration
from planner.cli.common import add_format, add_hardware_dir
from planner.cli.output import print_json, render_table
from planner.model.bundled import bundled_models, load_model
from planner.model.params import active_params, total_params


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("gpus", help="list known GPUs")
    add_format(p)
    add_hardware_dir(p)
    p.set_defaults(func=cmd_gpus)
    p = sub.add_parser("models", help="list bundled models")
    add_format(p)
    p.set_defaults(func=cmd_models)


def gpu_rows(extra_dirs: list[str]) -> list[dict[str, Any]]:
    rows = []
    for key, g in sorted(all_gpus(extra_dirs).items()):
        rows.append(
            {
                "key": key,
                "name": g.name,
                "memory_gib": g.memory_bytes / 2**30,
                "hbm_tb_s": g.hbm_bandwidth_bytes_per_s / 1e12,
                "bf16_tflops": g.peak_flops("bf16") / 1e12,
                "fp8_tflops": g.peak_flops_per_s.get("fp8", 0.0) / 1e12,
                "fp6_tflops": g.peak_flops_per_s.get("fp6", 0.0) / 1e12,
                "fp4_tflops": g.peak_flops_per_s.get("fp4", 0.0) / 1e12,
                "scale_up": f"{g.scale_up.name} x{g.scale_up.domain_size}",
                "scale_up_gb_s": g.scale_up.bandwidth_bytes_per_s / 1e9,
                "scale_out_gb_s": g.scale_out_bandwidth_bytes_per_s / 1e9,
                "price_usd_h": g.price_per_gpu_hour_usd,
                "kernels": calibration(g)["kind"],
                "aliases": ", ".join(g.aliases),
            }
        )
    return rows


def cmd_gpus(args: argparse.Namespace) -> int:
    rows = gpu_rows(args.hardware_dir)
    if args.format == "json":
        specs = all_gpus(args.hardware_dir)
        print_json(
            {
                "gpus": [
                    {
                        **r,
                        "architecture": specs[r["key"]].architecture,
                        "domain_size": specs[r["key"]].scale_up.domain_size,
                        "kernel_calibration": calibration(specs[r["key"]]),
                        "sources": dict(specs[r["key"]].sources),
                    }
                    for r in rows
                ]
            }
        )
    else:
        print(render_table(rows, [c for c in rows[0] if c not in ("aliases", "fp6_tflops")]))
        print("\nprice_usd_h is an editable assumption (--price-per-gpu-hour).")
        print(
            "kernels: own fit ('fitted'), a same-architecture sibling's fit ('transferred:<gpu>') "
            "or default efficiencies ('roofline_uncalibrated'); details in --format json."
        )
    return 0


def model_rows() -> list[dict[str, Any]]:
    rows = []
    for key, b in sorted(bundled_models().items()):
        m = load_model(key)
        rows.append(
            {
                "key": key,
                "name": m.name,
                "hf_id": b.hf_id,
                "family": m.family,
                "layers": m.num_layers,
                "hidden": m.hidden_size,
                "heads": f"{m.num_heads}/{m.num_kv_heads}",
                "params_b": total_params(m) / 1e9,
                "active_b": active_params(m) / 1e9,
                "weights": m.quant.weight_format,
                "quant_method": m.quant.method,
                "kv_cache_ckpt": m.quant.kv_cache or "-",
                "aliases": list(b.aliases),
            }
        )
    return rows


def cmd_models(args: argparse.Namespace) -> int:
    rows = model_rows()
    if args.format == "json":
        print_json({"models": rows})
    else:
        print(render_table(rows, [c for c in rows[0] if c != "aliases"]))
    return 0
