"""Read a user's benchmark results into rows of the validation layout (``silicon_measured.csv``).

Three inputs, each read as a regular UTF-8 file of at most ``MAX_BYTES``:

* our validation CSV (the columns of ``../shared/validation/e2e/silicon_measured.csv``, see the
  README's validation section), read as it is;
* ``vllm bench serve --save-result`` JSON (``*.json``: one object, or several, one per line).
  The fields are those of the result dict in vLLM's ``vllm/benchmarks/serve.py``
  (github:vllm-project/vllm @009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): ``model_id``,
  ``num_prompts``, ``request_rate`` (a number or the text ``"inf"``), ``max_concurrency``,
  ``completed``, ``total_input_tokens``, ``total_output_tokens``, ``mean_ttft_ms``,
  ``mean_tpot_ms`` (plus ``median_*``/``p99_*``); other engines' clients derived from it write
  the same fields (their folders under ``planner/engines/`` say which);
* SGLang ``bench_serving --output-file`` JSONL (``*.jsonl``, one object appended per run): the
  ``result`` dict of ``python/sglang/bench_serving.py`` (github:sgl-project/sglang
  @0033168f0f58b2bc05aa0273bd475d9c01bafb1c): ``request_rate`` (``Infinity`` for a closed loop),
  ``max_concurrency``, ``completed``, ``total_input_tokens``, ``total_output_tokens``,
  ``mean_ttft_ms``, ``mean_tpot_ms``; it names no model.

A closed-loop result names its benchmark run: its request count (``num_prompts``, or SGLang's
``completed``) and, where the file says, whether every request had the same lengths; the row
carries them (``bench_requests``, ``fixed_lengths``) and is priced as ``estimate
--bench-requests`` prices that run (``validation.e2e.named_runs``). An SGLang result also says
whether the server ran with ``--enable-mixed-chunk`` (``mixed_chunk``, from its ``server_info``).
A CSV may carry the same three columns; rows without them keep the engine's fitted start-up
share.

A result file needs a ``deployment.json`` sidecar in its own folder (what ``benchmark.sh``
writes): ``{"deployment": <the deployment object of a plan file>, "backend": <an engine's
name>, "engine_version": "..."}``. Every problem is one :class:`PlannerInputError` naming the
file (and line and field where known). Open-loop runs (a finite ``request_rate``) are counted
and skipped: the end-to-end fit replays closed loops.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

import pandas as pd
from pydantic import ValidationError

from planner.engines import engine_names
from planner.errors import PlannerInputError
from planner.model.bundled import load_model
from planner.perf.deployment import Deployment, WorkerConfig
from planner.replay_e2e.layout import REQUIRED_COLUMNS

MAX_BYTES = 256 * 1024 * 1024
"""Largest result or CSV file read (bytes)."""
MAX_FILES = 10_000
"""Most data files taken from one folder."""
SIDECAR = "deployment.json"
RESULT_FIELDS: dict[str, tuple[float, float]] = {
    "completed": (1, 1e9),
    "total_input_tokens": (1, 1e13),
    "total_output_tokens": (1, 1e13),
    "mean_ttft_ms": (1e-3, 1e7),
    "mean_tpot_ms": (1e-3, 1e6),
}
"""Fields every result must carry, with the accepted range (counts, milliseconds)."""
LENGTH_RANGE = (1, 10_000_000)
CONCURRENCY_RANGE = (1, 1_000_000)
GEMM_MODES = {"bf16": "bf16", "fp8": "fp8", "fp4": "nvfp4", "int4": "int4_wo"}
"""Deployment weight dtype -> ``gemm_quant_mode`` of the validation layout."""
REQUESTS_RANGE = (1, 1_000_000_000)
RANDOM_DATASETS = ("random", "random-ids")
"""SGLang ``--dataset-name`` values whose lengths ``random_range_ratio`` sets."""

JsonObject: TypeAlias = dict[str, object]
"""One object of a result file, as ``json`` decodes it (fields checked where read)."""
Cell: TypeAlias = str | int | float | None
Row: TypeAlias = dict[str, Cell]
"""One row of the validation layout (column -> value)."""
Source: TypeAlias = dict[str, str | int]
"""Provenance of one data file (path, sha256, format, rows, ...)."""


@dataclass
class LoadedData:
    """Rows in the validation layout, where each came from, and what was skipped (by reason)."""

    rows: pd.DataFrame
    sources: list[Source] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def read_text(path: Path, what: str, flag: str = "--data") -> str:
    """The text of ``path``: a regular file of at most ``MAX_BYTES``, UTF-8."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise PlannerInputError(flag, f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PlannerInputError(flag, f"{path} is not a regular file; expected {what}")
    if st.st_size > MAX_BYTES:
        cap = f"{MAX_BYTES // 2**20} MB" if MAX_BYTES >= 2**20 else f"{MAX_BYTES} bytes"
        raise PlannerInputError(
            flag, f"{path} is {st.st_size:,} bytes; {what} may be at most {cap}"
        )
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlannerInputError(flag, f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise PlannerInputError(flag, f"cannot read {path}: {exc.strerror or exc}") from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _json_objects(path: Path, text: str) -> list[tuple[int, JsonObject]]:
    """(line, object) of a JSON file or of every non-empty line of a JSON-lines file."""
    try:
        whole = json.loads(text)
        if isinstance(whole, dict):
            return [(1, whole)]
        raise PlannerInputError(
            "--data", f"{path}:1: expected a JSON object, got {type(whole).__name__}"
        )
    except json.JSONDecodeError:
        pass
    out: list[tuple[int, JsonObject]] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PlannerInputError("--data", f"{path}:{no}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise PlannerInputError("--data", f"{path}:{no}: expected a JSON object")
        out.append((no, obj))
    if not out:
        raise PlannerInputError("--data", f"{path}: no result in the file")
    return out


def _number(where: str, obj: JsonObject, key: str, lo: float, hi: float) -> float:
    if key not in obj or obj[key] is None:
        raise PlannerInputError("--data", f"{where}: field '{key}' is missing")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise PlannerInputError(
            "--data", f"{where}: field '{key}' must be a finite number, got {v!r}"
        )
    if not lo <= v <= hi:
        raise PlannerInputError(
            "--data", f"{where}: field '{key}' = {v} is outside [{lo:g}, {hi:g}]"
        )
    return float(v)


@dataclass(frozen=True)
class Sidecar:
    """The deployment a folder's results were measured on."""

    deployment: Deployment
    backend: str
    engine_version: str
    path: Path


def read_sidecar(path: Path, result: Path | None = None) -> Sidecar:
    """``deployment.json``: deployment object, backend and engine version, checked; ``result``:
    the result file it is read for (named when the sidecar is missing)."""
    if not path.exists():
        raise PlannerInputError(
            "--data",
            f"{result or path.parent}: results without a {SIDECAR} sidecar in "
            f"{path.parent} (benchmark.sh writes one next to its results)",
        )
    text = read_text(path, f"a {SIDECAR} sidecar")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerInputError("--data", f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(raw, dict):
        raise PlannerInputError("--data", f"{path}: expected a JSON object")
    for key in ("deployment", "backend", "engine_version"):
        if key not in raw:
            raise PlannerInputError("--data", f"{path}: field '{key}' is missing")
    if raw["backend"] not in engine_names():
        raise PlannerInputError(
            "--data",
            f"{path}: field 'backend' = {raw['backend']!r} is not one of {list(engine_names())}",
        )
    try:
        dep = Deployment.model_validate(raw["deployment"])
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise PlannerInputError(
            "--data", f"{path}: field 'deployment.{loc}': {err['msg']}"
        ) from None
    _check_model(path, dep)
    return Sidecar(dep, str(raw["backend"]), str(raw["engine_version"]), path)


def _check_model(path: Path, dep: Deployment) -> None:
    """The deployment's model resolves, and to the checkpoint its ``hf_id`` names."""
    try:
        spec = load_model(dep.model)
    except PlannerInputError as exc:
        raise PlannerInputError("--data", f"{path}: field 'deployment.model': {exc}") from None
    if dep.hf_id and spec.hf_id and spec.hf_id != dep.hf_id:
        raise PlannerInputError(
            "--data",
            f"{path}: field 'deployment.hf_id' = {dep.hf_id!r} does "
            f"not match the model {dep.model!r} ({spec.hf_id})",
        )
    if (
        dep.mode == "agg"
        and dep.agg is None
        or dep.mode == "disagg"
        and (dep.prefill is None or dep.decode is None)
    ):
        raise PlannerInputError(
            "--data", f"{path}: field 'deployment': mode {dep.mode} without its workers"
        )


def _parallel_columns(prefix: str, w: WorkerConfig) -> Row:
    p = w.parallel
    return {
        f"{prefix}tp_size": p.tp,
        f"{prefix}pp_size": p.pp,
        f"{prefix}attention_dp_size": p.dp,
        f"{prefix}moe_ep_size": p.ep,
    }


def deployment_columns(dep: Deployment, concurrency: float) -> Row:
    """The deployment part of a validation-layout row (workers per role, parallelism, batch)."""
    main = dep.agg if dep.mode == "agg" else dep.decode
    assert main is not None
    cols: Row = {
        "gemm_quant_mode": GEMM_MODES[main.weight_quant],
        "kv_dtype": main.kv_dtype,
        "max_num_seqs": main.max_num_seqs,
    }
    if dep.mode == "agg":
        return cols | {"batch_size": concurrency, **_parallel_columns("", main)}
    pre = dep.prefill
    assert pre is not None
    return cols | {
        "prefill_batch_size": pre.max_num_seqs,
        "prefill_num_workers": pre.workers,
        **_parallel_columns("prefill_", pre),
        "decode_batch_size": main.max_num_seqs,
        "decode_num_workers": main.workers,
        **_parallel_columns("decode_", main),
    }


def _lengths_fixed(obj: JsonObject) -> float:
    """1.0 when every request of the run had the same ISL and OSL, 0.0 when they varied, NaN when
    the result does not say: per-request ``input_lens`` / ``output_lens`` (``vllm bench serve
    --save-detailed``, SGLang ``--output-details``), else SGLang's ``dataset_name`` with
    ``random_range_ratio`` (its random dataset draws lengths from [r*L, L]: 1 is fixed;
    ``sample_random_requests`` in ``bench_serving.py``). vLLM's summary records neither; its
    ``--random-range-ratio`` (default 0) is fixed, and benchmark.sh asks for fixed lengths."""
    ins, outs = obj.get("input_lens"), obj.get("output_lens")
    if isinstance(ins, list) and isinstance(outs, list) and ins and outs:
        return float(len({str(v) for v in ins}) == 1 and len({str(v) for v in outs}) == 1)
    name, ratio = obj.get("dataset_name"), obj.get("random_range_ratio")
    if name is None:
        return math.nan
    if name not in RANDOM_DATASETS:
        return 0.0
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool):
        return float(ratio == 1.0)
    return math.nan


def _mixed_chunk(obj: JsonObject) -> float:
    """1.0 when the SGLang server mixed prefill chunks into decode steps, 0.0 when it did not,
    NaN when the result does not say: SGLang's ``bench_serving.py`` (0.5.6 on) writes the
    server's ``/get_server_info`` answer, every ``ServerArgs`` field, as ``server_info``
    (``srt/entrypoints/http_server.py`` ``server_info``); its ``enable_mixed_chunk`` (default
    False, ``server_args.py``) decides whether decodes run while prompts wait."""
    info = obj.get("server_info")
    flag = info.get("enable_mixed_chunk") if isinstance(info, dict) else None
    return float(flag) if isinstance(flag, bool) else math.nan


def named_run(where: str, obj: JsonObject, concurrency: float) -> Row:
    """``bench_requests`` (the run's requests in all: vLLM's ``num_prompts``, else the
    ``completed`` count SGLang writes instead), ``fixed_lengths`` and ``mixed_chunk`` of a
    closed-loop result: with them ``validation.e2e.predict`` prices the row as the named
    benchmark run, the way ``estimate --bench-requests`` prices it."""
    key = "num_prompts" if obj.get("num_prompts") is not None else "completed"
    runs = _number(where, obj, key, *REQUESTS_RANGE)
    return {
        "bench_requests": max(int(runs), int(concurrency)),
        "fixed_lengths": _lengths_fixed(obj),
        "mixed_chunk": _mixed_chunk(obj),
    }


def result_row(where: str, obj: JsonObject, side: Sidecar) -> Row | str:
    """One validation-layout row from one result object, or the reason it is skipped."""
    dep = side.deployment
    model_id = obj.get("model_id")
    if model_id not in (None, "") and str(model_id) not in (dep.hf_id, dep.model):
        raise PlannerInputError(
            "--data",
            f"{where}: field 'model_id' = {model_id!r} does not "
            f"match the deployment in {side.path} ({dep.hf_id or dep.model})",
        )
    rate = obj.get("request_rate", "inf")
    if rate not in ("inf", None) and not (isinstance(rate, float) and math.isinf(rate)):
        return "open_loop_run"
    if obj.get("max_concurrency") is None:
        raise PlannerInputError(
            "--data",
            f"{where}: field 'max_concurrency' is missing (a "
            "closed-loop run needs --max-concurrency)",
        )
    conc = _number(where, obj, "max_concurrency", *CONCURRENCY_RANGE)
    vals = {k: _number(where, obj, k, *r) for k, r in RESULT_FIELDS.items()}
    isl, osl = (round(vals[f"total_{k}_tokens"] / vals["completed"]) for k in ("input", "output"))
    for name, v in (("input", isl), ("output", osl)):
        if not LENGTH_RANGE[0] <= v <= LENGTH_RANGE[1]:
            raise PlannerInputError(
                "--data", f"{where}: mean {name} length {v} tokens is outside {list(LENGTH_RANGE)}"
            )
    source = f"{where}; silicon_concurrency={int(conc)}; num_prompts={obj.get('num_prompts', '')}"
    return {
        "id": where,
        "silicon_data_source": source,
        "campaign": str(side.path.parent),
        "backend": side.backend,
        "backend_version": side.engine_version,
        "model_path": dep.model,
        "model_id": dep.hf_id,
        "system": dep.gpu,
        "mode": dep.mode,
        "isl": isl,
        "osl": osl,
        "concurrency": float(int(conc)),  # the clients the replay runs (planner.replay_e2e.layout)
        **deployment_columns(dep, conc),
        **named_run(where, obj, conc),
        # isl / osl above are the run's mean lengths already: no harness reading of them
        "length_low_fraction": 1.0,
        "silicon_ttft_ms": vals["mean_ttft_ms"],
        "silicon_tpot_ms": vals["mean_tpot_ms"],
    }


def read_results(path: Path, side: Sidecar, data: LoadedData) -> list[Row]:
    """Rows of one native result file (``.json``: ``--save-result`` JSON, ``.jsonl``: JSON
    lines)."""
    text = read_text(path, "a benchmark result file")
    objs = _json_objects(path, text)
    rows = []
    for line, obj in objs:
        row = result_row(f"{path}:{line}", obj, side)
        if isinstance(row, str):
            data.skipped[row] = data.skipped.get(row, 0) + 1
        else:
            rows.append(row)
    fmt = "sglang bench_serving JSONL" if path.suffix == ".jsonl" else "vllm bench serve JSON"
    data.sources.append(
        {
            "file": str(path),
            "sha256": _digest(text),
            "format": fmt,
            "sidecar": str(side.path),
            "backend": side.backend,
            "engine_version": side.engine_version,
            "rows": len(rows),
        }
    )
    return rows


OPTIONAL_RANGES = {
    "bench_requests": REQUESTS_RANGE,
    "fixed_lengths": (0, 1),
    "mixed_chunk": (0, 1),
    "length_low_fraction": (0, 1),
}
"""Optional CSV columns naming each row's benchmark run (``validation.e2e.named_runs``,
``validation.e2e.length_low_fractions``); empty cells: not named / not known."""
FLAG_COLUMNS = ("fixed_lengths", "mixed_chunk")
"""Optional columns that take 0 or 1 only."""


def _check_run_columns(path: Path, df: pd.DataFrame) -> None:
    for col, (lo, hi) in OPTIONAL_RANGES.items():
        if col not in df:
            continue
        num = pd.to_numeric(df[col], errors="coerce")
        bad = (df[col].notna() & num.isna()) | (num < lo) | (num > hi)
        if col in FLAG_COLUMNS:
            bad |= num.notna() & ~num.isin([0, 1])
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise PlannerInputError(
                "--data",
                f"{path}:{i + 2}:{col}: expected empty or a number in [{lo:g}, {hi:g}]"
                + (" (0 or 1)" if col in FLAG_COLUMNS else "")
                + f", got {df[col].iloc[i]!r}",
            )


def read_csv_rows(path: Path, data: LoadedData) -> pd.DataFrame:
    """A validation-layout CSV, its required columns and numbers checked (``file:line:field``)."""
    text = read_text(path, "a measurement CSV")
    try:
        df = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise PlannerInputError("--data", f"{path}: not a CSV ({exc})") from None
    missing = sorted(set(REQUIRED_COLUMNS) - set(df.columns))
    if missing:
        raise PlannerInputError(
            "--data", f"{path}: lacks columns {missing} (the layout of silicon_measured.csv)"
        )
    for col in ("isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"):
        num = pd.to_numeric(df[col], errors="coerce")
        bad = ~(num.abs() < 1e9) | (num <= 0)
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise PlannerInputError(
                "--data",
                f"{path}:{i + 2}:{col}: expected a positive finite number, got {df[col].iloc[i]!r}",
            )
    _check_run_columns(path, df)
    df = df.assign(campaign=f"{path}")
    data.sources.append(
        {
            "file": str(path),
            "sha256": _digest(text),
            "format": "validation CSV",
            "rows": int(len(df)),
        }
    )
    return df


def _data_files(root: Path) -> list[Path]:
    if not root.exists():
        raise PlannerInputError("--data", f"{root} does not exist")
    if not root.is_dir():
        if root.suffix not in (".json", ".jsonl", ".csv"):
            raise PlannerInputError(
                "--data",
                f"{root}: expected a results folder, a .json / .jsonl result file or a .csv",
            )
        return [root]
    files = sorted(
        p
        for p in root.rglob("*")
        if p.suffix in (".json", ".jsonl", ".csv")
        and p.name != SIDECAR
        and not p.name.startswith(".")
    )
    if not files:
        raise PlannerInputError("--data", f"{root}: no result files (*.json, *.jsonl, *.csv)")
    if len(files) > MAX_FILES:
        raise PlannerInputError("--data", f"{root}: {len(files)} data files; at most {MAX_FILES}")
    return files


def load_data(root: Path, backend: str | None = None) -> LoadedData:
    """Every row under ``root`` (a file or a folder), optionally of one backend only."""
    data = LoadedData(rows=pd.DataFrame())
    frames: list[pd.DataFrame] = []
    sidecars: dict[Path, Sidecar] = {}
    for path in _data_files(root):
        if path.suffix == ".csv":
            frames.append(read_csv_rows(path, data))
            continue
        side = sidecars.get(path.parent) or read_sidecar(path.parent / SIDECAR, path)
        sidecars[path.parent] = side
        frames.append(pd.DataFrame(read_results(path, side, data)))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if backend is not None and len(rows):
        rows = rows[rows["backend"] == backend].reset_index(drop=True)
    if not len(rows):
        raise PlannerInputError(
            "--data",
            f"{root}: no closed-loop rows"
            + (f" of backend {backend}" if backend else "")
            + (f" (skipped: {data.skipped})" if data.skipped else ""),
        )
    data.rows = rows
    return data
