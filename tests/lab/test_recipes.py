"""The InferenceMAX launch flags a measured row is replayed at (``lab.recipes``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.errors import PlannerInputError
from lab.prepare_e2e import prepare_frame
from lab.recipes import (
    activation_scales,
    load_recipes,
    recipe_arrays,
    recipe_chunks,
    recipe_expert_parallel,
    recipe_for,
    recipe_kv_dtype,
    recipe_memory_flags,
)
from planner.engines.kv_pool import KvPool
from planner.perf.batch import KV_DTYPES
from planner.replay_e2e.candidates import candidate_columns, prepare
from planner.replay_e2e.launch import kv_pools
from planner.replay_e2e.predict import predict


def _row(model: str, backend: str, system: str = "h200_sxm", **kw: object) -> dict[str, object]:
    return {
        "id": f"r_{model}_{backend}",
        "silicon_data_source": f"source_file=2026-04-06.csv; model={model}; silicon_concurrency=4",
        "backend": backend,
        "backend_version": "1.0.0",
        "model_path": "meta-llama/Llama-3.1-70B",
        "system": system,
        "mode": "agg",
        "isl": 1024,
        "osl": 1024,
        "gemm_quant_mode": "fp8",
        "batch_size": 4,
        "tp_size": 4,
        "pp_size": 1,
        "silicon_ttft_ms": 200.0,
        "silicon_tpot_ms": 10.0,
        **kw,
    }


def _cols(row: pd.Series, weight_default: str) -> dict[str, float] | str:
    """The candidate columns of a raw row once the lab step has prepared it (``prepare_e2e``)."""
    return candidate_columns(prepare_frame(pd.DataFrame([row])).iloc[0], weight_default)


def test_the_packaged_recipes_load_and_name_their_scripts() -> None:
    recipes = load_recipes()
    assert len(recipes) >= 5
    assert all("@" in r.source and "benchmarks/" in r.source for r in recipes)


def test_a_recipe_sets_the_rows_kv_dtype() -> None:
    """InferenceMAX ran Llama-3.3-70B-FP8 on vLLM with an FP8 KV cache; the replay's engine
    default for vLLM is the model's dtype."""
    vllm = pd.Series(_row("Llama-3.1-70B", "vllm"))
    assert recipe_kv_dtype(vllm) == "fp8"
    assert _cols(vllm, "bf16")["kv_dtype"] == KV_DTYPES.index("fp8")  # type: ignore[index]
    gpt = pd.Series(_row("GPT-OSS-120B", "trtllm", gemm_quant_mode="nvfp4"))
    assert _cols(gpt, "bf16")["kv_dtype"] == KV_DTYPES.index("bf16")  # type: ignore[index]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"mode": "disagg"}, "multi-node recipes are other scripts"),
        ({"system": "b200_sxm"}, "no recipe read for this GPU"),
        ({"silicon_data_source": "db-dump/2026-04-27; config_id=181"}, "no model label"),
        ({"silicon_data_source": "source_file=x.csv; model=Llama-3.1-70B;"}, "not a dated export"),
    ],
)
def test_other_rows_keep_the_engine_defaults(change: dict[str, object], why: str) -> None:
    row = pd.Series(_row("Llama-3.1-70B", "vllm") | change)
    assert recipe_for(row) is None, why


def test_the_deepseek_token_budget_follows_its_scripts_rule() -> None:
    """MAX_NUM_TOKENS=$(( ($CONC+$ISL+64+63)/64*64 ))."""
    rows = pd.DataFrame(
        [
            _row("DeepSeek-R1", "trtllm", isl=1024, c_concurrency=4.0),
            _row("DeepSeek-R1", "trtllm", isl=8192, c_concurrency=64.0),
            _row("Llama-3.1-70B", "trtllm", c_concurrency=4.0),
            _row("Kimi-K2.5", "vllm", c_concurrency=4.0),
        ]
    )
    got = recipe_chunks(rows)
    assert got[:3].tolist() == [1152.0, 8320.0, 16384.0] and np.isnan(got[3])


def test_predict_prices_a_recipe_rows_chunk() -> None:
    """A TensorRT-LLM Llama-3.1-70B row at 64 clients of 8,192-token prompts: its script's 16,384
    token budget prices TTFT unlike the engine default of 8,192."""
    base = _row("Llama-3.1-70B", "trtllm", isl=8192, batch_size=64)
    other = base | {"id": "plain", "silicon_data_source": "mine"}
    pred = predict(prepare(prepare_frame(pd.DataFrame([base, other]))).rows, progress=False)
    recipe_ttft, plain_ttft = pred["pred_ttft_ms"].to_numpy()
    assert recipe_ttft != pytest.approx(plain_ttft, rel=1e-3)


