"""The presentation layer: rounding, names with units and percentile, a deployment in words."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.reports import present as pr


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2931.846711444633, "2,932"),
        (28.491678674430524, "28.49"),
        (340.4343205813321, "340.4"),
        (3.3916995938483234, "3.392"),
        (0.00012345, "0.0001234"),
        (12345.67, "12,350"),
        (1110.0, "1,110"),
        (4.0, "4"),
        (0.5, "0.5"),
        (0, "0"),
        (64, "64"),
        (1205046, "1,205,046"),
        (np.int64(8), "8"),
        (np.float64(2.5), "2.5"),
        (None, "-"),
        (math.nan, "-"),
        (math.inf, "-"),
        (-0.0123456, "-0.01235"),
    ],
)
def test_num_four_significant_figures_counts_exact(value: object, text: str) -> None:
    assert pr.num(value) == text


def test_kinds_round_their_own_way() -> None:
    assert pr.show("prefill_utilization", 0.81116) == "81.1%"
    assert pr.show("weights_bytes_per_gpu", 70552387584.0) == "70.55"
    assert pr.show("gpus", 6.0) == "6"
    assert pr.show("cost_per_million_output_tokens", 2.611043702559147) == "2.611"
    assert pr.gb(141104775168) == "141.1 GB" and pr.money(19.2) == "$19.20"
    assert pr.ms(2931.8) == "2,932 ms" and pr.pct(0.05) == "5.0%"


@pytest.mark.parametrize(
    ("key", "pct", "name"),
    [
        ("ttft_ms", "p90", "TTFT p90 (ms)"),
        ("tpot_ms", None, "TPOT (ms)"),
        ("ttft_p99_ms", None, "TTFT p99 (ms)"),
        ("ttft_ms_p50", None, "TTFT p50 (ms)"),
        ("predicted.ttft_ms mean", None, "TTFT mean (ms)"),
        ("output_tok_s_per_gpu", "p90", "Output tokens/s per GPU"),  # not a percentile quantity
        ("kv_budget_bytes_per_gpu", None, "KV cache per GPU (GB)"),
        ("clients_per_worker", None, "Clients per worker"),
        ("cost_per_hour_usd", None, "Cost per hour ($)"),
        ("something_ms", None, "Something (ms)"),
    ],
)
def test_labels_carry_unit_and_percentile(key: str, pct: str | None, name: str) -> None:
    assert pr.label(key, pct) == name


def test_machine_names_carry_the_percentile() -> None:
    assert pr.machine_name("ttft_ms", "p90") == "ttft_p90_ms"
    assert pr.machine_name("output_tok_s_per_gpu", "p90") == "output_tok_s_per_gpu"


def test_config_sentence_and_parts() -> None:
    worker = {
        "parallel": {"tp": 2, "pp": 4, "dp": 1, "ep": 1},
        "max_num_seqs": 64,
        "max_num_batched_tokens": 1024,
        "gpu_memory_utilization": 0.85,
        "kv_dtype": "fp8",
        "weight_quant": "bf16",
        "workers": 1,
    }
    dep = {"mode": "agg", "gpu": "h200_sxm", "agg": worker}
    text = pr.config_sentence(dep, 8, "H200-SXM")
    assert text == (
        "8 x H200-SXM, aggregated: 1 replica of TP2 x PP4 (8 GPUs each), up to 64 "
        "running requests, 1,024-token chunks; KV cache fp8, weights bf16."
    )
    cols, rows = pr.config_table(dep)
    assert cols[0] == "Role" and rows[0][0] == "agg"
    assert dict(zip(cols, rows[0], strict=True))["GPU memory for the engine (%)"] == "85%"


def test_step_rows_drop_empty_kinds_and_keep_every_step() -> None:
    bd = {
        "mixed_step_ms": {"gemm": 10.0, "moe": 0.0, "attention": 5.0},
        "prefill_ms": {"gemm": 100.0, "moe": 0.0},
        "decode_step_ms": {"gemm": 6.0, "attention": 2.0, "overhead": 2.0},
        "empty_ms": {"moe": 0.0},
    }
    rows = pr.step_rows(bd)
    assert [r[0] for r in rows] == ["mixed step under load"] * 2 + ["prefill of one prompt"] + [
        "decode step"
    ] * 3
    assert all(r[1] != "moe" for r in rows)
    assert rows[0][3] == pytest.approx(10 / 15)
    assert pr.step_rows({"gemm": 3.0, "moe": 0.0}) == [("step", "gemm", 3.0, 1.0)]


def test_excel_formats_show_at_most_four_significant_figures() -> None:
    assert pr.excel_format_for(2931.8) == "#,##0"
    assert pr.excel_format_for(28.49) == "#,##0.00"
    assert pr.excel_format_for(0.012345) == "#,##0.00000"
    assert pr.excel_format_for(6.0) == "#,##0"
    assert pr.excel_format_for(0.3, "pct") == "0.0%"
