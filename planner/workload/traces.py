"""Time-stamped request traces: reading, checking, writing.

Two layouts are read as they are, told apart by their header:

* ours: ``arrival_s,isl,osl`` (seconds since any origin, prompt and answer tokens; other columns
  are ignored). A header ``isl,osl`` without times is accepted where only lengths matter
  (``planner estimate --trace``).
* BurstGPT (Wang et al., "BurstGPT: A Real-world Workload Dataset to Optimize LLM Serving
  Systems", 2024; github.com/HPMLL/BurstGPT): ``Timestamp, Model, Request tokens, Response tokens,
  Total tokens, Log Type``. Its failed requests have 0 response tokens; such rows are kept as
  arrivals with the token count raised to 1 (counted in ``Trace.zero_token_rows``).
* Mooncake's JSON lines (``timestamp`` ms, ``input_length``, ``output_length``, ``hash_ids``),
  told apart by a first character ``{``; parsed in :mod:`planner.workload.mooncake`.

Ours may add ``hash_ids`` (KV block ids separated by spaces, Mooncake's meaning) and ``session``
columns: prefix reuse for :mod:`planner.perf.prefix_cache`.

Reading is checked at the boundary: a regular file of at most ``MAX_TRACE_BYTES``, UTF-8, every
row's times and token counts finite, tokens whole and not negative, times not negative and sorted.
A problem is one :class:`PlannerInputError` naming ``file:line:field`` and what is allowed.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hardware.errors import PlannerInputError
from planner.safe_files import check_new_file, write_new_file
from planner.workload import mooncake
from planner.workload.mooncake import PrefixBlocks
from planner.workload.spec import LengthSpec

MAX_TRACE_BYTES = 10**9
"""Largest trace file read (1 GB, about 40 million rows of ``arrival_s,isl,osl``)."""
MAX_TOKENS = 10**7
"""Largest prompt or answer length accepted, tokens (beyond any served context window)."""
OURS = ("arrival_s", "isl", "osl")
BURSTGPT = ("Timestamp", "Request tokens", "Response tokens")
"""BurstGPT columns read; ``Model``, ``Total tokens`` and ``Log Type`` are present but not used."""
BURSTGPT_ALL = (
    "Timestamp",
    "Model",
    "Request tokens",
    "Response tokens",
    "Total tokens",
    "Log Type",
)


@dataclass(frozen=True)
class Trace:
    """One request per entry, sorted by arrival time."""

    arrival_s: np.ndarray
    """Arrival times, seconds (float64, non-decreasing)."""
    isl: np.ndarray
    """Prompt tokens (int64, >= 1)."""
    osl: np.ndarray
    """Answer tokens (int64, >= 1)."""
    source: str = ""
    """File name or generator description."""
    layout: str = "ours"
    """``ours``, ``burstgpt``, ``mooncake``, ``lengths`` (no times) or ``synthetic``."""
    zero_token_rows: int = 0
    """BurstGPT rows whose 0 tokens were raised to 1 (failed requests)."""
    blocks: PrefixBlocks | None = None
    """Every request's KV block ids (Mooncake ``hash_ids``); None when the trace has none."""
    session: np.ndarray | None = None
    """Session number of every request (int64); None without a session column."""

    def __len__(self) -> int:
        return int(self.isl.shape[0])

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last arrival."""
        return float(self.arrival_s[-1] - self.arrival_s[0]) if len(self) else 0.0

    @property
    def timed(self) -> bool:
        return self.layout != "lengths"

    def take(self, keep: np.ndarray) -> Trace:
        """The requests selected by ``keep`` (a boolean mask), blocks and sessions included."""
        return dataclasses.replace(
            self,
            arrival_s=self.arrival_s[keep],
            isl=self.isl[keep],
            osl=self.osl[keep],
            blocks=None if self.blocks is None else self.blocks.take(keep),
            session=None if self.session is None else self.session[keep],
        )


def _check_file(path: Path, field: str) -> bytes:
    """The bytes of a regular file of at most MAX_TRACE_BYTES."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise PlannerInputError(field, f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PlannerInputError(field, f"{path} is not a regular file")
    if st.st_size > MAX_TRACE_BYTES:
        raise PlannerInputError(
            field, f"{path} is {st.st_size:,} bytes; at most {MAX_TRACE_BYTES:,}"
        )
    with open(path, "rb") as fh:
        return fh.read(MAX_TRACE_BYTES + 1)


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PlannerInputError(f"{path}:{line}", "not UTF-8 text") from None


def _header(lines: list[str], path: Path) -> tuple[str, dict[str, int]]:
    if not lines:
        raise PlannerInputError(
            str(path), "empty file; expected a header arrival_s,isl,osl and rows"
        )
    names = [c.strip() for c in next(csv.reader([lines[0]]))]
    cols = {n: i for i, n in enumerate(names)}
    for layout, need in (("ours", OURS), ("burstgpt", BURSTGPT), ("lengths", ("isl", "osl"))):
        if all(n in cols for n in need):
            return layout, {n: cols[n] for n in need}
    raise PlannerInputError(
        f"{path}:1",
        f"header {','.join(names)[:80]!r} has neither arrival_s,isl,osl "
        f"nor BurstGPT's {', '.join(BURSTGPT_ALL)}",
    )


