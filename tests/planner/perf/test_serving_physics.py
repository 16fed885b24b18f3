"""Serving physics: elementwise traffic, all-reduce algorithm choice, attention-DP slots, prefill
batch size, start-up wave of a closed loop. Reference values are the formulas' own terms from model
configs (docs/architecture.md "Reference figures") and the kernels_db comm fit; no measured data."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from planner.engines import get_engine
from planner.engines.calibration import EnginePolicy
from planner.model.bundled import load_model
from planner.perf import queueing
from planner.perf.batch import CandidateArrays, evaluate_batch, parallel_arrays
from planner.perf.opgraph import StepMix, all_reduce_op, elementwise_elems_per_token, layer_groups
from planner.perf.pricer import default_pricer
from planner.workload.spec import fixed

H200 = get_gpu("h200")


def _par(tp: float, dp: float = 1.0) -> object:
    one = np.array([1.0])
    return parallel_arrays(
        H200, np.array([tp]), one, np.array([dp]), one, np.array([1.0]), np.array([1.0])
    )


def test_elementwise_traffic_of_llama_70b_layer() -> None:
    """Two add+RMSNorm kernels on the full hidden (8 passes), RoPE on q and k heads of the rank
    (read + write), SiLU-and-mul on the rank's FFN shard (3 widths): Llama-3.1-70B h 8192, 64/8
    heads, d 128, ffn 28672."""
    m = load_model("llama-3.1-70b")
    g = layer_groups(m)[0]
    for tp in (1.0, 8.0):
        want = 8 * 8192 + 2 * (64 + 8) * 128 / tp + 3 * 28672 / tp
        got = elementwise_elems_per_token(m, g, _par(tp))  # type: ignore[arg-type]
        assert float(np.asarray(got).ravel()[0]) == pytest.approx(want)


def test_decode_all_reduce_uses_the_faster_custom_algorithm() -> None:
    """A decode-sized TP all-reduce (64 KB over 8 GPUs) costs the custom all-reduce's few us, not
    NCCL's ~20 us; a prefill-sized one (128 MB) is bandwidth bound either way."""
    m = load_model("llama-3.1-70b")
    pricer = default_pricer(H200)
    for tokens in (4.0, 8192.0):
        mix = StepMix(np.array([tokens]), np.array([1000.0]), np.zeros(1), np.zeros(1), np.zeros(1))
        op = all_reduce_op("ar", m, 1.0, _par(8.0), mix)  # type: ignore[arg-type]
        t = float(pricer.price(op)[0][0])
        nccl = float(
            pricer.db.comm(
                "all_reduce", np.array([8]), np.asarray(op.nbytes, dtype=float), "nvlink"
            ).seconds[0]
        )
        assert t <= nccl + 1e-12
        if tokens < 100:
            assert t < 0.5 * nccl


def test_attention_dp_ranks_each_hold_max_num_seqs() -> None:
    """With attention DP every rank schedules its own batch: 4 ranks x 8 slots serve 32 clients
    without anyone waiting outside the engine, unlike one rank of 8 slots."""
    m = load_model("deepseek-v3")
    b200 = get_gpu("b200")
    c = CandidateArrays.from_lists(
        tp=[1, 4], dp=[4, 1], ep=[4, 4], weight_quant=2, kv_dtype=1, max_num_seqs=8, concurrency=32
    )
    r = evaluate_batch(m, b200, c, fixed(1024, 256, concurrency=32))
    assert r.decode_batch[0] > 8.0
    assert r.decode_batch[1] <= 8.0 + 1e-9


def test_prefill_batch_size_limits_prompts_per_prefill_step() -> None:
    """Disaggregated prefill workers that take one prompt per step (prefill batch 1) price each
    short prompt alone, so under load their TTFT is at least that of workers batching prompts up to
    the chunk."""
    m = load_model("llama-3.1-8b")
    c = CandidateArrays.from_lists(
        mode=1,
        tp=1,
        prefill_tp=1,
        workers=2,
        prefill_workers=1,
        concurrency=256,
        max_num_seqs=256,
        prefill_max_num_seqs=[1, 64],
    )
    # a benchmark run with its start-up wave (in steady state both prefill stages are saturated)
    bench = fixed(512, 256, concurrency=256).model_copy(update={"startup_wave": True})
    r = evaluate_batch(m, H200, c, bench)
    assert r.ttft_mean_s[0] >= r.ttft_mean_s[1]
    assert r.prefill_utilization[0] > r.prefill_utilization[1]


def test_start_up_wave_adds_to_steady_state() -> None:
    """N clients that start together: the k-th waits for k-1 prefills, mean (N-1)/2 of them."""
    w = np.array([0.1])
    assert float(queueing.burst_wait(w, np.array([9.0]))[0]) == pytest.approx(0.4)
    assert float(
        queueing.lockstep_response(np.array([0.05]), w, np.array([1.0]))[0]
    ) == pytest.approx(0.05)


