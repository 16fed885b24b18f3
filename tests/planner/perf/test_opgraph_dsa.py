"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5): MLA over at most ``index_topk`` keys per
query plus the lightning indexer over the whole context (issue 16, point 3)."""

from __future__ import annotations

import numpy as np

from planner.model.bundled import load_model
from planner.perf.opgraph import ParallelArrays, StepMix, sparse_span, step_ops


def _a(x: float) -> np.ndarray:
    return np.array([float(x)])


PAR = ParallelArrays(_a(8), _a(1), _a(1), _a(8), _a(1), _a(1), _a(1.9e15))


def _ops(model: str, s: StepMix) -> dict[str, object]:
    return {op.name: op for op in step_ops(load_model(model), PAR, s)}


def test_sparse_span_is_the_dense_span_until_topk_binds() -> None:
    prior, chunk = np.array([0.0, 0.0, 4096.0, 1000.0]), np.array([1024.0, 8192.0, 8192.0, 2000.0])
    span = sparse_span(prior, chunk, 2048.0)
    assert span[0] == 512.0  # short prompt: every key, mean chunk/2
    assert span[2] == 2048.0  # long prior: top-k keys for every query
    # 8192 fresh tokens: queries 0..2047 see their prefix, the other 6144 see 2048 keys
    assert np.isclose(span[1], (2048.0**2 / 2 + 2048.0 * 6144.0) / 8192.0)
    assert np.isclose(span[3], ((2048.0**2 - 1000.0**2) / 2 + 2048.0 * 952.0) / 2000.0)
    assert np.allclose(sparse_span(prior, chunk, 1e9), prior + chunk / 2.0)


def test_dsa_decode_attends_topk_keys_and_the_indexer_scans_the_context() -> None:
    long = StepMix(_a(16), _a(8704), _a(0), _a(0), _a(0))
    dsa, dense = _ops("zai-org/GLM-5-FP8", long), _ops("deepseek-ai/DeepSeek-R1", long)
    att = dsa["attn_decode"]
    assert att.shape.kv_len[0] == 2048.0  # type: ignore[attr-defined]
    assert dense["attn_decode"].shape.kv_len[0] == 8704.0  # type: ignore[attr-defined]
    idx = dsa["dsa_indexer_decode"]
    # GLM-5 indexer: 32 heads x 128 dims, 2 FLOPs per (head, dim) for every cached key
    assert np.isclose(idx.flops[0], 16 * 8704 * 2 * 32 * 128)  # type: ignore[attr-defined]
    assert "dsa_indexer_decode" not in dense
    short = _ops("zai-org/GLM-5-FP8", StepMix(_a(16), _a(1000), _a(0), _a(0), _a(0)))
    assert short["attn_decode"].shape.kv_len[0] == 1000.0  # type: ignore[attr-defined]


def test_dsa_prefill_caps_attention_work_and_prices_the_indexer() -> None:
    s = StepMix(_a(0), _a(0), _a(8192), _a(8192), _a(4096))
    dsa, dense = _ops("zai-org/GLM-5-FP8", s), _ops("deepseek-ai/DeepSeek-R1", s)
    a = dsa["attn_prefill"]
    # the kernel key keeps the query tokens and the mean of 2048 keys per query
    shape = a.shape  # type: ignore[attr-defined]
    assert np.isclose(shape.batch[0] * shape.seq[0], 8192.0)
    assert np.isclose(shape.prior[0] + shape.seq[0] / 2.0, 2048.0)
    assert dense["attn_prefill"].shape.prior[0] == 4096.0  # type: ignore[attr-defined]
    idx = dsa["dsa_indexer_prefill"]
    pairs = 8192.0 * (4096.0 + 4096.0)
    assert np.isclose(idx.flops[0], pairs * 2 * 32 * 128)  # type: ignore[attr-defined]


def test_dsa_models_cache_the_indexer_key_next_to_the_mla_latent() -> None:
    from planner.perf.memory import indexer_key_bytes_per_token
    from planner.perf.memory_plan import kv_bytes_per_token

    dsa, dense = load_model("deepseek-ai/DeepSeek-V3.2"), load_model("deepseek-ai/DeepSeek-R1")
    assert dsa.mla is not None and dsa.mla.index_head_dim == 128
    mla_layer = next(la for la in dsa.layers if la.attention == "mla")
    # one fp8 key of 128 elements plus one fp32 scale per 128 elements, whatever the KV dtype
    assert indexer_key_bytes_per_token(dsa, mla_layer) == 132.0
    latent = (512 + 64) * 2.0  # bf16 MLA latent + rope key
    assert kv_bytes_per_token(dsa, mla_layer, 8, "bf16") == latent + 132.0
    dense_layer = next(la for la in dense.layers if la.attention == "mla")
    assert indexer_key_bytes_per_token(dense, dense_layer) == 0.0
    assert kv_bytes_per_token(dense, dense_layer, 8, "bf16") == latent
