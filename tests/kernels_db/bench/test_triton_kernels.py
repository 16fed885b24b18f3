"""Every Triton kernel against a torch reference in the interpreter, fp32 and fp16, on random small
shapes; outputs are pre-filled with NaN so any element the kernel fails to write fails the test."""

from __future__ import annotations

import math
import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on CPU via numpy

import pytest

torch = pytest.importorskip(
    "torch", reason="kernels_db.bench needs torch (pip install -e .[bench])"
)
pytest.importorskip("triton", reason="kernels_db.bench needs triton (pip install -e .[bench])")

from kernels_db.bench.triton_attention import prefill_attention  # noqa: E402
from kernels_db.bench.triton_copy import copy  # noqa: E402
from kernels_db.bench.triton_decode import make_paged_cache, paged_decode_attention  # noqa: E402
from kernels_db.bench.triton_gemm import gemm  # noqa: E402
from kernels_db.bench.triton_moe import grouped_gemm  # noqa: E402

DTYPES = [torch.float32, torch.float16]
TOL = {
    torch.float32: 1e-4,
    torch.float16: 2e-2,
    torch.bfloat16: 5e-2,
}  # relative to the reference's max magnitude
SEEDS = [0, 1, 2]


def _rng(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(g: torch.Generator, *shape: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(*shape, generator=g).to(dtype)


def _poisoned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype)


def _check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    assert not torch.isnan(out).any(), "kernel left output elements unwritten"
    err = (out.float() - ref).abs().max().item()
    assert err <= TOL[dtype] * max(1.0, ref.abs().max().item()), f"max abs error {err}"


@pytest.mark.parametrize("dtype", [*DTYPES, torch.bfloat16])  # bf16 through the UPCAST path
@pytest.mark.parametrize("seed", SEEDS)
def test_gemm_matches_matmul(seed: int, dtype: torch.dtype) -> None:
    g = _rng(seed)
    m, n, k = (int(x) for x in torch.randint(1, 60, (3,), generator=g))
    a, w = _randn(g, m, k, dtype=dtype), _randn(g, n, k, dtype=dtype)
    out = gemm(a, w.t(), _poisoned((m, n), dtype), scale=0.5, blocks=(16, 16, 16))
    _check(out, 0.5 * a.float() @ w.float().t(), dtype)


def _attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """Plain softmax attention, causal bottom-right aligned, GQA by repeating KV heads."""
    seq, kv_len, group = q.shape[2], k.shape[2], q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, 1)
    v = v.float().repeat_interleave(group, 1)
    scores = q.float() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    pos_q = torch.arange(kv_len - seq, kv_len)[:, None]
    pos_k = torch.arange(kv_len)[None, :]
    visible = pos_k <= pos_q
    if window:
        visible &= pos_k > pos_q - window
    return torch.softmax(scores.masked_fill(~visible, float("-inf")), -1) @ v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("batch", "heads", "kv_heads", "seq", "prior", "head_dim", "window"),
    [
        (2, 4, 2, 19, 0, 16, 0),
        (1, 6, 2, 21, 13, 24, 0),
        (2, 2, 1, 33, 5, 32, 7),
        (1, 3, 3, 5, 40, 16, 0),
    ],
)
def test_prefill_matches_softmax_attention(
    batch: int,
    heads: int,
    kv_heads: int,
    seq: int,
    prior: int,
    head_dim: int,
    window: int,
    dtype: torch.dtype,
) -> None:
    g = _rng(seq)
    q = _randn(g, batch, heads, seq, head_dim, dtype=dtype)
    k = _randn(g, batch, kv_heads, prior + seq, head_dim, dtype=dtype)
    v = _randn(g, batch, kv_heads, prior + seq, head_dim, dtype=dtype)
    out = prefill_attention(
        q, k, v, _poisoned(tuple(q.shape), dtype), window=window, blocks=(16, 16)
    )
    _check(out, _attention_ref(q, k, v, window), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("batch", "heads", "kv_heads", "max_len", "head_dim", "page", "splits"),
    [(2, 4, 2, 37, 16, 8, 3), (3, 8, 1, 50, 32, 16, None), (1, 2, 2, 9, 24, 4, 4)],
)
def test_paged_decode_matches_softmax_attention(
    batch: int,
    heads: int,
    kv_heads: int,
    max_len: int,
    head_dim: int,
    page: int,
    splits: int | None,
    dtype: torch.dtype,
) -> None:
    g = _rng(max_len)
    q = _randn(g, batch, heads, head_dim, dtype=dtype)
    k = _randn(g, batch, kv_heads, max_len, head_dim, dtype=dtype)
    v = _randn(g, batch, kv_heads, max_len, head_dim, dtype=dtype)
    lens = torch.randint(1, max_len + 1, (batch,), generator=g, dtype=torch.int32)
    lens[0] = max_len
    k_cache, v_cache, table = make_paged_cache(k, v, page, generator=g)
    out = paged_decode_attention(
        q,
        k_cache,
        v_cache,
        table,
        lens,
        _poisoned(tuple(q.shape), dtype),
        splits=splits,
        block_n=16,
        sm_count=4,
    )
    for b in range(batch):
        n = int(lens[b])
        ref = _attention_ref(q[b : b + 1, :, None], k[b : b + 1, :, :n], v[b : b + 1, :, :n], 0)
        _check(out[b], ref[0, :, 0], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("counts", [[5, 0, 17, 3], [1, 1], [0, 40, 0]])
def test_grouped_gemm_matches_per_expert_matmul(counts: list[int], dtype: torch.dtype) -> None:
    g = _rng(sum(counts))
    k, n = 40, 24
    a = _randn(g, sum(counts), k, dtype=dtype)
    w = _randn(g, len(counts), k, n, dtype=dtype)
    out = grouped_gemm(a, w, counts, _poisoned((sum(counts), n), dtype), blocks=(16, 16, 16))
    starts = [sum(counts[:e]) for e in range(len(counts))]
    ref = torch.cat(
        [
            a[s : s + c].float() @ w[e].float()
            for e, (s, c) in enumerate(zip(starts, counts, strict=True))
        ]
    )
    _check(out, ref, dtype)


@pytest.mark.parametrize("n", [1, 1000, 5000])
def test_copy_writes_every_element(n: int) -> None:
    src = torch.randn(n)
    dst = copy(src, _poisoned((n,), torch.float32), block=1024)
    assert torch.equal(dst, src)