def test_start_up_wave_replaces_steady_wait_for_its_share() -> None:
    """A run of W waves: 1/W of the requests see the lockstep wait, the rest the steady-state wait
    (not both); b = 0 is the steady state, b = 1 the lockstep response."""
    t, r, w, n = np.array([0.05]), np.array([0.15]), np.array([0.1]), np.array([9.0])
    assert float(queueing.wave_mix_response(t, r, w, n, 0.0)[0]) == pytest.approx(0.15)
    assert float(queueing.wave_mix_response(t, r, w, n, 1.0)[0]) == pytest.approx(0.45)
    assert float(queueing.wave_mix_response(t, r, w, n, 0.5)[0]) == pytest.approx(0.05 + 0.05 + 0.2)


def test_closed_loop_response_is_the_asymptotic_bound() -> None:
    """Below the knee N* = (Z + work)/work a prompt waits for nobody (R = t_own); past it the
    prefill stage is the bottleneck and R = N·work - Z, growing by ``work`` per extra client."""
    t, w, z = np.array([0.2]), np.array([0.1]), np.array([2.0])
    below = queueing.closed_loop_response(t, w, z, np.array([16.0]))
    above = queueing.closed_loop_response(t, w, z, np.array([40.0]))
    more = queueing.closed_loop_response(t, w, z, np.array([41.0]))
    assert float(below[0]) == pytest.approx(0.2)
    assert float(above[0]) == pytest.approx(40 * 0.1 - 2.0)
    assert float(more[0] - above[0]) == pytest.approx(0.1)


def test_on_demand_kv_holds_half_the_answer() -> None:
    """vLLM/SGLang allocate KV as tokens are generated (ISL + OSL/2 held on average); TRT-LLM's
    no-evict scheduler reserves ISL + OSL: the same GPU fits more vLLM sequences."""
    from hardware.catalog import get_gpu
    from planner.model.bundled import load_model
    from planner.perf.batch import CandidateArrays, evaluate_batch
    from planner.workload.spec import fixed

    m, g = load_model("llama-3.1-8b"), get_gpu("h100")
    c = CandidateArrays.from_lists(tp=1, concurrency=64)
    w = fixed(1000, 3000, concurrency=64)
    vllm, trt = (evaluate_batch(m, g, c, w, backend=b).seq_capacity[0] for b in ("vllm", "trtllm"))
    assert vllm / trt > 1.5


def test_per_request_cpu_overhead_grows_with_each_schedulers_batch() -> None:
    """``seq_overhead_s`` adds its time per running request of one scheduler: attention-DP ranks
    schedule their shares in parallel, so dp = 2 halves it."""
    from planner.perf.step import step_time

    m, gpu = load_model("llama-3.1-8b"), get_gpu("h100")
    mix = StepMix(np.array([64.0]), np.array([2000.0]), np.zeros(1), np.zeros(1), np.zeros(1))
    pricer = default_pricer(gpu)
    for dp in (1.0, 2.0):
        par = _par(1.0, dp)
        base = step_time(m, par, mix, pricer, overhead_s=0.002)  # type: ignore[arg-type]
        more = step_time(m, par, mix, pricer, overhead_s=0.002, seq_overhead_s=3e-5)  # type: ignore[arg-type]
        assert float(more[0] - base[0]) == pytest.approx(64 * 3e-5 / dp)


def test_disaggregated_requests_pay_their_own_request_overhead() -> None:
    """``disagg_request_overhead_s`` enters disaggregated TTFT (one for one at light load) and
    leaves aggregated candidates alone."""
    from planner.engines.calibration import Sourced, engine

    m, gpu = load_model("llama-3.1-8b"), get_gpu("h100")
    c = CandidateArrays.from_lists(
        tp=[1, 1],
        mode=[0, 1],
        prefill_tp=[1, 1],
        prefill_workers=[1, 1],
        workers=[1, 1],
        concurrency=[1.0, 1.0],
    )
    base = engine("vllm")
    more = base.model_copy(
        update={
            "disagg_request_overhead_s": Sourced(
                value=base.disagg_request_overhead_s.value + 0.1, source="test"
            )
        }
    )
    vllm = get_engine("vllm")
    a = evaluate_batch(
        m, gpu, c, fixed(1000, 100, concurrency=1), backend=EnginePolicy(vllm, base, "")
    )
    b = evaluate_batch(
        m, gpu, c, fixed(1000, 100, concurrency=1), backend=EnginePolicy(vllm, more, "")
    )
    assert b.ttft_mean_s[0] == a.ttft_mean_s[0]
    assert b.ttft_mean_s[1] - a.ttft_mean_s[1] == pytest.approx(0.1, rel=0.05)


