"""Tests of the lab (``lab/``): measured data read from ../shared/validation, never copied; tests
that need it skip where it is absent."""

from pathlib import Path

import pandas as pd

from lab.prepare_e2e import prepare_frame
from planner.replay_e2e.candidates import Prepared, prepare
from planner.replay_e2e.layout import drop_duplicates, read_measurements

SILICON_MEASURED = (
    Path(__file__).resolve().parents[2] / ".." / "shared" / "validation" / "e2e"
) / "silicon_measured.csv"
"""The shared end-to-end measurements (absent on a checkout without ../shared: tests skip)."""
SILICON_MEASURED_B200 = SILICON_MEASURED.with_name("silicon_measured_b200.csv")
"""The B200 rows of the same source and layout (absent without ../shared: tests skip)."""


def lab_prepare(df: pd.DataFrame) -> Prepared:
    """Raw ``silicon_measured.csv`` rows prepared by the lab step, then by the product."""
    return prepare(prepare_frame(df))


def read_rows(path: Path) -> tuple[pd.DataFrame, int]:
    """The rows of a raw ``silicon_measured.csv``-layout file in the e2e layout, without
    duplicates; (rows, duplicates dropped)."""
    return drop_duplicates(prepare_frame(read_measurements(path)))


def prepared_file(raw: Path, out: Path) -> Path:
    """``python -m lab.prepare_e2e --data raw --out out``; returns ``out``."""
    prepare_frame(read_measurements(raw)).to_csv(out, index=False)
    return out


def disagg_dump_row(**kw: object) -> dict[str, object]:
    """A disaggregated row of the result-database dumps (``db-dump/...``) as silicon_measured.csv
    records it: DeepSeek-V3 FP8 on GB200, one prefill worker of attention DP 8 with EP 8 and three
    decode workers of TP 8 with EP 8 (TensorRT-LLM config 386 at 27 clients); ``kw`` replaces
    fields."""
    image = "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2"
    return {
        "id": "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c27_cfg386",
        "silicon_data_source": f"db-dump/2026-04-27; config_id=386; measured=2026-02-05; {image}",
        "backend": "trtllm",
        "backend_version": "0.8.1.post2",
        "model_path": "deepseek-ai/DeepSeek-V3",
        "system": "gb200",
        "precision": "fp8",
        "mode": "disagg",
        "isl": 1024,
        "osl": 1024,
        "gemm_quant_mode": "fp8",
        "prefill_batch_size": 1,
        "prefill_num_workers": 1,
        "prefill_tp_size": 1,
        "prefill_pp_size": 1,
        "prefill_attention_dp_size": 8,
        "prefill_moe_tp_size": 1,
        "prefill_moe_ep_size": 8,
        "decode_batch_size": 9,
        "decode_num_workers": 3,
        "decode_tp_size": 8,
        "decode_pp_size": 1,
        "decode_moe_tp_size": 1,
        "decode_moe_ep_size": 8,
        "silicon_ttft_ms": 1500.0,
        "silicon_tpot_ms": 30.0,
    } | kw
