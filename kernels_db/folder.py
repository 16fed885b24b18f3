"""Read a folder of kernel tables in our schema or in AIConfigurator's layout (told apart by
columns).

Accepted layouts: ``DIR/<op>.csv`` (one GPU, named by ``meta.yaml``'s ``gpu`` or the folder name),
``DIR/<gpu>/<op>.csv`` (several GPUs), or AIConfigurator CSVs anywhere in ``DIR`` (GPU from their
``source_path``). Other CSVs are listed in ``skipped_files``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hardware.errors import PlannerInputError
from kernels_db import aiconfigurator as aic
from kernels_db.tables import KernelTable, is_our_table, read_meta, read_table, table_from_frame


@dataclass
class TableSet:
    """Tables per GPU key and op family, plus what the reader skipped."""

    tables: dict[str, dict[str, KernelTable]] = field(default_factory=dict)
    sources: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    skipped_files: list[str] = field(default_factory=list)
    skipped_rows: dict[str, int] = field(default_factory=dict)


def _our_gpu_name(folder: Path) -> str:
    return read_meta(folder).get("gpu", folder.name)


def frames_to_tables(imported: aic.Imported, out: TableSet) -> None:
    """Check converted AIConfigurator frames and add them to ``out``."""
    for (gpu, op), df in aic.merged(imported).items():
        files = "+".join(sorted(df["file"].astype(str).unique()))
        out.tables.setdefault(gpu, {})[op] = table_from_frame(df, op, gpu, files)
        out.sources[(gpu, op)] = tuple(sorted(df["source"].astype(str).unique()))
    for reason, n in imported.skipped.items():
        out.skipped_rows[reason] = out.skipped_rows.get(reason, 0) + n


def read_folder(folder: Path, gpu: str | None = None) -> TableSet:
    """All tables under ``folder``; ``gpu`` names the GPU of tables that do not say."""
    if not folder.is_dir():
        raise PlannerInputError("--data", f"{folder} is not a folder")
    out = TableSet()
    imported = aic.Imported()
    for path in sorted(folder.rglob("*.csv")):
        if is_our_table(path):
            name = gpu or _our_gpu_name(path.parent)
            out.tables.setdefault(name, {})[path.stem] = read_table(path, name)
            out.sources[(name, path.stem)] = (str(path),)
        elif not aic.read_file(path, gpu, imported):
            out.skipped_files.append(path.name)
    frames_to_tables(imported, out)
    if not out.tables:
        raise PlannerInputError(
            "--data", f"no kernel tables (our schema or AIConfigurator layout) in {folder}"
        )
    return out


def read_aic_file(path: Path, gpu: str | None) -> dict[tuple[str, str], pd.DataFrame]:
    """One AIConfigurator file converted to frames in our schema, keyed by (gpu, op)."""
    imported = aic.Imported()
    if not aic.read_file(path, gpu, imported):
        raise PlannerInputError(
            "PATH", f"{path}: columns do not match any AIConfigurator table (row 1)"
        )
    return aic.merged(imported)