def test_a_recorded_memory_flag_reaches_the_pool() -> None:
    """GLM-5 on SGLang ran --mem-fraction-static 0.85: the row's pool follows SGLang's rule at
    that fraction (other SGLang rows keep the replay's default pool); TensorRT-LLM gpt-oss ran
    free_gpu_memory_fraction 0.85."""
    rows = pd.DataFrame(
        [
            _row("GLM-5", "sglang", backend_version="glm5-hopper"),
            _row("Kimi-K2.5", "sglang"),
            _row("GPT-OSS-120B", "trtllm"),
        ]
    )
    flags = recipe_memory_flags(rows)
    assert flags[0] == 0.85 and np.isnan(flags[1]) and flags[2] == 0.85
    pools = kv_pools(prepare_frame(rows))
    assert pools.tolist() == [int(KvPool.SGLANG), int(KvPool.VLLM), int(KvPool.TRTLLM)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("recipes: 1\n", "needs a 'recipes' list"),
        ("recipes: [{model: a, backend: vllm, source: s}]\n", "'systems' must list"),
        (
            "recipes: [{model: a, backend: vllm, systems: [h100_sxm], source: s, "
            "kv_dtype: int4}]\n",
            "kv_dtype",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h100_sxm], source: s, "
            "max_num_tokens: 0}]\n",
            "max_num_tokens must be",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h100_sxm], source: s, "
            "memory_fraction: 1.5}]\n",
            "memory_fraction must be",
        ),
        (
            "recipes: [{model: a, backend: trtllm, systems: [h100_sxm], source: s, "
            "adp_balance_timeout_iters: 0}]\n",
            "adp_balance_timeout_iters must be",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h100_sxm], source: s, "
            "adp_balance_timeout_iters: 60}]\n",
            "TensorRT-LLM option",
        ),
        (
            "recipes: [{model: a, backend: trtllm, systems: [h100_sxm], source: s, "
            "expert_parallel_all_ranks: 'yes'}]\n",
            "expert_parallel_all_ranks must be",
        ),
        (
            "recipes: [{model: a, backend: trtllm, systems: [h1], source: s, "
            "batch_wait: {timeout_iters: 20, max_tokens_ratio: 1.5}}]\n",
            "max_tokens_ratio must be",
        ),
        (
            "recipes: [{model: a, backend: trtllm, systems: [h1], source: s, "
            "batch_wait: {timeout_iters: 20, max_tokens_ratio: 0.9, when: 1}}]\n",
            "batch_wait must be a mapping",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h1], source: s, "
            "batch_wait: {timeout_iters: 20, max_tokens_ratio: 0.9}}]\n",
            "batch_wait is a TensorRT-LLM option",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h1], source: s, "
            "measured_from: 2026-03-13}, "
            "{model: a, backend: vllm, systems: [h1], source: t, measured_before: 2026-03-20}]\n",
            "listed twice for the same dates",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h1], source: s, "
            "measured_from: 'March'}]\n",
            "measured_from must be a date",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h1], source: s}, "
            "{model: a, backend: vllm, systems: [h1], source: t}]\n",
            "listed twice for the same dates",
        ),
        (
            "recipes: [{model: a, backend: vllm, systems: [h1], source: s, "
            "activation_scale: dynamic}]\n",
            "activation_scale 'dynamic' not one of",
        ),
    ],
)
def test_a_malformed_recipe_file_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(PlannerInputError, match=message):
        load_recipes(path)


def test_the_deepseek_balance_timeout_applies_where_the_script_enabled_attention_dp() -> None:
    """dsr1_fp8_h200_trt_slurm.sh sets attention_dp_config {enable_balance: true, timeout_iters:
    60} only with DP_ATTENTION=true: a row with attention DP 8 gets it, one with TP 8 does not, and
    no other recipe sets it."""
    rows = pd.DataFrame(
        [
            _row("DeepSeek-R1", "trtllm", c_concurrency=128.0, c_dp=8.0),
            _row("DeepSeek-R1", "trtllm", c_concurrency=16.0, c_dp=1.0),
            _row("GPT-OSS-120B", "trtllm", c_concurrency=16.0, c_dp=8.0),
        ]
    )
    assert recipe_arrays(rows).adp_balance_iters.tolist() == [60.0, 0.0, 0.0]


def test_predict_holds_a_balanced_rows_prompts() -> None:
    """The InferenceMAX DeepSeek-R1 TensorRT-LLM row with attention DP 8 is priced with the balance
    wait: TTFT above the same deployment without a recipe."""
    base = _row(
        "DeepSeek-R1",
        "trtllm",
        model_path="deepseek-ai/DeepSeek-R1",
        batch_size=16,
        tp_size=1,
        attention_dp_size=8,
        moe_ep_size=8,
        moe_tp_size=1,
    )
    other = base | {"id": "plain", "silicon_data_source": "mine"}
    pred = predict(prepare(prepare_frame(pd.DataFrame([base, other]))).rows, progress=False)
    recipe_ttft, plain_ttft = pred["pred_ttft_ms"].to_numpy()
    assert recipe_ttft > plain_ttft + 300.0


