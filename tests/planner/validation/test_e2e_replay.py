"""Replay of ../shared/validation/e2e/silicon_measured.csv: every row modelled or counted."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from planner.validation.e2e import validate_e2e

DATA = (
    Path(__file__).resolve().parents[3]
    / ".."
    / "shared"
    / "validation"
    / "e2e"
    / "silicon_measured.csv"
)


@pytest.mark.validation
def test_every_row_is_modelled_or_counted() -> None:
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    r = validate_e2e(DATA, progress=False)
    assert r["modelled"] + sum(r["skipped"].values()) + r["duplicates_dropped"] == r["rows"]
    unrunnable = r["skipped"].get("tp_not_dividing_heads", 0)
    complete = r["rows"] - r["duplicates_dropped"] - r["skipped"].get("incomplete_config", 0)
    assert r["modelled"] == complete - unrunnable  # no runnable complete row is left out
    # issue 16: at least the 1,828 rows modelled before, less the 225 duplicates
    assert r["modelled"] >= 1828 - 225
    assert unrunnable <= 0.05 * r["rows"]


def test_a_row_whose_tp_cannot_split_the_heads_is_not_modelled() -> None:
    """Every engine requires the attention heads to divide over TP (as the planner's own
    ``check_parallelism``): DeepSeek-R1's 128 heads over tp 36 describe no runnable deployment
    (GB200 rows whose tp_size is the whole disaggregated deployment's GPU count)."""
    from planner.models import load_model
    from planner.validation.e2e import _runnable_tp

    m = load_model("deepseek-ai/DeepSeek-R1")
    assert _runnable_tp(m, {"tp": 8.0})
    assert not _runnable_tp(m, {"tp": 36.0})
    assert not _runnable_tp(m, {"tp": 8.0, "prefill_tp": 72.0})


@pytest.mark.validation
def test_throughput_accuracy_holds() -> None:
    """TensorRT-LLM max-throughput rows <= 20 % (issue 5). The TTFT/TPOT figures are guarded on
    held-out campaigns (test_holdout.py), not in-sample."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    from planner.validation.throughput import validate_throughput

    thr = validate_throughput(DATA.with_name("trtllm_perf_overview.csv"), progress=False)
    overall = next(g for g in thr["groups"] if g["by"] == "overall")  # type: ignore[attr-defined]
    assert overall["throughput"]["median_ape_pct"] <= 20.0


def _row(**kw: object) -> pd.Series:
    base = {
        "mode": "agg",
        "backend": "trtllm",
        "gemm_quant_mode": "fp8",
        "batch_size": 32.0,
        "tp_size": 1.0,
        "pp_size": 1.0,
        "attention_dp_size": 8.0,
        "moe_tp_size": 1.0,
        "moe_ep_size": 8.0,
        "silicon_data_source": "source_file=2026-03-25.csv; model=DeepSeek-R1",
    }
    return pd.Series({**base, **kw})


def test_attention_dp_rows_run_batch_size_clients_per_rank() -> None:
    """The harness runs batch_size x attention-DP clients
    (ids ``..._c256_...`` with batch 32, DP 8)."""
    from planner.validation.e2e import candidate_columns

    c = candidate_columns(_row(), "bf16")
    assert isinstance(c, dict) and c["concurrency"] == 256.0 and c["dp"] == 8.0


def test_recorded_concurrency_wins() -> None:
    from planner.validation.e2e import candidate_columns

    c = candidate_columns(
        _row(silicon_data_source="x; silicon_concurrency=96; measured=2026"), "bf16"
    )
    assert isinstance(c, dict) and c["concurrency"] == 96.0
