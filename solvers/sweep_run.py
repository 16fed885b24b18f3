"""Run a sweep's scenarios on Dask, writing each row as it finishes, and resume after interruption.

Rows go to a journal next to the results file (``FILE.partial.jsonl``, one JSON row per line,
flushed per row) while the sweep runs; when every scenario has a row the results file (CSV or
Parquet, ordered by scenario) is written atomically and the journal removed. ``--resume`` reads the
journal (a torn last line is ignored) and an existing results file and skips their scenario ids.
Scenarios run on a ``distributed.LocalCluster`` of this machine's cores, or on an existing cluster
through its scheduler address (``dask scheduler`` / ``dask worker`` with this package installed).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hardware.errors import PlannerInputError
from planner.safe_files import check_out_path, csv_cell, write_new_file
from solvers.sweep import COLUMNS, Scenario, run_scenario

if TYPE_CHECKING:
    from distributed import Client

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A CSV cell starting with one of these is read as a formula by spreadsheets; it gets a quote."""


def journal_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial.jsonl")


def check_paths(out: str, resume: bool, force: bool) -> Path:
    """The results path; an existing results file or journal is refused unless --resume/--force."""
    p = check_out_path("--out", out)
    if p.suffix.lower() not in (".csv", ".parquet"):
        raise PlannerInputError("--out", f"{out!r}: expected a .csv or .parquet file name")
    j = journal_path(p)
    for q in (p, j):
        if q.is_symlink() and not force:
            raise PlannerInputError(
                "--out", f"{str(q)!r} is a symbolic link (pass --force to replace it)"
            )
        if q.exists() and not (resume or force):
            raise PlannerInputError(
                "--out",
                f"{str(q)!r} exists (pass --resume to continue that sweep "
                "or --force to start again)",
            )
    if force and not resume:
        for q in (p, j):
            q.unlink(missing_ok=True)
    return p


def _read_journal(j: Path) -> Iterator[dict[str, object]]:
    if not j.exists():
        return
    with j.open() as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by the interruption: that scenario runs again
            if isinstance(row, dict) and "scenario_id" in row:
                yield row


def _read_results(p: Path) -> list[dict[str, object]]:
    if not p.exists():
        return []
    import pandas as pd

    df = pd.read_parquet(p) if p.suffix.lower() == ".parquet" else pd.read_csv(p, dtype=str)
    if "scenario_id" not in df.columns:
        raise PlannerInputError(
            "--out", f"{str(p)!r} is not a sweep results file (no scenario_id column)"
        )
    return [_clean(r) for r in df.to_dict("records")]


def _clean(row: dict[str, object]) -> dict[str, object]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }


def finished_rows(out: Path) -> dict[str, dict[str, object]]:
    """Rows already written for ``out`` (results file, then journal), by scenario id."""
    rows = {str(r["scenario_id"]): r for r in _read_results(out)}
    rows.update({str(r["scenario_id"]): r for r in _read_journal(journal_path(out))})
    return rows


def _cell(v: object) -> object:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, str) and v.startswith(FORMULA_START):
        return "'" + v
    return v


def _index(row: dict[str, object]) -> int:
    """A row's scenario index (an int in the journal and parquet, text in a CSV)."""
    v = row["index"]
    if not isinstance(v, int | float | str):
        raise PlannerInputError("--out", f"scenario index {v!r} is not a number")
    return int(v)


def results_bytes(rows: list[dict[str, object]], suffix: str) -> bytes:
    """The results file: one row per scenario in scenario order, the COLUMNS in order."""
    rows = sorted(rows, key=_index)
    if suffix == ".parquet":
        import pandas as pd

        buf = io.BytesIO()
        frame = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
        frame.to_parquet(buf, index=False)
        return buf.getvalue()
    text = io.StringIO()
    w = csv.writer(text, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([csv_cell(_cell(r.get(c))) for c in COLUMNS])
    return text.getvalue().encode()


@dataclass
class Progress:
    """One status line on stderr: done/total, infeasible and failed counts, elapsed and ETA."""

    total: int
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    infeasible: int = 0
    failed: int = 0
    t0: float = field(default_factory=time.perf_counter)
    _last: float = 0.0

    def add(self, row: dict[str, object]) -> None:
        self.done += 1
        self.infeasible += row.get("status") == "infeasible"
        self.failed += row.get("status") == "error"
        now = time.perf_counter()
        if now - self._last >= 1.0 or self.done == self.total:
            self._last = now
            self.stream.write(self.line(now) + "\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        el = now - self.t0
        eta = el / self.done * (self.total - self.done) if self.done else float("nan")
        return (
            f"sweep: {self.done}/{self.total} scenarios ({self.infeasible} infeasible, "
            f"{self.failed} failed), {el:.1f} s elapsed, ETA {eta:.1f} s"
        )


def _client(scheduler: str | None, workers: int) -> Client:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise PlannerInputError(
            "planner sweep", "needs Dask: pip install '.[sweep]' (dask[distributed])"
        ) from None
    if scheduler:
        try:
            return Client(scheduler, timeout="15s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise PlannerInputError("--scheduler", f"cannot reach {scheduler}: {exc}") from None
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    return Client(cluster)


def _run(
    client: Client, todo: list[Scenario], journal: Path, progress: Progress
) -> list[dict[str, object]]:
    from distributed import as_completed

    futures = client.map(run_scenario, todo, pure=False)
    by_key = {f.key: s for f, s in zip(futures, todo, strict=True)}
    rows = []
    with journal.open("a") as fh:
        for fut in as_completed(futures):
            try:
                row = fut.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one scenario, not the sweep
                row = _failed(by_key[fut.key], exc)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            rows.append(row)
            progress.add(row)
    return rows


def _failed(s: Scenario, exc: BaseException) -> dict[str, object]:
    row: dict[str, object] = {c: None for c in COLUMNS}
    row |= {
        "index": s.index,
        "scenario_id": s.scenario_id,
        "model": s.request["model"],
        "gpu_set": s.gpu_set,
        "workload": s.workload,
        "slo": s.slo,
        "status": "error",
        "reason": f"{type(exc).__name__}: {exc}".splitlines()[0],
    }
    return row


def run_sweep(
    all_scenarios: list[Scenario],
    out: Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    resume: bool = False,
) -> dict[str, object]:
    """Run the scenarios not yet finished, write the results file at the end; returns counts."""
    done = finished_rows(out) if resume else {}
    ids = {s.scenario_id for s in all_scenarios}
    todo = [s for s in all_scenarios if s.scenario_id not in done]
    progress = Progress(total=len(todo))
    rows = [r for k, r in done.items() if k in ids]
    if todo:
        client = _client(scheduler, workers or os.cpu_count() or 1)
        try:
            rows += _run(client, todo, journal_path(out), progress)
        finally:
            client.close()
            if not scheduler and client.cluster is not None:
                client.cluster.close()
    write_new_file(out, results_bytes(rows, out.suffix.lower()), force=True)
    journal_path(out).unlink(missing_ok=True)
    status = [str(r.get("status")) for r in rows]
    return {
        "scenarios": len(all_scenarios),
        "ran": len(todo),
        "skipped": len(all_scenarios) - len(todo),
        "ok": status.count("ok"),
        "infeasible": status.count("infeasible"),
        "failed": status.count("error"),
        "seconds": round(time.perf_counter() - progress.t0, 2),
    }