def _column(cells: list[str], lines: np.ndarray, name: str, path: Path) -> np.ndarray:
    """Cells as float64; a blank, non-numeric or non-finite cell names its line."""
    try:
        vals = np.array(cells, dtype=float)
    except ValueError:
        vals = np.full(len(cells), np.nan)
        for i, c in enumerate(cells):
            try:
                vals[i] = float(c)
            except ValueError:
                raise PlannerInputError(
                    f"{path}:{lines[i]}:{name}", f"{c.strip()[:40]!r} is not a number"
                ) from None
    bad = np.flatnonzero(~np.isfinite(vals))
    if bad.size:
        raise PlannerInputError(
            f"{path}:{lines[bad[0]]}:{name}",
            f"{cells[bad[0]].strip()[:40]!r} is not a finite number",
        )
    return vals


def _tokens(vals: np.ndarray, lines: np.ndarray, name: str, path: Path, low: int) -> np.ndarray:
    for mask, what in (
        (vals < low, f"must be >= {low}"),
        (vals != np.round(vals), "must be a whole number of tokens"),
        (vals > MAX_TOKENS, f"must be <= {MAX_TOKENS:,}"),
    ):
        bad = np.flatnonzero(mask)
        if bad.size:
            raise PlannerInputError(f"{path}:{lines[bad[0]]}:{name}", f"{vals[bad[0]]:g} {what}")
    return vals.astype(np.int64)


def _times(t: np.ndarray, lines: np.ndarray, name: str, path: Path) -> np.ndarray:
    neg = np.flatnonzero(t < 0)
    if neg.size:
        raise PlannerInputError(
            f"{path}:{lines[neg[0]]}:{name}", f"{t[neg[0]]:g} is negative; times are seconds >= 0"
        )
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = back[0] + 1
        raise PlannerInputError(
            f"{path}:{lines[i]}:{name}",
            f"{t[i]:g} is before the previous row's {t[i - 1]:g}; sort the trace by {name}",
        )
    return t


def _uniform(body: str, width: int) -> int:
    """Rows of an unquoted body whose every line has ``width`` fields (0 when it is not one)."""
    if not body or '"' in body or "\n\n" in body or "\r" in body:
        return 0
    b = np.frombuffer(body.encode("utf-8"), dtype=np.uint8)
    ends = np.flatnonzero(b == 10)
    commas = np.cumsum(b == 44)
    per_line = np.diff(np.concatenate([[0], commas[ends], [commas[-1]]]))
    if b[-1] == 10:
        per_line = per_line[:-1]
    return int(per_line.size) if np.all(per_line == width - 1) else 0


def _table(text: str, path: Path, width: int) -> tuple[list[list[str]], np.ndarray]:
    """Data columns (blank lines skipped) and the 1-based line number of every row; a short row
    names its line. Unquoted files of uniform rows split at commas directly (a 1,000,000-row
    trace in about a second); others go through the csv module."""
    body = text.split("\n", 1)[1] if "\n" in text else ""
    n = _uniform(body, width)
    if n:
        flat = body.rstrip("\n").replace("\n", ",").split(",")
        return [flat[i::width] for i in range(width)], np.arange(2, n + 2)
    lines = body.splitlines()
    numbers = [i + 2 for i, line in enumerate(lines) if line.strip()]
    if not numbers:
        raise PlannerInputError(str(path), "no requests: the file has a header but no rows")
    parsed = list(csv.reader([lines[k - 2] for k in numbers]))
    short = [k for k, r in enumerate(parsed) if len(r) < width]
    if short:
        raise PlannerInputError(
            f"{path}:{numbers[short[0]]}", f"{len(parsed[short[0]])} fields; the header has {width}"
        )
    return [[r[i] for r in parsed] for i in range(width)], np.array(numbers)


def _select(
    table: list[list[str]], nums: np.ndarray, header: list[str], where: tuple[str, ...], path: Path
) -> tuple[list[list[str]], np.ndarray]:
    """Rows whose cells equal every ``COLUMN=VALUE`` of ``where`` (surrounding spaces ignored)."""
    keep = np.ones(nums.size, dtype=bool)
    for cond in where:
        col, sep, value = cond.partition("=")
        if not sep or col.strip() not in header:
            raise PlannerInputError(
                "--trace-where",
                f"{cond!r}: expected COLUMN=VALUE with a column of {path.name}: "
                f"{', '.join(header)}",
            )
        cells = np.array([c.strip() for c in table[header.index(col.strip())]])
        keep &= cells == value.strip()
    if not keep.any():
        raise PlannerInputError("--trace-where", f"no row of {path} matches {' and '.join(where)}")
    idx = np.flatnonzero(keep)
    return [[c[i] for i in idx] for c in table], nums[idx]


