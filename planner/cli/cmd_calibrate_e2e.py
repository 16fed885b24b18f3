"""``planner calibrate e2e``: fit the end-to-end engine constants to your own benchmark results,
and the ``--calibration PROFILE`` option of the commands that use them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planner.calibration.data import load_data
from planner.calibration.profile import (
    Fit,
    Profile,
    activate,
    calibrate,
    calibration_of,
    profile_text,
)
from planner.cli.output import print_json, render_table
from planner.engines import engine_names
from planner.engines.calibration import EngineConstants
from planner.errors import PlannerInputError
from planner.safe_files import check_new_file, write_new_file
from planner.uncertainty.bands import Bands

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def add_calibration(p: argparse.ArgumentParser) -> None:
    """``--calibration PROFILE`` (written by ``planner calibrate e2e``)."""
    p.add_argument(
        "--calibration",
        type=Path,
        default=None,
        metavar="PROFILE",
        help="calibration profile from `planner calibrate e2e`: its engine constants "
        "replace the packaged ones and outputs name it",
    )


def use_profile(args: argparse.Namespace, gpu: str | None = None) -> EngineConstants:
    """``--calibration``: its engine constants for the request (the per-GPU fit for ``gpu`` when
    the profile has one; the packaged ones without a profile); with its bands:
    ``calibration_from``."""
    return activate(getattr(args, "calibration", None), gpu)


def calibration_from(
    args: argparse.Namespace, gpu: str | None = None
) -> tuple[EngineConstants, Bands]:
    """``--calibration``: its engine constants and its bands, the profile read once."""
    return calibration_of(getattr(args, "calibration", None), gpu)


def _out_path(text: str) -> Path:
    out = Path(text)
    try:
        inside = out.resolve().is_relative_to(PACKAGE_DIR)
    except OSError:
        inside = False
    if inside:
        raise PlannerInputError(
            "--out",
            f"{text!r} is inside the planner package; write the profile into your own folder",
        )
    if out.suffix not in (".yaml", ".yml"):
        raise PlannerInputError("--out", f"{text!r}: the profile is YAML; name it *.yaml")
    if not out.parent.is_dir():
        raise PlannerInputError("--out", f"folder {str(out.parent)!r} does not exist")
    return out


def _summary(profile: Profile) -> list[dict[str, Any]]:
    rows = []
    for backend, eng in profile.engines.items():
        fits: list[tuple[str, Fit]] = [("all", eng.all_gpus), *eng.by_gpu.items()]
        for scope, fit in fits:
            row: dict[str, Any] = {
                "engine": backend,
                "GPU": scope,
                "rows": fit.rows_used,
                "load points": fit.load_points,
            }
            for mode in ("agg", "disagg"):
                for m in ("ttft", "tpot"):
                    key = f"{mode}_{m}_median_ape_pct"
                    b, a = getattr(fit.residuals_before, key), getattr(fit.residuals_after, key)
                    if b is not None:
                        row[f"{mode} {m.upper()} median APE % before -> after"] = (
                            f"{b:.3g} -> {a:.3g}"
                        )
            row["fitted"] = ", ".join(fit.fitted) or "none (cross-validation kept the packaged)"
            rows.append(row)
    return rows


def cmd_calibrate_e2e(args: argparse.Namespace) -> int:
    out = _out_path(args.out)
    check_new_file(out, args.force, "--out")  # before the fit, not after it
    data = load_data(args.data, args.backend)
    profile = calibrate(data, progress=True)
    write_new_file(out, profile_text(profile).encode(), args.force, "--out")
    if args.format == "json":
        print_json(profile.model_dump(mode="json"))
        return 0
    print(render_table(_summary(profile)))
    print(f"wrote {out}; use it with --calibration {out}")
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = groups["calibrate"].add_parser(
        "e2e", help="fit the end-to-end engine constants to your own benchmark results"
    )
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        metavar="FILE_OR_DIR",
        help="results folder of benchmark.sh (vllm bench serve JSON / SGLang JSONL "
        "next to deployment.json), or a CSV in the layout of silicon_measured.csv",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="PROFILE.yaml",
        help="profile file to write (in your folder, never the package)",
    )
    p.add_argument(
        "--backend", choices=engine_names(), default=None, help="only this engine's rows"
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=cmd_calibrate_e2e)
