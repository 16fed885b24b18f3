"""Replay MLPerf Inference LLM result tables (columns of ``mlperf_v4.1_llm.csv``).

- Offline rows: saturation throughput (all samples queued; the engine runs at the batch its KV
  capacity allows, ``throughput.saturation_tok_s_per_gpu``).
- Server / Interactive rows: the highest Poisson arrival rate whose predicted p99 TTFT and p99 TPOT
  meet the row's ``ttft_constraint_ms`` / ``tpot_constraint_ms`` (bisection on the rate).

Predicted output tokens/s per accelerator is compared with the measured figure (``tokens_per_s``, or
``samples_per_s`` x mean output tokens where the table gives samples only). A row's system has
``total_accelerators`` (multi-node included); the tensor-parallel size is not in the table, so each
row is priced at the TP (a power of two within one node and the scale-up domain) that gives the most
throughput per accelerator, as submitters tune it, the other accelerators serving as replicas.
A row's framework text names its engine by one of the words each engine lists
(``Engine.result_names``); any other framework is priced with the default engine's calibration and
flagged ``framework_assumed``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from hardware.errors import PlannerInputError
from hardware.spec import GpuSpec
from planner.engines import DEFAULT_ENGINE, engine_names, get_engine
from planner.model.bundled import load_model
from planner.perf.batch import KV_DTYPES, WEIGHT_QUANTS, CandidateArrays, evaluate_batch
from planner.replay_e2e.rows import count, grouped, resolve_gpu, resolve_model
from planner.replay_e2e.throughput import (
    BENCH_MEMORY_UTILIZATION,
    bench_engine_settings,
    saturation_tok_s_per_gpu,
)
from planner.workload.spec import fixed


@dataclass(frozen=True)
class DatasetLengths:
    """The checkpoint a benchmark runs (HF id, resolved through the model catalog) and the mean
    prompt and output lengths of its dataset, tokens, with their source."""

    checkpoint: str
    isl: float
    osl: float
    beams: int
    source: str


_CHECKER = (
    "github:mlcommons/inference tools/submission/submission_checker.py, v4.1 'accuracy-target'"
)
DATASETS: dict[str, DatasetLengths] = {
    "llama2-70b": DatasetLengths(
        "meta-llama/Llama-2-70b-chat-hf",
        294.0,
        294.45,
        1,
        (
            "OpenOrca GPT-4 subset, 24,576 samples, inputs <= 1024 tokens (MLPerf Inference "
            "llama2-70b reference, github:mlcommons/inference language/llama2-70b/README.md); "
            f"output 294.45 tokens per sample ('TOKENS_PER_SAMPLE' target, {_CHECKER}, and the "
            "reference README's 'Tokens per sample: 294.45'); ASSUMPTION: mean input 294 tokens "
            "(no public figure found; the file's closed rows give tokens_per_s / samples_per_s "
            "= 290-294 for the output only)"
        ),
    ),
    "mixtral-8x7b": DatasetLengths(
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        196.0,
        145.9,
        1,
        (
            "5,000 each of OpenOrca, GSM8K and MBXP (MLPerf Inference mixtral-8x7b reference, "
            "github:mlcommons/inference language/mixtral-8x7b); output 145.9 tokens per sample "
            f"('TOKENS_PER_SAMPLE' target, {_CHECKER}); ASSUMPTION: mean input 196 tokens (no "
            "public figure found)"
        ),
    ),
    "gptj": DatasetLengths(
        "EleutherAI/gpt-j-6b",
        1108.0,
        75.0,
        4,
        (
            "CNN/DailyMail 3.0.0 validation, 13,368 samples, inputs truncated at 1,919 tokens, "
            "beam search with 4 beams, at most 128 new tokens (github:mlcommons/inference "
            "language/gpt-j dataset.py, main.py); output: 'GEN_LEN' target 4,016,878 characters "
            f"over 13,368 samples ({_CHECKER}) = 300.5 characters per summary; input: articles "
            "average 781 word tokens and reference summaries 56 (CNN/DailyMail dataset card, "
            "huggingface.co/datasets/abisee/cnn_dailymail, from See et al. 2017), i.e. "
            "781 x 300.5 / 56 = 4,191 characters, plus the reference prompt template (241 "
            "characters, PROMPT_DICT in language/gpt-j/dataset.py); ASSUMPTION: 4 characters per "
            "GPT-2 BPE token (OpenAI's rule of thumb for English): input 1,108 tokens, output 75 "
            "tokens per beam; truncation at 1,919 tokens ignored"
        ),
    ),
}
"""Checkpoint and dataset lengths per benchmark model (the benchmark name without its '-99' /
'-99.9' accuracy target; checkpoints as the MLPerf Inference reference implementations name them).
The table gives no lengths; values marked ASSUMPTION are stated estimates. ``osl`` is per beam."""
BEAM_SOURCE = (
    "github:NVIDIA/TensorRT-LLM docs/source/advanced/gpt-attention.md "
    "@5a211b915ae98e8f12c517570802914b085bbb11 ('Beam-Search': the context phase computes a "
    "single beam per input sequence; the generation phase runs beam_width tokens per sequence; "
    "'the context kv cache are shared across beams')"
)
"""How TRT-LLM runs beam search, which ``_beam_lengths`` prices."""


def _beam_lengths(ds: DatasetLengths) -> tuple[float, float]:
    """(ISL, OSL) of one priced sequence: each beam is a sequence of ``osl`` output tokens, and the
    prompt, prefilled once and its KV held once for all beams (``BEAM_SOURCE``), is split evenly
    over the beams (ISL / beams each). ASSUMPTION: the shared prompt KV is also read once per step
    for all beams (read per beam it would cost up to ``beams`` x the prompt's attention reads)."""
    return ds.isl / ds.beams, ds.osl


FALLBACK_BACKEND = DEFAULT_ENGINE
TP_CHOICES = (1, 2, 4, 8)
RATE_STEPS = 14
"""Bisection steps of the Server rate search (relative resolution 2^-14 of the saturation rate)."""


def _benchmark_model(benchmark: str) -> str:
    """'llama2-70b-99.9' -> 'llama2-70b' (MLPerf names a benchmark '<model>-<accuracy target>')."""
    return re.sub(r"-99(\.9)?$", "", benchmark.strip().lower())


def _backend(framework: object) -> tuple[str, bool]:
    """(calibration backend, assumed?) for the row's framework text."""
    low = str(framework).lower()
    for name in engine_names():
        if any(word in low for word in get_engine(name).result_names):
            return name, False
    return FALLBACK_BACKEND, True


def _quant(gpu: GpuSpec) -> str:
    """ASSUMPTION: closed v4.1 submissions ran FP8 weights and KV where the GPU has FP8 tensor cores
    (NVIDIA TensorRT, AMD vLLM on MI300X), FP4 weights on Blackwell (NVIDIA's B200 preview)."""
    if gpu.supports("fp4") and gpu.vendor == "nvidia":
        return "fp4"
    return "fp8" if gpu.supports("fp8") else "bf16"


def _reason(row: pd.Series) -> str | None:
    scenario = str(row["scenario"]).strip().lower()
    if str(row["division"]).strip().lower() != "closed":
        return "open_division"
    if scenario == "singlestream":
        return "single_stream"
    if scenario not in ("offline", "server", "interactive"):
        return "unknown_scenario"
    if scenario != "offline" and not (
        pd.notna(row["ttft_constraint_ms"]) and pd.notna(row["tpot_constraint_ms"])
    ):
        return "no_ttft_tpot_limits"
    if (
        _benchmark_model(str(row["benchmark"])) not in DATASETS
        or resolve_model(DATASETS[_benchmark_model(str(row["benchmark"]))].checkpoint) is None
    ):
        return "unknown_model"
    if pd.isna(row["accelerator"]) or not str(row["accelerator"]).strip():
        return "no_accelerator_named"  # CPU-only systems (0 accelerators per node)
    if resolve_gpu(row["accelerator"]) is None:
        return "unknown_gpu"
    if not (pd.notna(row["total_accelerators"]) and float(row["total_accelerators"]) >= 1):
        return "no_accelerator_count"
    if _measured(row) is None:
        return "no_measured_throughput"
    return None


def _measured(row: pd.Series) -> float | None:
    """Measured output tokens/s per accelerator."""
    n = float(row["total_accelerators"])
    if pd.notna(row["tokens_per_s"]):
        return float(row["tokens_per_s"]) / n
    ds = DATASETS[_benchmark_model(str(row["benchmark"]))]
    if pd.notna(row["samples_per_s"]):
        return float(row["samples_per_s"]) * ds.osl * ds.beams / n  # tokens of all beams
    return None


def _tp_choices(gpu: GpuSpec, per_node: float) -> list[int]:
    """Tensor-parallel sizes within one node and the GPU's scale-up domain."""
    cap = max(1.0, min(per_node, float(gpu.scale_up.domain_size)))
    return [t for t in TP_CHOICES if t <= cap]


def _server_rate(key: tuple[str, str, str, int, str, float, float], sat_tok_s: float) -> float:
    """Highest Poisson rate per replica (requests/s) meeting both p99 limits (0 if none does)."""
    model, gpu_key, backend, tp, quant, ttft_s, tpot_s = key
    m, gpu = load_model(model), resolve_gpu(gpu_key)
    assert gpu is not None
    isl, osl = _beam_lengths(DATASETS[_benchmark_model_of(model)])
    kv = "fp8" if quant in ("fp8", "fp4") else "bf16"
    cols = {"tp": tp, "weight_quant": WEIGHT_QUANTS.index(quant), "kv_dtype": KV_DTYPES.index(kv)}
    cap = evaluate_batch(
        m,
        gpu,
        CandidateArrays.from_lists(**cols),
        fixed(int(isl), int(osl), rate_per_s=1.0),
        backend=backend,
        gpu_memory_utilization=BENCH_MEMORY_UTILIZATION,
    ).seq_capacity
    seqs, tokens = bench_engine_settings(cap, isl, osl, 1.0)
    c = CandidateArrays.from_lists(**cols, max_num_seqs=seqs, max_num_batched_tokens=tokens)
    lo, hi = 0.0, sat_tok_s * tp / osl
    for _ in range(RATE_STEPS):
        mid = (lo + hi) / 2.0
        r = evaluate_batch(
            m,
            gpu,
            c,
            fixed(int(isl), int(osl), rate_per_s=mid),
            backend=backend,
            gpu_memory_utilization=BENCH_MEMORY_UTILIZATION,
        )
        ok = bool(r.feasible[0]) and r.ttft_p99_s[0] <= ttft_s and r.tpot_p99_s[0] <= tpot_s
        lo, hi = (mid, hi) if ok else (lo, mid)
    return lo


_MODEL_OF: dict[str, str] = {}


def _benchmark_model_of(model_key: str) -> str:
    return _MODEL_OF[model_key]


@lru_cache(maxsize=512)
def _predict_key(
    bench: str,
    gpu_key: str,
    backend: str,
    per_node: float,
    scenario: str,
    ttft_s: float,
    tpot_s: float,
) -> tuple[float, int]:
    """(predicted output tokens/s per accelerator, TP) at the best TP for the row's settings."""
    bundled = resolve_model(DATASETS[bench].checkpoint)
    gpu = resolve_gpu(gpu_key)
    assert bundled is not None and gpu is not None
    _MODEL_OF[bundled.key] = bench
    m, ds, quant = load_model(bundled.key), DATASETS[bench], _quant(gpu)
    kv = "fp8" if quant in ("fp8", "fp4") else "bf16"
    best = (float("nan"), 0)
    for tp in _tp_choices(gpu, per_node):
        isl, osl = _beam_lengths(ds)
        sat = saturation_tok_s_per_gpu(m, gpu, tp, 1, 1, quant, kv, isl, osl, backend)
        if not np.isfinite(sat):
            continue
        tok = sat
        if scenario != "offline":
            rate = _server_rate((bundled.key, gpu.key, backend, tp, quant, ttft_s, tpot_s), sat)
            tok = rate * osl / tp  # output tokens of all beams
        if not np.isfinite(best[0]) or tok > best[0]:
            best = (tok, tp)
    return best


def _predict(row: pd.Series) -> tuple[float, int, str, bool]:
    bench = _benchmark_model(str(row["benchmark"]))
    gpu = resolve_gpu(row["accelerator"])
    assert gpu is not None
    backend, assumed = _backend(row["framework"])
    scenario = str(row["scenario"]).strip().lower()
    per_node = (
        float(row["accelerators_per_node"]) if pd.notna(row["accelerators_per_node"]) else 1.0
    )
    lim = (
        (0.0, 0.0)
        if scenario == "offline"
        else (float(row["ttft_constraint_ms"]) / 1e3, float(row["tpot_constraint_ms"]) / 1e3)
    )
    tok, tp = _predict_key(bench, gpu.key, backend, max(per_node, 1.0), scenario, *lim)
    return tok, tp, backend, assumed


def validate_mlperf(
    path: Path, predictions_out: Path | None = None, progress: bool = True
) -> dict[str, object]:
    """The ``planner validate mlperf`` report: rows, modelled, skipped by reason, error groups."""
    if not path.is_file():
        raise PlannerInputError("--data", f"{path} does not exist")
    df = pd.read_csv(path)
    missing = [
        c
        for c in (
            "division",
            "benchmark",
            "scenario",
            "accelerator",
            "accelerators_per_node",
            "framework",
            "samples_per_s",
            "tokens_per_s",
            "ttft_constraint_ms",
            "tpot_constraint_ms",
            "total_accelerators",
        )
        if c not in df.columns
    ]
    if missing:
        raise PlannerInputError("--data", f"{path}: missing MLPerf columns {', '.join(missing)}")
    skipped: dict[str, int] = {}
    preds = []
    for _, row in df.iterrows():
        reason = _reason(row)
        if reason is None:
            tok, tp, backend, assumed = _predict(row)
            reason = None if np.isfinite(tok) and tok > 0 else "does_not_fit_or_meet_limits"
        if reason:
            count(skipped, reason)
            continue
        gpu = resolve_gpu(row["accelerator"])
        preds.append(
            {
                **row.to_dict(),
                "scenario_norm": str(row["scenario"]).strip().lower(),
                "benchmark_model": _benchmark_model(str(row["benchmark"])),
                "gpu_key": gpu.key if gpu else "",
                "tp_assumed": tp,
                "backend": backend,
                "framework_assumed": assumed,
                "value": _measured(row),
                "pred_value": tok,
            }
        )
        if progress and len(preds) % 25 == 0:
            sys.stderr.write(f"validate mlperf: {len(preds)} rows modelled of {len(df)}\n")
    out = pd.DataFrame(preds)
    if predictions_out is not None:
        out.to_csv(predictions_out, index=False)
    groups = grouped(out, ("scenario_norm", "gpu_key", "benchmark_model"))
    for g in groups:
        g["by"] = {
            "scenario_norm": "scenario",
            "gpu_key": "accelerator",
            "benchmark_model": "benchmark",
        }.get(str(g["by"]), g["by"])
    return {
        "rows": int(len(df)),
        "modelled": int(len(out)),
        "skipped": skipped,
        "groups": groups,
        "framework_assumed_rows": int(out["framework_assumed"].sum()) if len(out) else 0,
        "beam_search": f"{_beam_lengths.__doc__} Source: {BEAM_SOURCE}",
        "datasets": {
            k: {
                "checkpoint": v.checkpoint,
                "isl": v.isl,
                "osl": v.osl,
                "beams": v.beams,
                "source": v.source,
            }
            for k, v in DATASETS.items()
        },
    }