def read_trace(
    path: str | Path,
    *,
    need_times: bool = True,
    field: str = "--trace",
    where: tuple[str, ...] = (),
) -> Trace:
    """Read and check a trace (see module docstring); ``need_times=False`` reads the lengths only
    (any layout, ``isl,osl`` included; the trace's times are ignored). ``where``: keep only rows
    with ``COLUMN=VALUE`` (e.g. BurstGPT's ``Log Type=API log`` or ``Model=ChatGPT``)."""
    path = Path(path)
    text = _decode(_check_file(path, field), path)
    if mooncake.is_jsonl(text):
        return _jsonl(text, path, need_times, where)
    lines = text.split("\n", 1)[:1] if text.strip() else []
    layout, cols = _header([ln.rstrip("\r") for ln in lines], path)
    if need_times and layout == "lengths":
        raise PlannerInputError(
            f"{path}:1",
            "no arrival_s column; a timed trace needs arrival_s,isl,osl "
            "(or BurstGPT's Timestamp, Request tokens, Response tokens)",
        )
    header = [c.strip() for c in next(csv.reader([lines[0].rstrip("\r")]))]
    table, nums = _table(text, path, len(header))
    if where:
        table, nums = _select(table, nums, header, where, path)
    names = list(cols)
    t_name, i_name, o_name = names if layout != "lengths" else ("", *names)
    low = 0 if layout == "burstgpt" else 1
    isl = _tokens(_column(table[cols[i_name]], nums, i_name, path), nums, i_name, path, low)
    osl = _tokens(_column(table[cols[o_name]], nums, o_name, path), nums, o_name, path, low)
    zeros = int(np.count_nonzero((isl == 0) | (osl == 0)))
    if t_name and need_times:
        t = _times(_column(table[cols[t_name]], nums, t_name, path), nums, t_name, path)
    else:  # lengths only: times are neither read nor checked
        t, layout = np.zeros(nums.size), "lengths"
    blocks = session = None
    if "hash_ids" in header:
        blocks = mooncake.parse_hash_cells(table[header.index("hash_ids")], isl, nums, path)
    if "session" in header:
        session = mooncake.session_codes(table[header.index("session")])
    return Trace(
        t,
        np.maximum(isl, 1),
        np.maximum(osl, 1),
        source=path.name,
        layout=layout,
        zero_token_rows=zeros,
        blocks=blocks,
        session=session,
    )


def _jsonl(text: str, path: Path, need_times: bool, where: tuple[str, ...]) -> Trace:
    """A Mooncake JSON-lines trace (``--trace-where`` has no columns to select on there)."""
    if where:
        raise PlannerInputError("--trace-where", f"{path} is JSON lines; it has no columns")
    rows = mooncake.parse_jsonl(text, path)
    return Trace(
        rows.arrival_s if need_times else np.zeros(rows.isl.size),
        rows.isl,
        rows.osl,
        source=path.name,
        layout="mooncake" if need_times else "lengths",
        blocks=rows.blocks,
        session=rows.session,
    )


def check_out(path: str | Path, force: bool, field: str = "--out") -> Path:
    """An output path we may write (``planner.safe_files``): never a link or a folder, no
    existing file unless ``force``, in an existing folder."""
    path = Path(path)
    if path.is_symlink():
        raise PlannerInputError(field, f"{path} is a symbolic link; refusing to write through it")
    if not path.parent.is_dir():
        raise PlannerInputError(field, f"folder {path.parent} does not exist")
    check_new_file(path, force, field)
    return path


def write_bytes(
    path: str | Path, data: bytes, *, force: bool = False, field: str = "--out"
) -> Path:
    """Write ``data`` whole through a fresh temporary file and a rename (no link followed)."""
    return write_new_file(check_out(path, force, field), data, force, field)


def write_text(path: str | Path, text: str, *, force: bool = False, field: str = "--out") -> Path:
    """Write UTF-8 ``text`` whole, after ``check_out``."""
    return write_bytes(path, text.encode("utf-8"), force=force, field=field)


def write_trace(trace: Trace, path: str | Path, *, force: bool = False) -> Path:
    """Write ``arrival_s,isl,osl`` (times to the microsecond) whole, after ``check_out``."""
    body = np.column_stack([trace.arrival_s, trace.isl, trace.osl])
    buf = io.BytesIO()
    np.savetxt(
        buf, body, fmt=("%.6f", "%d", "%d"), delimiter=",", header=",".join(OURS), comments=""
    )
    return write_bytes(path, buf.getvalue(), force=force)


def trace_lengths(path: str | Path, field: str = "--trace") -> tuple[LengthSpec, LengthSpec]:
    """ISL and OSL of any trace layout (times ignored): ``planner estimate --trace``."""
    t = read_trace(path, need_times=False, field=field)
    return (
        LengthSpec(mean=float(np.mean(t.isl)), samples=tuple(int(v) for v in t.isl)),
        LengthSpec(mean=float(np.mean(t.osl)), samples=tuple(int(v) for v in t.osl)),
    )
