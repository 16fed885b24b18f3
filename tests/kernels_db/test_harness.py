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
    as_measured = costs.counts("attention_decode", measured_cols(t), spec).nbytes
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
