"""Which KV pool a measured row is replayed at (``planner.replay_e2e.launch.kv_pool``), and the
memory flag of a deployment the replay could not otherwise start (``startup_utilization``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import get_gpu
from planner.engines.kv_pool import KvPool
from planner.engines.sglang.replay import AT_DEFAULT as SGLANG_AT_DEFAULT
from planner.model.bundled import load_model
from planner.perf.batch import CandidateArrays, Reason, ResultArrays, evaluate_batch
from planner.replay_e2e import predict as replay
from planner.replay_e2e.candidates import candidate_columns
from planner.replay_e2e.launch import kv_pool, kv_pools
from planner.replay_e2e.predict import STARTUP_UTILIZATIONS, predict, startup_utilization
from planner.workload.spec import fixed
from tests.lab import disagg_dump_row, lab_prepare


@pytest.mark.parametrize(
    ("backend", "version", "pool"),
    [
        ("vllm", "0.12.0", KvPool.VLLM),
        ("trtllm", "1.0.0rc3", KvPool.TRTLLM),
        ("trtllm", None, KvPool.TRTLLM),
        ("sglang", "0.5.1.post1", KvPool.SGLANG_052),
        ("sglang", "0.5.1-rc0.pre1", KvPool.SGLANG_052),
        ("sglang", "0.5.2", KvPool.SGLANG_052),
        ("sglang", "0.5.3", KvPool.SGLANG),
        ("sglang", "0.5.5.post2", KvPool.SGLANG),
        ("sglang", "0.5.9", KvPool.SGLANG),
        ("sglang", float("nan"), KvPool.SGLANG),  # no version: the newer rule
        ("sglang", "glm5-hopper", KvPool.SGLANG),  # a build tag, no version number
    ],
)
def test_each_engine_is_replayed_at_its_own_default(
    backend: str, version: object, pool: KvPool
) -> None:
    assert kv_pool(backend, version, flag_recorded=True) is pool


def test_sglang_rows_keep_the_device_fraction_unless_asked() -> None:
    """``SGLANG_AT_DEFAULT`` is off (a measured SGLang deployment could not have run at the
    default): SGLang rows keep a share of the device, TensorRT-LLM rows take their engine's
    default."""
    assert not SGLANG_AT_DEFAULT
    rows = pd.DataFrame({"backend": ["vllm", "sglang", "trtllm"], "backend_version": ["0.5.9"] * 3})
    assert np.array_equal(kv_pools(rows), [KvPool.VLLM, KvPool.VLLM, KvPool.TRTLLM])


def test_rows_without_a_version_column_are_read() -> None:
    rows = pd.DataFrame({"backend": ["vllm", "sglang", "trtllm"]})
    assert np.array_equal(kv_pools(rows), [KvPool.VLLM, KvPool.VLLM, KvPool.TRTLLM])


def _dep4_row(clients: int) -> dict[str, object]:
    """A GB200 DeepSeek-V3 FP8 deployment of DEP4 workers (181.7 GB of weights per GPU, above
    0.9 of the device): one prefill and four decode workers, one client per decode rank at 16."""
    dep4 = {"tp_size": 1, "attention_dp_size": 4, "moe_tp_size": 1, "moe_ep_size": 4}
    return disagg_dump_row(
        id=f"dsr1_gb200_sglang_fp8_disagg_1024x1024_c{clients}_cfg1",
        silicon_data_source=f"db-dump/x; config_id=1; silicon_concurrency={clients}; some:image",
        backend="sglang",
        backend_version="0.5.5.post2",
        decode_batch_size=clients / 16,
        decode_num_workers=4,
        **{f"{role}_{k}": v for role in ("prefill", "decode") for k, v in dep4.items()},
    )


def _cand(rows: pd.DataFrame) -> CandidateArrays:
    cols = [candidate_columns(r, "bf16") for _, r in rows.iterrows()]
    assert all(isinstance(c, dict) for c in cols)
    return CandidateArrays.from_lists(**{k: [c[k] for c in cols] for k in cols[0]})  # type: ignore[index]


def _replay(rows: list[dict[str, object]]) -> tuple[pd.DataFrame, Callable[[float], ResultArrays]]:
    """The prepared rows and their replay at a given share of the device (SGLang, GB200)."""
    prepared = lab_prepare(pd.DataFrame(rows)).rows
    cand = _cand(prepared)
    spec, gpu = load_model("deepseek-ai/DeepSeek-V3"), get_gpu("gb200")
    bench = fixed(1024, 1024, concurrency=1)

    def at(util: float) -> ResultArrays:
        return evaluate_batch(spec, gpu, cand, bench, backend="sglang", gpu_memory_utilization=util)

    return prepared, at


def test_a_deployment_the_replay_cannot_start_runs_at_the_flag_that_starts_it() -> None:
    """A measured deployment ran: the replay does not price it as one running request per
    worker (a queue of whole decodes, tens of seconds) but at the smallest memory flag that
    holds its clients (``startup_utilization``)."""
    rows, at = _replay([_dep4_row(16), _dep4_row(128)])
    assert (at(0.9).infeasible_reason == Reason.OUT_OF_MEMORY).all()
    started = startup_utilization(_cand(rows), at)
    assert np.all((started > 0.9) & (started <= 1.0))
    assert started[1] >= started[0]  # more clients hold more KV
    pred = predict(rows, progress=False)
    assert (pred["pred_ttft_ms"] < 2_000).all()
    assert (pred["pred_tpot_ms"] < 40).all()


def _never(*args: object, **kw: object) -> np.ndarray:
    raise AssertionError("a deployment was re-priced at another memory flag")


def test_a_deployment_that_starts_keeps_its_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """FP4 weights (about half the FP8 ones) start at 0.9 of the device: no re-pricing."""
    rows, at = _replay([_dep4_row(16) | {"precision": "fp4", "gemm_quant_mode": "nvfp4"}])
    assert (at(0.9).infeasible_reason != Reason.OUT_OF_MEMORY).all()
    monkeypatch.setattr(replay, "startup_utilization", _never)
    assert np.isfinite(predict(rows, progress=False)["pred_ttft_ms"]).all()


def test_a_flag_the_launch_recorded_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a flag no row records is inferred: a launch's own flag that does not start the
    deployment stays (the row is priced as the replay finds it)."""
    rows = lab_prepare(pd.DataFrame([_dep4_row(16) | {"memory_fraction": 0.82}])).rows
    monkeypatch.setattr(replay, "startup_utilization", _never)
    assert np.isfinite(predict(rows, progress=False)["pred_tpot_ms"]).all()


def test_a_deployment_no_flag_holds_gets_the_most_room() -> None:
    """4,096 clients on four DEP4 FP8 decode workers fit at no flag: the largest one is taken."""
    rows, at = _replay([_dep4_row(4096)])
    assert at(1.0).seq_capacity[0] < 4096 / 4  # no flag holds the clients
    assert startup_utilization(_cand(rows), at)[0] == STARTUP_UTILIZATIONS[-1] == 1.0
