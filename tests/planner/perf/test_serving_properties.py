"""Property tests (hypothesis) of the serving model's monotonic laws and the estimate JSON
contract."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hardware.catalog import get_gpu
from planner.cli.main import main
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, evaluate_batch
from planner.workload.spec import fixed

H100 = get_gpu("h100")
M8 = load_model("llama-3.1-8b")
LENGTHS = st.sampled_from([128, 512, 1024, 2048, 4096])
PROPERTY_SETTINGS = settings(max_examples=15, deadline=None)


@PROPERTY_SETTINGS
@given(isl=LENGTHS, osl=LENGTHS, tp=st.sampled_from([1, 2, 4]))
def test_ttft_and_tpot_never_fall_as_concurrency_grows(isl: int, osl: int, tp: int) -> None:
    conc = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256], dtype=float)
    c = CandidateArrays.from_lists(tp=np.full(conc.size, tp), concurrency=conc)
    r = evaluate_batch(M8, H100, c, fixed(isl, osl, concurrency=1))
    assert np.all(np.diff(r.ttft_mean_s) >= -1e-6 * r.ttft_mean_s[1:])
    assert np.all(np.diff(r.tpot_mean_s) >= -1e-6 * r.tpot_mean_s[1:])


@PROPERTY_SETTINGS
@given(isl=LENGTHS, osl=LENGTHS, base=st.floats(0.2, 2.0))
def test_ttft_never_falls_as_rate_grows(isl: int, osl: int, base: float) -> None:
    rates = base * np.array([1.0, 1.5, 2.0, 3.0])
    ttft = []
    for rate in rates:
        r = evaluate_batch(
            M8, H100, CandidateArrays.from_lists(tp=1), fixed(isl, osl, rate_per_s=float(rate))
        )
        ttft.append(float(r.ttft_mean_s[0]))
    assert all(b >= a * (1 - 1e-6) for a, b in zip(ttft, ttft[1:], strict=False))


@PROPERTY_SETTINGS
@given(ctx=st.integers(128, 16384), tp=st.sampled_from([1, 2, 4, 8]))
def test_tpot_never_falls_as_batch_grows(ctx: int, tp: int) -> None:
    """A closed loop of B clients at negligible prefill: TPOT is the decode step of batch B."""
    batch = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)
    c = CandidateArrays.from_lists(tp=np.full(batch.size, tp), concurrency=batch, max_num_seqs=1024)
    r = evaluate_batch(M8, H100, c, fixed(ctx, 64, concurrency=1))
    finite = np.isfinite(r.tpot_mean_s)
    # 0.5% slack: split-KV decode may be slightly faster at a 128-token chunk boundary (issue 16b)
    assert np.all(np.diff(r.tpot_mean_s[finite]) >= -5e-3 * r.tpot_mean_s[finite][1:])


@PROPERTY_SETTINGS
@given(isl=st.integers(256, 16384))
def test_disagg_ttft_includes_kv_transfer(isl: int) -> None:
    c = CandidateArrays.from_lists(
        tp=2, mode=1, prefill_tp=2, workers=1, prefill_workers=1, concurrency=1
    )
    r = evaluate_batch(M8, H100, c, fixed(isl, 64, concurrency=1))
    assert r.kv_transfer_s[0] > 0
    assert r.ttft_mean_s[0] >= r.kv_transfer_s[0]


def test_estimate_json_has_the_issue_keys(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h100",
            "--concurrency",
            "8",
            "--format",
            "json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("ttft_ms", "tpot_ms"):
        assert set(out[key]) >= {"mean", "p50", "p90", "p99"}
    for key in (
        "output_tok_s_per_gpu",
        "output_tok_s_per_user",
        "requests_per_s",
        "step_breakdown",
        "memory",
        "provenance",
    ):
        assert key in out
    assert "provenance_mix" in out


def test_infeasible_model_exits_2_with_reason(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "estimate",
            "--model",
            "llama-3.1-70b",
            "--gpu",
            "l4",
            "--concurrency",
            "1",
            "--format",
            "json",
        ]
    )
    assert rc == 2
    assert "memory" in capsys.readouterr().err
