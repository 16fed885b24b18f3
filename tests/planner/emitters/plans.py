"""Plan dictionaries shaped like ``planner plan --format json`` output, for emitter tests."""

from __future__ import annotations

import copy
from typing import Any

_PREDICTED = {
    "ttft_ms": {"p50": 350.0, "p90": 700.0, "p99": 1100.0, "mean": 420.0},
    "tpot_ms": {"p50": 28.0, "p90": 31.0, "p99": 35.0, "mean": 29.0},
    "output_tok_s_per_gpu": 310.5,
    "output_tok_s_per_user": 34.1,
    "requests_per_s": 4.9,
}

DEFAULT_WORKER = {
    "parallel": {"tp": 4},
    "max_num_seqs": 128,
    "max_num_batched_tokens": 8192,
    "gpu_memory_utilization": 0.9,
    "kv_dtype": "bf16",
    "weight_quant": "bf16",
    "workers": 2,
}


def default_agg_plan() -> dict[str, Any]:
    """The issue's default: Llama-3.1-70B on H200, TP 4, 2 workers, 128 seqs, 8192 tokens, bf16."""
    return {
        "model": "llama-3.1-70b",
        "gpu": "h200_sxm",
        "workload": {"isl": 4000, "osl": 500, "concurrency": 64, "rate": None},
        "best": {
            "deployment": {
                "model": "llama-3.1-70b",
                "hf_id": "meta-llama/Llama-3.1-70B-Instruct",
                "checkpoint_quant": "bf16",
                "gpu": "h200_sxm",
                "mode": "agg",
                "agg": copy.deepcopy(DEFAULT_WORKER),
                "max_model_len": 8192,
                "cuda_graph_max_batch": 256,
            },
            "predicted": copy.deepcopy(_PREDICTED),
            "gpus": 8,
            "cost_per_million_output_tokens": 3.21,
            "binding_constraint": "tpot_slo",
        },
        "candidates": [],
    }


def disagg_plan() -> dict[str, Any]:
    """DeepSeek-V3 style P/D: 2 x TP4 prefill; 1 x DP-attention 8 + EP 8 decode in FP8."""
    plan = default_agg_plan()
    plan["model"] = "deepseek-v3"
    plan["workload"] = {"isl": 8000, "osl": 1000, "concurrency": None, "rate": 6.5}
    dep = plan["best"]["deployment"]
    del dep["agg"]
    dep.update(
        model="deepseek-v3",
        hf_id="deepseek-ai/DeepSeek-V3",
        checkpoint_quant="fp8",
        mode="disagg",
        max_model_len=10000,
    )
    dep["prefill"] = {
        **copy.deepcopy(DEFAULT_WORKER),
        "max_num_seqs": 16,
        "max_num_batched_tokens": 16384,
        "kv_dtype": "fp8",
        "weight_quant": "fp8",
    }
    dep["decode"] = {
        **copy.deepcopy(DEFAULT_WORKER),
        "parallel": {"tp": 1, "dp": 8, "ep": 8},
        "workers": 1,
        "max_num_seqs": 256,
        "gpu_memory_utilization": 0.85,
        "kv_dtype": "fp8",
        "weight_quant": "fp8",
    }
    plan["best"]["gpus"] = 16
    return plan


def two_types_plan() -> dict[str, Any]:
    """``disagg_plan`` with its prefill workers on H100 and its decode workers on H200."""
    plan = disagg_plan()
    plan["best"]["deployment"]["prefill_gpu"] = "h100_sxm"
    return plan


PLANS = {"agg": default_agg_plan, "disagg": disagg_plan}