def test_per_layer_qk_norm_all_reduces_its_statistics_under_tp() -> None:
    """MiniMax-M2's QK-norm spans all heads of a layer (qk_norm_type 'per_layer'); under TP each
    rank holds some heads, so every layer all-reduces two fp32 sums per token (vLLM
    MiniMaxText01RMSNormTP.forward_qk). Models with per-head QK-norm have no such op."""
    from planner.perf.opgraph import step_ops

    m = load_model("minimax-m2.5")
    assert m.qk_norm_across_heads and not load_model("qwen3-32b").qk_norm_across_heads
    mix = StepMix(np.array([16.0]), np.array([1000.0]), np.zeros(1), np.zeros(1), np.zeros(1))
    pricer = default_pricer(H200)
    for tp, priced in ((1.0, False), (4.0, True)):
        ops = {op.name: op for op in step_ops(m, _par(tp), mix)}  # type: ignore[arg-type]
        qk = ops["tp_all_reduce_qk_norm"]
        assert qk.count == m.num_layers and float(
            np.asarray(qk.nbytes).ravel()[0]
        ) == pytest.approx(16 * 8)
        assert (float(pricer.price(qk)[0][0]) > 0) == priced
    assert "tp_all_reduce_qk_norm" not in {
        op.name for op in step_ops(load_model("qwen3-32b"), _par(4.0), mix)
    }  # type: ignore[arg-type]


def _sglang_bench(osl_cv: float = 0.0) -> object:
    from planner.workload.spec import LengthSpec

    w = fixed(1024, 128, concurrency=16).model_copy(update={"bench_requests": 160})
    return w.model_copy(update={"osl": LengthSpec(mean=128, dist="lognormal", cv=osl_cv)})


def test_prefill_first_engine_keeps_a_fixed_length_benchmark_in_lockstep() -> None:
    """SGLang stalls decodes while prompts wait, so 16 clients with fixed lengths that start
    together stay in lockstep: each wave prefills all 16 prompts (g = 8 per 8192-token step), the
    k-th gets its first token after ceil(k/8) steps, and every request then waits for the rest of
    the wave before its decodes start (counted in TPOT); the clients complete one wave per cycle."""
    from planner.engines.calibration import engine

    m = load_model("qwen3-32b")
    h100 = get_gpu("h100_sxm")
    c = CandidateArrays.from_lists(tp=2, weight_quant=0, kv_dtype=0, concurrency=16)
    w = _sglang_bench()
    lock = evaluate_batch(m, h100, c, w, backend="sglang")  # type: ignore[arg-type]
    overhead = engine("sglang").request_overhead_s.value
    step = (lock.ttft_mean_s[0] - overhead) / 1.5  # mean of 1 and 2 steps for the two groups
    stall = step / 2.0  # half the wave left on average: (16 - 8)/2 prompts of step/8 each
    assert lock.mixed_prefill_tokens[0] == pytest.approx(8192.0)
    assert lock.decode_batch[0] == pytest.approx(16.0)
    t_dec = lock.tpot_mean_s[0] - stall / 127.0
    assert 0.0 < t_dec < step / 4.0  # a decode step of 16 is far cheaper than 8192 prompt tokens
    cycle = lock.ttft_mean_s[0] + 127.0 * lock.tpot_mean_s[0]
    assert lock.requests_per_s[0] * cycle == pytest.approx(16.0, rel=1e-6)
    # the same run on vLLM (prefill mixed into decode steps) is not priced as lasting lockstep
    mixed = evaluate_batch(m, h100, c, w, backend="vllm")  # type: ignore[arg-type]
    assert mixed.ttft_mean_s[0] < lock.ttft_mean_s[0]


def test_varied_lengths_or_unrecorded_protocol_leave_the_lockstep() -> None:
    """Varied answer lengths dephase the wave, and a validation row's unrecorded protocol
    (``startup_wave``) keeps the fitted first-wave share: neither is priced as lasting lockstep."""
    m = load_model("qwen3-32b")
    h100 = get_gpu("h100_sxm")
    c = CandidateArrays.from_lists(tp=2, weight_quant=0, kv_dtype=0, concurrency=16)
    lock = evaluate_batch(m, h100, c, _sglang_bench(), backend="sglang")  # type: ignore[arg-type]
    w_varied = _sglang_bench(0.5)
    varied = evaluate_batch(m, h100, c, w_varied, backend="sglang")  # type: ignore[arg-type]
    bench = fixed(1024, 128, concurrency=16).model_copy(update={"startup_wave": True})
    unrecorded = evaluate_batch(m, h100, c, bench, backend="sglang")
    assert varied.ttft_mean_s[0] < 0.8 * lock.ttft_mean_s[0]
    assert unrecorded.ttft_mean_s[0] < 0.8 * lock.ttft_mean_s[0]
