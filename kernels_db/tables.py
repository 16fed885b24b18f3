"""Read and check kernel tables in our schema (``kernels_db.schema``) into numpy-backed records.

Pandas appears only here, at the file edge. A bad table (missing column, NaN, negative latency,
duplicate key) raises ``PlannerInputError`` naming the file and the row (CSV line number).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from hardware.errors import PlannerInputError
from hardware.input_files import read_csv, read_yaml
from hardware.spec import DTYPES
from kernels_db import paths
from kernels_db.schema import (
    COLLECTIVES,
    LATENCY_COLUMN,
    LINKS,
    OP_FAMILIES,
    OP_KEYS,
    STRING_COLUMNS,
    columns,
)


@dataclass(frozen=True)
class KernelTable:
    """Measured latencies of one op family on one GPU.

    ``keys`` maps each key column of ``OP_KEYS[op]`` to an array (int64 sizes or str categories);
    ``latency_s`` is seconds; ``lines`` is the CSV line of each row (for messages); ``origins`` is
    where each row was measured (the optional ``source`` column, else the file), which
    ``kernels_db.harness`` reads to price what a benchmark harness did.
    """

    op: str
    gpu: str
    keys: dict[str, np.ndarray]
    latency_s: np.ndarray
    source: str
    lines: np.ndarray
    origins: np.ndarray | None = None

    def row_origins(self) -> np.ndarray:
        """Where each row was measured (``origins``, else the table's ``source`` for every row)."""
        if self.origins is not None:
            return self.origins
        return np.full(len(self), self.source, dtype=object)

    def __len__(self) -> int:
        return int(self.latency_s.size)

    def without(self, index: int) -> KernelTable:
        """The same table less row ``index`` (for leave-one-out)."""
        keep = np.ones(len(self), dtype=bool)
        keep[index] = False
        return self.subset(keep)

    def subset(self, mask: np.ndarray) -> KernelTable:
        """Rows where ``mask`` is true."""
        return KernelTable(
            self.op,
            self.gpu,
            {k: v[mask] for k, v in self.keys.items()},
            self.latency_s[mask],
            self.source,
            self.lines[mask],
            None if self.origins is None else self.origins[mask],
        )


def _row_error(source: str, line: int, message: str) -> PlannerInputError:
    return PlannerInputError("kernel table", f"{source} row {line}: {message}")


def plain(value: object) -> object:
    """A numpy scalar as the Python value it holds (messages show 5, not np.int64(5))."""
    return value.item() if isinstance(value, np.generic) else value


ALLOWED_STRINGS: dict[str, tuple[str, ...]] = {
    "dtype": DTYPES,
    "kv_dtype": DTYPES,
    "collective": COLLECTIVES,
    "link": LINKS,
}
"""The values a string key column may take (``kernels_db.schema``)."""
MAX_KEY = float(2**53)
"""Largest size or count a kernel table may hold: every integer up to it is exact as a float and
fits the int64 keys (a larger one is a corrupt or hostile cell, not a kernel shape)."""
ZERO_KEYS = frozenset({"prior", "window"})
"""Keys that may be 0 (no cached prefix, no sliding window); every other size or count is at
least 1 (a GEMM with n = 0 divided by zero in the fit's working-set share)."""


def _check_values(df: pd.DataFrame, op: str, source: str, lines: np.ndarray) -> None:
    for col in columns(op):
        bad = df[col].isna().to_numpy()
        if bad.any():
            raise _row_error(source, int(lines[bad.argmax()]), f"column '{col}' is empty or NaN")
    lat = pd.to_numeric(df[LATENCY_COLUMN], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(lat) | (lat <= 0)
    if bad.any():
        i = int(bad.argmax())
        got = plain(df[LATENCY_COLUMN].iloc[i])
        raise _row_error(source, int(lines[i]), f"latency_s must be a positive number, got {got}")
    for col in OP_KEYS[op]:
        if col in STRING_COLUMNS:
            allowed = ALLOWED_STRINGS[col]
            bad = ~df[col].astype(str).isin(allowed).to_numpy()
            if bad.any():
                i = int(bad.argmax())
                raise _row_error(
                    source,
                    int(lines[i]),
                    f"'{col}' must be one of {', '.join(allowed)}, got {plain(df[col].iloc[i])!r}",
                )
            continue
        vals = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        low = 0.0 if col in ZERO_KEYS else 1.0
        bad = ~np.isfinite(vals) | (vals < low) | (vals > MAX_KEY) | (vals != np.round(vals))
        if bad.any():
            i = int(bad.argmax())
            got = plain(df[col].iloc[i])
            raise _row_error(
                source,
                int(lines[i]),
                f"'{col}' must be an integer in [{low:.0f}, 2^53], got {got}",
            )
    dup = df.duplicated(subset=list(OP_KEYS[op]), keep="first").to_numpy()
    if dup.any():
        i = int(dup.argmax())
        key = tuple(plain(v) for v in df[list(OP_KEYS[op])].iloc[i])
        raise _row_error(source, int(lines[i]), f"duplicate key {key}")


def table_from_frame(df: pd.DataFrame, op: str, gpu: str, source: str) -> KernelTable:
    """Check ``df`` (columns of ``schema.columns(op)``) and turn it into a ``KernelTable``."""
    if op not in OP_FAMILIES:
        raise PlannerInputError("op", f"unknown op family '{op}'; known: {', '.join(OP_FAMILIES)}")
    missing = [c for c in columns(op) if c not in df.columns]
    if missing:
        raise PlannerInputError(
            "kernel table", f"{source}: missing column(s) {', '.join(missing)} (row 1)"
        )
    # an imported frame carries the CSV line of each input row; a table read as is, its position
    lines = df["line"].to_numpy() if "line" in df.columns else np.arange(len(df)) + 2
    _check_values(df, op, source, lines)
    keys = {
        c: (
            df[c].astype(str).to_numpy(dtype=object)
            if c in STRING_COLUMNS
            else df[c].to_numpy(dtype=np.int64)
        )
        for c in OP_KEYS[op]
    }
    lat = df[LATENCY_COLUMN].to_numpy(dtype=float)
    origins = df["source"].astype(str).to_numpy(dtype=object) if "source" in df.columns else None
    return KernelTable(op, gpu, keys, lat, source, lines, origins)


def read_table(path: Path, gpu: str) -> KernelTable:
    """Read ``<op>.csv`` in our schema."""
    df = read_csv(path, "kernel CSV", "kernel table")
    return table_from_frame(df, path.stem, gpu, str(path))


def is_our_table(path: Path) -> bool:
    """True when ``path`` is named after an op family and has that family's columns."""
    if path.stem not in OP_FAMILIES:
        return False
    head = read_csv(path, "kernel CSV", "kernel table", nrows=0).columns
    return all(c in head for c in OP_KEYS[path.stem])


def read_gpu_folder(folder: Path, gpu: str) -> dict[str, KernelTable]:
    """All tables in ``folder`` (one GPU), keyed by op family."""
    return {
        p.stem: read_table(p, gpu) for p in sorted(folder.glob("*.csv")) if p.stem in OP_FAMILIES
    }


def write_table(df: pd.DataFrame, path: Path) -> None:
    """Write a table in our schema (columns in schema order, then optional ones)."""
    op = path.stem
    table_from_frame(df, op, path.parent.name, str(path))  # refuse to write what we could not read
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = [c for c in df.columns if c not in columns(op)]
    df[[*columns(op), *extra]].to_csv(path, index=False)


def write_meta(folder: Path, meta: dict[str, str]) -> None:
    """Write ``meta.yaml`` (GPU, driver, library versions, date, tool, kernel_source, git SHA)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / paths.META_FILE).write_text(yaml.safe_dump(meta, sort_keys=False))


def read_meta(folder: Path) -> dict[str, str]:
    """``meta.yaml`` of a table folder, or an empty mapping when absent."""
    path = folder / paths.META_FILE
    if not path.is_file():
        return {}
    raw = read_yaml(path, "GPU YAML", "kernel table") or {}
    if not isinstance(raw, dict):
        raise PlannerInputError("kernel table", f"{path} must hold a mapping")
    return {str(k): str(v) for k, v in raw.items()}
