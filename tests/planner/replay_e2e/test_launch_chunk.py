"""The chunk a measured row is replayed at (``planner.replay_e2e.launch.engine_chunk``): SGLang's
own ``--chunked-prefill-size`` default for the row's GPU and version, engines.yaml's for the
others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import get_gpu
from planner.engines.calibration import engine
from planner.engines.sglang.memory import chunked_prefill as sglang_chunked_prefill
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, evaluate_batch
from planner.perf.memory import GIB, MIB
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.launch import engine_chunk, engine_chunks
from planner.replay_e2e.predict import predict
from planner.workload.spec import fixed


@pytest.mark.parametrize(
    ("mib", "new", "old"),
    [
        (23034, 2048, 2048),  # L4 as nvidia-smi reports it
        (46068, 4096, 8192),  # L40S: the 60 GiB step came with 0.5.3
        (81559, 8192, 8192),  # H100 SXM
        (143771, 8192, 8192),  # H200: 140 GiB, below 160 GiB
        (160 * 1024 - 1, 8192, 8192),
        (160 * 1024, 16384, 16384),
        (183359, 16384, 16384),  # B200
        (189471, 16384, 16384),  # GB200
    ],
)
def test_sglang_default_chunk_by_gpu_memory_and_version(mib: int, new: int, old: int) -> None:
    assert sglang_chunked_prefill(mib * MIB) == new
    assert sglang_chunked_prefill(mib * MIB, before_053=True) == old


@pytest.mark.parametrize(
    ("version", "chunk"),
    [
        ("0.5.2", 8192),  # 0.5.2 and earlier: no 60 GiB step
        ("0.5.1-rc0.pre1", 8192),
        ("0.5.3", 4096),
        ("0.5.9", 4096),
        (float("nan"), 4096),  # no version: the newer rule
        ("glm5-hopper", 4096),  # a build tag
    ],
)
def test_sglang_rows_take_their_versions_rule(version: object, chunk: int) -> None:
    assert engine_chunk("sglang", version, 46068 * MIB, 8192.0) == chunk


def test_other_engines_keep_the_engines_yaml_chunk() -> None:
    gb200 = get_gpu("gb200").memory_bytes
    rows = pd.DataFrame(
        {"backend": ["vllm", "trtllm", "sglang"], "backend_version": ["0.12.0", "1.0.0", "0.5.8"]}
    )
    assert np.array_equal(engine_chunks(rows, gb200, 1234.0), [1234.0, 1234.0, 16384.0])
    no_version = rows.drop(columns="backend_version")
    assert np.array_equal(engine_chunks(no_version, gb200, 1234.0), [1234.0, 1234.0, 16384.0])
    assert engine_chunk("sglang", "0.5.5.post2", 80 * GIB, 1234.0) == 8192.0


def _agg_row(backend: str, system: str) -> pd.DataFrame:
    """One aggregated row whose prefill fills the chunk: 64 clients of 8192-token prompts."""
    return pd.DataFrame(
        [
            {
                "id": f"synthetic_{backend}_{system}",
                "silicon_data_source": "synthetic",
                "backend": backend,
                "backend_version": "0.5.8",
                "model_path": "meta-llama/Llama-3.1-8B-Instruct",
                "system": system,
                "mode": "agg",
                "isl": 8192,
                "osl": 256,
                "gemm_quant_mode": "bf16",
                "batch_size": 64,
                "tp_size": 1,
                "pp_size": 1,
                "silicon_ttft_ms": 1000.0,
                "silicon_tpot_ms": 20.0,
            }
        ]
    )


def _at_chunk(rows: pd.DataFrame, chunk: float) -> float:
    """TTFT (ms) of the prepared row evaluated directly at ``chunk``."""
    r = rows.iloc[0]
    given = {c: [r[f"c_{c}"]] for c in CandidateArrays.__dataclass_fields__ if f"c_{c}" in r}
    given["max_num_seqs"] = [engine(str(r["backend"])).max_num_seqs.value]
    cand = CandidateArrays.from_lists(**given, max_num_batched_tokens=[chunk])
    res = evaluate_batch(
        load_model(str(r["model_path"])),
        get_gpu(str(r["system"])),
        cand,
        fixed(int(r["isl"]), int(r["osl"]), concurrency=1).model_copy(
            update={"startup_wave": True}
        ),
        backend=str(r["backend"]),
    )
    return float(res.ttft_mean_s[0] * 1e3)


def test_an_sglang_gb200_row_is_replayed_at_16k() -> None:
    rows = prepare(_agg_row("sglang", "gb200")).rows
    got = float(predict(rows, progress=False)["pred_ttft_ms"].iloc[0])
    assert got == pytest.approx(_at_chunk(rows, 16384.0), rel=1e-9)
    assert got != pytest.approx(_at_chunk(rows, 8192.0), rel=1e-3)  # the chunk binds here


@pytest.mark.parametrize(("backend", "system"), [("vllm", "gb200"), ("sglang", "h100_sxm")])
def test_rows_at_8k_are_unchanged(backend: str, system: str) -> None:
    """vLLM keeps engines.yaml's chunk on any GPU; SGLang's default on an H100 is that value."""
    rows = prepare(_agg_row(backend, system)).rows
    got = float(predict(rows, progress=False)["pred_ttft_ms"].iloc[0])
    assert engine(backend).max_num_batched_tokens.value == 8192
    assert got == pytest.approx(_at_chunk(rows, 8192.0), rel=1e-9)
