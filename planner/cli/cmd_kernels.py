"""``planner kernel``, ``planner kernels import``, ``planner validate kernels``,
``planner calibrate fit`` and ``planner calibrate run``."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd

from hardware.catalog import get_gpu
from hardware.spec import DTYPES
from kernels_db import fitted, paths
from kernels_db.costs import counts, peak_bound
from kernels_db.folder import read_aic_file, read_folder
from kernels_db.lookup import KernelDB
from kernels_db.ops import shape_of
from kernels_db.schema import COLLECTIVES, LINKS, OP_FAMILIES, OP_KEYS
from kernels_db.tables import table_from_frame, write_meta, write_table
from planner.cli.common import float_in, int_in
from planner.cli.output import print_json, render_kv, render_table
from planner.errors import PlannerInputError

SIZE_ARGS = (
    "m",
    "n",
    "k",
    "batch",
    "seq",
    "prior",
    "heads",
    "kv_heads",
    "head_dim",
    "window",
    "kv_len",
    "kv_lora_rank",
    "rope_dim",
    "tokens",
    "hidden",
    "inter",
    "topk",
    "experts",
    "ep",
    "n_gpus",
    "bytes",
)

OPTIONAL_DEFAULTS: dict[str, Any] = {"prior": 0, "window": 0, "ep": 1, "head_dim": 128}
MAX_KERNEL_SIZE = 100_000_000
"""Largest size flag of ``planner kernel`` (tokens, widths, heads, GPUs)."""
MAX_KERNEL_BYTES = 1e13
"""Largest ``--bytes`` of ``planner kernel`` (10 TB)."""


def _fmt(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")


def _kernel(args: argparse.Namespace) -> int:
    spec = get_gpu(args.gpu)
    db = KernelDB.for_gpu(spec)
    given = {k: getattr(args, k) for k in SIZE_ARGS if getattr(args, k) is not None}
    try:
        if args.op == "comm":
            cost = db.comm(args.collective, given["n_gpus"], given["bytes"], args.link)
            bound = None
        else:
            cols: dict[str, Any] = {**given, "dtype": args.dtype, "kv_dtype": args.kv_dtype}
            cost = db.price(shape_of(args.op, _only_keys(args.op, cols)))
            bound = float(
                peak_bound(
                    counts(args.op, _only_keys(args.op, cols), spec), spec.hbm_bandwidth_bytes_per_s
                )
            )
    except KeyError as exc:
        if exc.args and exc.args[0] in SIZE_ARGS:
            flag = str(exc.args[0]).replace("_", "-")
            raise PlannerInputError(f"--{flag}", f"required for --op {args.op}") from None
        raise
    out = {
        "gpu": spec.key,
        "op": args.op,
        **given,
        "latency_s": float(cost.seconds),
        "tflops": float(cost.tflops),
        "provenance": str(cost.provenance),
        "roofline_bound_s": bound,
        "bytes_moved": float(cost.bytes),
    }
    if args.format == "json":
        print_json(out)
    else:
        print(render_kv(out, title=f"{args.op} on {spec.name}"))
    return 0


def _only_keys(op: str, cols: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``op`` from the command line, with defaults for the optional ones."""
    merged = {**OPTIONAL_DEFAULTS, **{k: v for k, v in cols.items() if v is not None}}
    return {k: merged[k] for k in OP_KEYS[op]}


def _gpu_key(name: str) -> str:
    try:
        return get_gpu(name).key
    except PlannerInputError:
        return paths.check_gpu_key(name.lower())


def _import_file(f: Path, key: str) -> list[tuple[str, pd.DataFrame]]:
    """The (op, frame) tables of ``key`` in one AIConfigurator file, checked against its rows."""
    frames = []
    for (gpu, op), df in read_aic_file(f, key).items():
        if gpu == key:
            table_from_frame(df, op, key, str(f))  # a bad row is named by its input line
            frames.append((op, df.drop(columns=["file", "line"], errors="ignore")))
    return frames