def test_the_scripts_moe_layout_replaces_the_exports() -> None:
    """The DeepSeek-R1 and gpt-oss-120b TensorRT-LLM scripts ran --ep_size = TP; the 2025-11-02
    export records their MoE layers tensor-parallel (moe_tp_size = TP, moe_ep_size 1). Other rows
    keep the layout they record."""
    dsr1 = pd.Series(
        _row(
            "DeepSeek-R1",
            "trtllm",
            model_path="deepseek-ai/DeepSeek-R1",
            tp_size=8,
            moe_tp_size=8,
            moe_ep_size=1,
            attention_dp_size=1,
        )
    )
    assert recipe_expert_parallel(dsr1)
    assert _cols(dsr1, "fp8")["ep"] == 8  # type: ignore[index]
    sglang = pd.Series(dict(dsr1) | {"backend": "sglang"})
    assert not recipe_expert_parallel(sglang)
    assert _cols(sglang, "fp8")["ep"] == 1  # type: ignore[index]


def test_a_script_that_changed_between_runs_applies_by_measurement_date() -> None:
    """MiniMax-M2.5 on H200 vLLM: the 2026-03-01 runs (TP 4) had no expert parallel; from
    2026-03-13 the script passes --enable-expert-parallel (the 2026-03-27/28 runs, TP 8)."""

    def dated(day: str) -> pd.Series:
        src = f"source_file=2026-04-06.csv; model=MiniMax-M2.5; measured={day}T00:00:00.000Z"
        return pd.Series(_row("MiniMax-M2.5", "vllm", silicon_data_source=src, tp_size=8))

    assert not recipe_expert_parallel(dated("2026-03-01"))
    assert recipe_expert_parallel(dated("2026-03-28"))
    assert recipe_memory_flags(
        pd.DataFrame([dated("2026-03-01"), dated("2026-03-28")])
    ).tolist() == [
        0.95,
        0.95,
    ]
    undated = pd.Series(_row("MiniMax-M2.5", "vllm"))
    assert recipe_for(undated) is None  # a bounded entry needs the row's date


def test_llama_batch_waiting_applies_to_the_runs_the_script_set_it_for() -> None:
    """70b_fp8_h200_trt_slurm.sh sets batch_wait_timeout_iters 20 and batch_wait_max_tokens_ratio
    0.9 only for ISL = OSL = 1024 below TP 8; its threshold is 0.9 x the script's 16,384 tokens."""
    rows = pd.DataFrame(
        [
            _row("Llama-3.1-70B", "trtllm", c_tp=4.0, c_concurrency=16.0),
            _row("Llama-3.1-70B", "trtllm", c_tp=8.0, c_concurrency=16.0),
            _row("Llama-3.1-70B", "trtllm", c_tp=4.0, c_concurrency=16.0, isl=8192),
            _row("Llama-3.1-70B", "vllm", c_tp=4.0, c_concurrency=16.0),
        ]
    )
    got = recipe_arrays(rows)
    assert got.batch_wait_iters.tolist() == [20.0, 0.0, 0.0, 0.0]
    assert got.batch_wait_tokens[0] == pytest.approx(0.9 * 16384)


def test_a_rows_fp8_activation_scale_comes_from_its_recipe_or_its_quant_mode() -> None:
    rows = pd.DataFrame(
        [
            _row("Llama-3.1-70B", "vllm"),  # the script served a ModelOpt FP8 checkpoint
            _row("Llama-3.1-70B", "sglang"),  # no recipe: the label's checkpoint decides
            _row("Llama-3.1-70B", "sglang", gemm_quant_mode="fp8_block"),  # recorded: blocks
        ]
    )
    assert list(activation_scales(rows)) == ["static", "", "block"]


def test_predict_prices_the_rows_activation_scale() -> None:
    rows = prepare(prepare_frame(pd.DataFrame([_row("Llama-3.1-70B", "sglang")]))).rows
    tpot = {}
    for scale in ("", "static", "block"):
        got = predict(rows.assign(activation_scale=scale), progress=False)
        tpot[scale] = float(got["pred_tpot_ms"].iloc[0])
    # a 16-bit label run at fp8 is quantized on load (a whole-tensor scale before every GEMM
    # input); a static-scale checkpoint skips that pass; block scales cost compute, not decode
    assert tpot[""] > tpot["static"]
    assert tpot["block"] == pytest.approx(tpot["static"], rel=0.02)


def test_a_dump_row_takes_the_recipe_its_id_prefix_names() -> None:
    """The result-database dump records no model label (and names DeepSeek-R1 runs DeepSeek-V3);
    its ids start with InferenceX's model-prefix: ``dsr1_`` rows run the DeepSeek-R1 script."""
    from lab.recipes import model_label

    src = "db-dump/2026-04-27; config_id=181; silicon_concurrency=16; measured=2025-12-15T00:00Z"
    dump = _row(
        "x",
        "trtllm",
        id="dsr1_h200_trtllm_fp8_agg_1024x1024_c16_cfg181",
        silicon_data_source=src,
        model_path="deepseek-ai/DeepSeek-V3",
    )
    assert model_label(dump) == "DeepSeek-R1"
    r = recipe_for(pd.Series(dump))
    assert r is not None and r.kv_dtype == "fp8" and r.expert_parallel_all_ranks
    assert r.tokens(16.0, 1024.0) == 1152.0
    for other in ({"id": "gptoss_h200_x_cfg9"}, {"id": "dsr1_x", "mode": "disagg"}):
        assert recipe_for(pd.Series(dump | other)) is None
