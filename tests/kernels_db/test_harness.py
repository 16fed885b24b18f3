"""Rows priced as their harness measured them: the TensorRT-LLM 1.0.0 grouped-query decode rows read
half the KV from DRAM; every other row, and every serving prediction, reads all of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import get_gpu
from kernels_db import costs
from kernels_db.fit import implausible_roofline_rows
from kernels_db.folder import read_folder
from kernels_db.harness import HARNESS_KV_DRAM_SHARE, kv_dram_share, measured_cols
from kernels_db.tables import table_from_frame

OLD = "github:ai-dynamo/aiconfigurator data/a100_sxm/attention/trtllm/1.0.0/generation_attention"
NEW = "github:ai-dynamo/aiconfigurator data/l40s/attention/trtllm/1.3.0rc20/generation_attention"


def _decode(sources: list[str], heads: list[int]) -> pd.DataFrame:
    n = len(sources)
    return pd.DataFrame(
        {
            "batch": list(range(1, n + 1)),  # distinct keys
            "kv_len": [65536] * n,
            "heads": heads,
            "kv_heads": [8] * n,
            "head_dim": [128] * n,
            "kv_dtype": ["bf16"] * n,
            "latency_s": [1e-3] * n,
            "source": sources,
        }
    )


def test_only_grouped_rows_of_the_old_harness_read_half() -> None:
    df = _decode([OLD, OLD, NEW, NEW], [32, 8, 32, 8])
    t = table_from_frame(df, "attention_decode", "a100_sxm", "x.csv")
    assert kv_dram_share(t).tolist() == [HARNESS_KV_DRAM_SHARE, 1.0, 1.0, 1.0]
    sub = t.subset(np.array([True, False, True, False]))
    assert kv_dram_share(sub).tolist() == [HARNESS_KV_DRAM_SHARE, 1.0]


def test_share_halves_the_kv_bytes_and_defaults_to_all() -> None:
    df = _decode([OLD, NEW], [32, 32])
    t = table_from_frame(df, "attention_decode", "a100_sxm", "x.csv")
    spec = get_gpu("a100")
    as_measured = costs.counts("attention_decode", measured_cols(t, spec), spec).nbytes
    serving = costs.counts("attention_decode", t.keys, spec).nbytes
    qo = 2.0 * 32 * 128 * 2  # Q and O of one token of one sequence (batch 1), 16-bit
    assert as_measured[1] == serving[1]
    assert as_measured[0] - qo == pytest.approx((serving[0] - qo) * HARNESS_KV_DRAM_SHARE)


def test_a100_decode_rows_are_plausible_as_measured(validation_kernels: Path) -> None:
    """With the harness share no A100 decode row reads faster than the HBM spec; counted as a
    serving kernel reads, 17 grouped-query rows would."""
    t = read_folder(validation_kernels).tables["a100_sxm"]["attention_decode"]
    spec = get_gpu("a100")
    assert not implausible_roofline_rows(t, spec).any()
    cnt = costs.counts("attention_decode", t.keys, spec)
    beyond = np.maximum(np.asarray(cnt.nbytes) - (spec.l2_cache_bytes or 0.0), 0.0)
    faster = beyond / spec.hbm_bandwidth_bytes_per_s > t.latency_s
    assert faster.sum() == 17
    assert np.all(t.keys["heads"][faster] != t.keys["kv_heads"][faster])


def _gemm(source: str, n: int, k: int, dtype: str = "bf16") -> pd.DataFrame:
    return pd.DataFrame(
        {"m": [1], "n": [n], "k": [k], "dtype": [dtype], "latency_s": [1e-4], "source": [source]}
    )


def test_gemm_working_set_is_the_harness_copies() -> None:
    """AIConfigurator 1.3.0rc20 cycles through ceil(L2 / weights) copies (at most 5, at least 1);
    its 1.0.0 collector through 5; a table of unknown origin re-runs one GEMM."""
    spec = get_gpu("l40s")  # 96 MiB L2
    l2 = spec.l2_cache_bytes
    assert l2 == 96 * 2**20
    frames = [
        _gemm("x/gemm/trtllm/1.3.0rc20/gemm_perf.parquet", 4096, 4096),  # 32 MiB: 3 copies
        _gemm("x/gemm/trtllm/1.3.0rc20/gemm_perf.parquet", 8192, 8192, "fp8"),  # 64 MiB: 2
        _gemm("x/gemm/trtllm/1.3.0rc20/gemm_perf.parquet", 16384, 16384),  # 512 MiB: 1
        _gemm("x/gemm/trtllm/1.0.0/gemm_perf.parquet", 1024, 1024),  # 2 MiB: always 5
        _gemm("own.csv", 2048, 2048),  # 8 MiB: own bytes
    ]
    df = pd.concat(frames, ignore_index=True)
    t = table_from_frame(df, "gemm", spec.key, "x.csv")
    cols = measured_cols(t, spec)
    one = costs.counts("gemm", t.keys, spec).nbytes
    weights = np.array([2 * 4096**2, 8192**2, 2 * 16384**2, 2 * 1024**2, 2 * 2048**2])
    copies = np.array([3, 2, 1, 5, 1])
    assert np.allclose(cols[costs.WORKING_SET], one + (copies - 1) * weights)
    # serving (no working set): nothing resident; as measured: the small copies sets are
    resident = costs.counts("gemm", cols, spec).resident
    assert not np.any(costs.counts("gemm", t.keys, spec).resident)
    assert resident[3] > 0.99 and resident[2] < 0.01


def test_gemm_serving_reads_weights_from_dram() -> None:
    """A serving GEMM's weights are not L2-resident (a step reads every layer before this one
    again): on L40S a 4096 x 4096 bf16 decode GEMM takes at least its 33.6 MB at the DRAM spec."""
    from kernels_db.lookup import KernelDB

    spec = get_gpu("l40s")
    cost = KernelDB.for_gpu(spec).gemm(np.array([1, 8]), 4096, 4096, "bf16")
    assert np.all(cost.seconds >= 2 * 4096**2 / spec.hbm_bandwidth_bytes_per_s)


def test_interpolated_tables_do_not_carry_their_harness_into_serving() -> None:
    """A table's measured / model ratio is taken against the row priced as its harness ran it
    (``measured_cols``): fp8 rows of the TensorRT-LLM 1.3.0rc20 GEMM harness, measured exactly as
    the fitted model prices them with the harness's scale pass and weight copies, leave a serving
    GEMM between them priced as without the table."""
    from kernels_db import fitted
    from kernels_db.lookup import KernelDB

    spec = get_gpu("h200")
    src = "github:ai-dynamo/aiconfigurator data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet"
    ms = [16, 32, 64, 128]
    frame = pd.DataFrame(
        {
            "m": ms * 2,
            "n": [8192] * 8,
            "k": [4096] * 4 + [8192] * 4,
            "dtype": ["fp8"] * 8,
            "latency_s": [1.0] * 8,
            "source": [src] * 8,
        }
    )
    t = table_from_frame(frame, "gemm", "h200_sxm", "x.csv")
    plain = KernelDB(spec, {}, fitted.load("h200_sxm"))
    as_measured = plain.model("gemm", measured_cols(t, spec))[0]
    assert np.all(as_measured > plain.model("gemm", t.keys)[0])  # the harness's scale pass
    frame["latency_s"] = as_measured
    table = table_from_frame(frame, "gemm", "h200_sxm", "x.csv")
    db = KernelDB(spec, {"gemm": table}, fitted.load("h200_sxm"))
    for m in (16.0, 48.0, 100.0):
        with_table = db.gemm(m, 8192.0, 6144.0, "fp8")
        assert str(np.asarray(with_table.provenance).flat[0]) == "interpolated"
        assert float(with_table.seconds) == pytest.approx(
            float(plain.gemm(m, 8192.0, 6144.0, "fp8").seconds), rel=1e-9
        )
