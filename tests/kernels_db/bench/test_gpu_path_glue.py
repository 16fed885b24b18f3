"""The GPU sweep's cases (Triton kernel beside the production reference, at the GPU's default block
sizes) built on CPU under the Triton interpreter: both kernels of every case must agree, so the
layouts, transposes, paged cache and expert tile maps that only a GPU run would time are checked."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest

torch = pytest.importorskip(
    "torch", reason="kernels_db.bench needs torch (pip install -e .[bench])"
)
pytest.importorskip("triton", reason="kernels_db.bench needs triton (pip install -e .[bench])")

from kernels_db.bench import cases as C  # noqa: E402
from kernels_db.bench import shapes as S  # noqa: E402
from kernels_db.bench import sweeps  # noqa: E402


def _agree(cases: C.Cases, reference: str) -> None:
    assert set(cases) == {reference, "triton"}
    ref = cases[reference]()
    got = cases["triton"]()
    assert isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor)
    ref = ref.reshape(got.shape).float()
    err = (got.float() - ref).abs().max().item()
    assert err <= 1e-3 * max(1.0, ref.abs().max().item()), f"max abs error {err}"


def test_gemm_case() -> None:
    _agree(C.gemm_cases(S.GemmShape(8, 48, 40), "fp32", "cpu", triton=True), "torch.matmul")


@pytest.mark.parametrize(
    "shape", [S.PrefillShape(1, 20, 12, 4, 2, 32, 0), S.PrefillShape(2, 17, 0, 2, 1, 16, 5)]
)
def test_prefill_case(shape: S.PrefillShape) -> None:
    _agree(C.prefill_cases(shape, "fp32", "cpu", triton=True), "torch.sdpa")


def test_decode_case_with_several_splits() -> None:
    shape = S.DecodeShape(2, 200, 4, 2, 32)
    _agree(C.decode_cases(shape, "fp32", "cpu", sm_count=8, triton=True), "torch.sdpa")


@pytest.mark.parametrize("shape", [S.MoeShape(6, 32, 24, 2, 4, 1), S.MoeShape(1, 32, 16, 2, 8, 2)])
def test_moe_case(shape: S.MoeShape) -> None:
    cases = C.moe_cases(shape, "fp32", "cpu", triton=True)
    _agree(cases, next(k for k in cases if k != "triton"))


def test_memcpy_case() -> None:
    _agree(C.memcpy_cases(1000, "cpu", triton=True), "torch.copy_")


def test_moe_counts_spread_routed_rows_over_local_experts() -> None:
    assert C.moe_counts(S.MoeShape(1, 8, 8, 8, 128, 1)) == [1] * 8 + [0] * 120
    assert C.moe_counts(S.MoeShape(64, 8, 8, 2, 8, 2)) == [16] * 4


def test_sweep_writes_triton_rows_to_their_own_table() -> None:
    ctx = sweeps.SweepContext("cpu", lambda fn: 1e-3, quick=True, triton=True)
    items = [({"bytes": 512}, lambda: C.memcpy_cases(512, "cpu", triton=True))]
    tables = sweeps.sweep("memcpy", items, ctx)
    assert tables == {
        "memcpy.csv": [{"bytes": 512, "latency_s": 1e-3, "kernel_source": "torch.copy_"}],
        "triton/memcpy.csv": [{"bytes": 512, "latency_s": 1e-3, "kernel_source": "triton"}],
    }


def test_sweep_skips_a_failing_shape_and_records_why() -> None:
    def boom() -> C.Cases:
        raise RuntimeError("CUDA out of memory")

    ctx = sweeps.SweepContext("cpu", lambda fn: 1e-3, quick=True)
    assert sweeps.sweep("memcpy", [({"bytes": 1}, boom)], ctx) == {}
    assert ctx.skipped and "out of memory" in ctx.skipped[0]