def _import(args: argparse.Namespace) -> int:
    path = Path(args.path)
    key = _gpu_key(args.gpu)
    if not path.exists():
        raise PlannerInputError("PATH", f"{path} does not exist")
    files = sorted(path.rglob("*.csv")) if path.is_dir() else [path]
    out_dir = Path(args.out) if args.out else paths.user_tables_dir()
    found: list[tuple[Path, str, pd.DataFrame]] = []
    skipped: list[str] = []
    for f in files:
        try:
            found += [(f, op, df) for op, df in _import_file(f, key)]
        except PlannerInputError as exc:
            if not path.is_dir():
                raise
            skipped.append(f"{f.name}: {exc}")  # one bad file does not abort the folder
    if not found:
        why = f"; skipped: {'; '.join(skipped[:3])}" if skipped else ""
        raise PlannerInputError("--gpu", f"no rows for GPU '{key}' in {path}{why}")
    written = []
    for f, op, df in found:  # everything was checked before the first file is written
        dest = paths.table_path(key, op, out_dir)
        write_table(df, dest)
        written.append({"file": str(dest), "op": op, "rows": len(df), "from": f.name})
    write_meta(
        paths.table_dir(key, out_dir),
        {
            "gpu": key,
            "tool": "planner kernels import --format aiconfigurator",
            "kernel_source": "aiconfigurator",
            "date": dt.date.today().isoformat(),
            "imported_from": str(path),
        },
    )
    if args.format == "json":
        print_json({"written": written, "skipped_files": skipped})
    else:
        print(render_table(written))
        for line in skipped:
            print(f"skipped {line}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from kernels_db.validate import evaluate_gpu  # scipy.optimize via the fitter: loaded here only

    ts = read_folder(Path(args.data))
    groups: list[dict[str, Any]] = []
    for gpu, tables in sorted(ts.tables.items()):
        groups += evaluate_gpu(get_gpu(gpu), tables)
    if args.format == "json":
        print_json(
            {"groups": groups, "skipped_files": ts.skipped_files, "skipped_rows": ts.skipped_rows}
        )
    else:
        print(render_table(groups))
    return 0


def _fit(args: argparse.Namespace) -> int:
    from kernels_db.fit import fit_gpu  # scipy.optimize: loaded by this command only

    spec = get_gpu(args.gpu)
    ts = read_folder(Path(args.tables))
    tables = ts.tables.get(spec.key)
    if not tables:
        raise PlannerInputError(
            "--gpu", f"no tables for '{spec.key}' in {args.tables}; found {sorted(ts.tables)}"
        )
    sources = {op: ts.sources.get((spec.key, op), ()) for op in tables}
    command = f"planner calibrate fit --gpu {spec.key} --tables {args.tables}"
    fit = fit_gpu(
        tables,
        spec,
        command,
        {k: tuple(sorted(set(v))) for k, v in sources.items()},
        notes=args.notes,
    )
    path = fitted.save(fit, Path(args.out) if args.out else paths.user_fitted_dir())
    fitted.load.cache_clear()
    rows = [{"family": op, **f.fit_error.model_dump()} for op, f in fit.families.items()]
    if fit.comm:
        rows.append({"family": "comm", **fit.comm.fit_error.model_dump()})
    print_json({"written": str(path), "fit_error": rows}) if args.format == "json" else print(
        f"wrote {path}\n" + render_table(rows)
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        from kernels_db.bench.runner import run
    except ImportError as exc:
        raise PlannerInputError(
            "calibrate run", f"needs torch/triton ({exc.name}): pip install -e .[bench]"
        ) from exc
    out = run(
        args.gpu, [o.strip() for o in args.ops.split(",") if o.strip()], args.quick, Path(args.out)
    )
    print_json({"written": str(out)}) if args.format == "json" else print(f"wrote {out}")
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("kernel", help="latency of one kernel on one GPU (with provenance)")
    p.add_argument("--gpu", required=True)
    p.add_argument("--op", required=True, choices=OP_FAMILIES)
    for name in SIZE_ARGS:
        low = 0 if name in ("prior", "window") else 1
        size = int_in(low, MAX_KERNEL_SIZE) if name != "bytes" else float_in(0, MAX_KERNEL_BYTES)
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=size)
    p.add_argument("--dtype", default="bf16", choices=DTYPES)
    p.add_argument("--kv-dtype", dest="kv_dtype", default="bf16", choices=DTYPES)
    p.add_argument("--collective", default="all_reduce", choices=COLLECTIVES)
    p.add_argument("--link", default=None, choices=LINKS)
    _fmt(p)
    p.set_defaults(func=_kernel)

    p = groups["kernels"].add_parser(
        "import", help="import kernel tables from another tool's layout"
    )
    p.add_argument("--format", dest="source_format", choices=("aiconfigurator",), required=True)
    p.add_argument("path", help="a CSV file or a folder of them")
    p.add_argument("--gpu", required=True)
    p.add_argument(
        "--out",
        default=None,
        help="data folder (default: the per-user data folder, "
        "$PLANNER_DATA_DIR or ~/.local/share/llm-serving-planner, /kernels)",
    )
    p.add_argument("--output", dest="format", choices=("table", "json"), default="table")
    p.set_defaults(func=_import)

    p = groups["validate"].add_parser(
        "kernels", help="leave-one-out and fitted-model accuracy of kernel tables"
    )
    p.add_argument(
        "--data", required=True, help="folder of tables (our schema or AIConfigurator layout)"
    )
    _fmt(p)
    p.set_defaults(func=_validate)

    p = groups["calibrate"].add_parser("fit", help="fit efficiency parameters of one GPU to tables")
    p.add_argument("--gpu", required=True)
    p.add_argument("--tables", required=True)
    p.add_argument(
        "--out",
        default=None,
        help="folder for <gpu>.yaml (default: the per-user data "
        "folder, $PLANNER_DATA_DIR or ~/.local/share/llm-serving-planner, /fitted)",
    )
    p.add_argument("--notes", default="")
    _fmt(p)
    p.set_defaults(func=_fit)

    p = groups["calibrate"].add_parser(
        "run", help="measure kernel tables on this machine (needs torch)"
    )
    p.add_argument("--gpu", default="auto", choices=("auto", "cpu"))
    p.add_argument("--ops", default="all", help="comma list of op families, or all")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", required=True)
    _fmt(p)
    p.set_defaults(func=_run)
