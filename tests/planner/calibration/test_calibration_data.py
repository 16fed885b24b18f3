"""Readers of a user's benchmark results: good files become rows, bad files one line and exit 2."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import planner.calibration.data as cd
from hardware.catalog import get_gpu
from planner.calibration.data import load_data
from planner.calibration.profile import prepared
from planner.cli.main import main
from planner.model.bundled import load_model
from planner.perf.estimate import estimate
from planner.replay_e2e.launch import named_runs
from planner.replay_e2e.predict import predict
from planner.workload.spec import fixed
from tests.planner.calibration.fixtures import native_result, small_plan

MODEL_ID = "meta-llama/Llama-3.1-8B-Instruct"


def _sidecar(backend: str = "vllm", **dep: Any) -> dict[str, Any]:
    deployment = {**small_plan()["best"]["deployment"], **dep}
    return {"deployment": deployment, "backend": backend, "engine_version": "0.33.0"}


def _run(
    folder: Path,
    backend: str = "vllm",
    sidecar: dict[str, Any] | None = None,
    results: list[dict[str, Any]] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if sidecar is not None:
        (folder / "deployment.json").write_text(json.dumps(sidecar))
    res = results or [native_result(backend, MODEL_ID, 1000, 8, 120.0, 12.0)]
    if backend == "sglang":
        (folder / "client0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in res))
    else:
        (folder / "client0.json").write_text(json.dumps(res[0], indent=2))
    return folder


def test_vllm_and_sglang_results_become_rows(tmp_path: Path) -> None:
    _run(tmp_path / "a", "vllm", _sidecar())
    two = [native_result("sglang", "", 2000, c, 200.0, 15.0) for c in (4, 32)]
    _run(tmp_path / "b", "sglang", _sidecar("sglang"), two)
    data = load_data(tmp_path)
    rows = data.rows.sort_values("batch_size")
    assert list(rows["backend"]) == ["sglang", "vllm", "sglang"]
    assert list(rows["batch_size"]) == [4, 8, 32] and list(rows["isl"]) == [2000, 1000, 2000]
    assert set(rows["osl"]) == {500} and set(rows["system"]) == {"h100_sxm"}
    # the mean lengths of the run itself: never read again as a harness's length draw
    assert set(rows["length_low_fraction"]) == {1.0}
    assert rows["silicon_ttft_ms"].tolist() == [200.0, 120.0, 200.0]
    assert [s["rows"] for s in data.sources] == [1, 2] and all(
        len(s["sha256"]) == 64 for s in data.sources
    )
    assert len(load_data(tmp_path, "sglang").rows) == 2


def test_results_name_their_benchmark_run(tmp_path: Path) -> None:
    """Request count (vLLM num_prompts, SGLang completed) and, where the file says, fixed
    lengths: SGLang's random dataset at range ratio 1, or per-request lengths."""
    vllm = native_result("vllm", MODEL_ID, 1000, 8, 120.0, 12.0)
    _run(tmp_path / "a", "vllm", _sidecar(), [{**vllm, "num_prompts": 64}])
    sg = native_result("sglang", "", 1000, 4, 120.0, 12.0)
    varied = [
        sg,
        {**sg, "random_range_ratio": 0.5},
        {**sg, "dataset_name": "sharegpt"},
        {**sg, "input_lens": [1000, 1000], "output_lens": [500, 499]},
    ]
    _run(tmp_path / "b", "sglang", _sidecar("sglang"), varied)
    rows = load_data(tmp_path).rows
    assert rows["bench_requests"].tolist() == [64, 20, 20, 20, 20]
    fixed = rows["fixed_lengths"].tolist()
    assert np.isnan(fixed[0]) and fixed[1:] == [1.0, 0.0, 0.0, 0.0]
    # varied lengths on SGLang keep the fitted share; unknown (vLLM) and fixed are named runs
    assert named_runs(rows).tolist() == [64, 20, 0, 0, 0]


def test_sglang_results_say_whether_the_server_mixed_chunks(tmp_path: Path) -> None:
    """SGLang's result carries the server's arguments (``server_info``): a fixed-length run on a
    server with --enable-mixed-chunk does not stay in lockstep, so it keeps the fitted share;
    the same run without the flag, or a result without server_info, is a named run."""
    sg = native_result("sglang", "", 1000, 4, 120.0, 12.0)
    runs = [
        {**sg, "server_info": {"enable_mixed_chunk": True, "chunked_prefill_size": 8192}},
        {**sg, "server_info": {"enable_mixed_chunk": False}},
        {**sg, "server_info": {"enable_mixed_chunk": "yes"}},
        sg,
    ]
    _run(tmp_path / "b", "sglang", _sidecar("sglang"), runs)
    rows = load_data(tmp_path).rows
    mixed = rows["mixed_chunk"].tolist()
    assert mixed[:2] == [1.0, 0.0] and np.isnan(mixed[2]) and np.isnan(mixed[3])
    assert rows["fixed_lengths"].tolist() == [1.0] * 4
    assert named_runs(rows).tolist() == [0, 20, 20, 20]
    vllm = rows.assign(backend="vllm")  # an engine that mixes by default: the flag changes nothing
    assert named_runs(vllm).tolist() == [20, 20, 20, 20]


def test_named_sglang_run_is_priced_as_estimate_prices_it(tmp_path: Path) -> None:
    """A fixed-length SGLang run of P requests: the row and `estimate --bench-requests P` agree;
    without the request count the row keeps the fitted share (and another price)."""
    _run(tmp_path / "a", "sglang", _sidecar("sglang"))
    rows, _ = prepared(load_data(tmp_path).rows)
    named = predict(rows, progress=False)
    unnamed = predict(rows.drop(columns=["bench_requests"]), progress=False)
    w = fixed(1000, 500, concurrency=8).model_copy(update={"bench_requests": 40})
    est = estimate(load_model("llama-3.1-8b-instruct"), get_gpu("h100_sxm"), w, backend="sglang")
    assert named["pred_ttft_ms"][0] == pytest.approx(est.ttft_ms.mean, rel=1e-6)
    assert abs(unnamed["pred_ttft_ms"][0] / named["pred_ttft_ms"][0] - 1) > 0.05


def test_csv_may_name_the_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "results"
    res.mkdir()
    head = "backend,model_path,system,mode,isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms"
    row = "sglang,llama-3.1-8b-instruct,h100_sxm,agg,1000,500,8,120,12"
    (res / "m.csv").write_text(f"{head},bench_requests,fixed_lengths\n{row},40,1\n{row},,\n")
    assert named_runs(load_data(res).rows).tolist() == [40, 0]
    (res / "m.csv").write_text(f"{head},bench_requests,fixed_lengths\n{row},40,0.5\n")
    _expect_exit_2(tmp_path, capsys, f"{res / 'm.csv'}:2:fixed_lengths", "(0 or 1)")
    (res / "m.csv").write_text(f"{head},bench_requests,mixed_chunk\n{row},40,1\n{row},40,0\n")
    assert named_runs(load_data(res).rows).tolist() == [0, 40]
    (res / "m.csv").write_text(f"{head},bench_requests,mixed_chunk\n{row},40,2\n")
    _expect_exit_2(tmp_path, capsys, f"{res / 'm.csv'}:2:mixed_chunk", "(0 or 1)")
    (res / "m.csv").write_text(f"{head},length_low_fraction\n{row},1.2\n")
    _expect_exit_2(tmp_path, capsys, f"{res / 'm.csv'}:2:length_low_fraction", "expected empty or")
    (res / "m.csv").write_text(f"{head},bench_requests\n{row},many\n")
    _expect_exit_2(tmp_path, capsys, f"{res / 'm.csv'}:2:bench_requests", "expected empty or")


def test_open_loop_runs_are_counted_not_fitted(tmp_path: Path) -> None:
    closed = native_result("vllm", MODEL_ID, 1000, 8, 120.0, 12.0)
    _run(tmp_path / "a", "vllm", _sidecar(), [{**closed, "request_rate": 4.0}])
    _run(tmp_path / "b", "vllm", _sidecar())
    data = load_data(tmp_path)
    assert len(data.rows) == 1 and data.skipped == {"open_loop_run": 1}


def _drop(key: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda r: {k: v for k, v in r.items() if k != key}


BAD_RESULTS: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]], str]] = [
    ("missing TTFT", _drop("mean_ttft_ms"), "field 'mean_ttft_ms' is missing"),
    ("missing concurrency", _drop("max_concurrency"), "field 'max_concurrency' is missing"),
    (
        "text for a number",
        lambda r: {**r, "completed": "many"},
        "field 'completed' must be a finite number",
    ),
    (
        "negative TPOT",
        lambda r: {**r, "mean_tpot_ms": -3.0},
        "field 'mean_tpot_ms' = -3.0 is outside",
    ),
    ("other model", lambda r: {**r, "model_id": "Qwen/Qwen3-32B"}, "does not match the deployment"),
]


@pytest.mark.parametrize(("what", "edit", "message"), BAD_RESULTS, ids=[b[0] for b in BAD_RESULTS])
def test_bad_result_is_one_line_naming_the_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    what: str,
    edit: Callable[[dict[str, Any]], dict[str, Any]],
    message: str,
) -> None:
    good = native_result("vllm", MODEL_ID, 1000, 8, 120.0, 12.0)
    folder = _run(tmp_path / "results" / "run-1", "vllm", _sidecar(), [edit(good)])
    _expect_exit_2(tmp_path, capsys, str(folder / "client0.json"), message)


def _expect_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], names: str, message: str
) -> None:
    out = tmp_path / "profile.yaml"
    assert main(["calibrate", "e2e", "--data", str(tmp_path / "results"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --data") and err.count("\n") == 1, err
    assert names in err and message in err, err
    assert not out.exists()


BAD_SIDECARS: list[tuple[str, dict[str, Any] | None, str]] = [
    ("no sidecar", None, "without a deployment.json sidecar"),
    ("hf id of another model", _sidecar(hf_id="Qwen/Qwen3-32B"), "field 'deployment.hf_id'"),
    ("unknown model", _sidecar(model="no-such-model"), "field 'deployment.model'"),
    ("unknown backend", {**_sidecar(), "backend": "tgi"}, "field 'backend' = 'tgi'"),
    (
        "no version",
        {k: v for k, v in _sidecar().items() if k != "engine_version"},
        "'engine_version' is missing",
    ),
    (
        "bad parallelism",
        _sidecar(agg={"parallel": {"tp": 0}}),
        "field 'deployment.agg.parallel.tp'",
    ),
]


@pytest.mark.parametrize(
    ("what", "sidecar", "message"), BAD_SIDECARS, ids=[b[0] for b in BAD_SIDECARS]
)
def test_bad_sidecar_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    what: str,
    sidecar: dict[str, Any] | None,
    message: str,
) -> None:
    folder = _run(tmp_path / "results" / "run-1", "vllm", sidecar)
    named = folder / ("client0.json" if sidecar is None else "deployment.json")
    _expect_exit_2(tmp_path, capsys, str(named), message)


def test_unreadable_files_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _run(tmp_path / "results" / "run-1", "vllm", _sidecar())
    (folder / "client0.json").write_bytes(b'{"completed": "\xff"}')
    _expect_exit_2(tmp_path, capsys, str(folder / "client0.json"), "not UTF-8")
    (folder / "client0.json").write_text("{not json")
    _expect_exit_2(tmp_path, capsys, str(folder / "client0.json"), "not JSON")
    (folder / "client0.json").unlink()
    os.mkfifo(folder / "client0.json")
    _expect_exit_2(tmp_path, capsys, str(folder / "client0.json"), "not a regular file")
    (folder / "client0.json").unlink()
    _run(folder, "vllm")
    assert (
        (folder / "client0.json").stat().st_size > 500 > (folder / "deployment.json").stat().st_size
    )
    monkeypatch.setattr(cd, "MAX_BYTES", 500)
    _expect_exit_2(tmp_path, capsys, str(folder / "client0.json"), "may be at most")


def test_csv_rows_checked_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "results"
    res.mkdir()
    head = "backend,model_path,system,mode,isl,osl,batch_size,silicon_ttft_ms,silicon_tpot_ms\n"
    (res / "m.csv").write_text(
        head + "vllm,llama-3.1-8b-instruct,h100_sxm,agg,1000,500,8,120,12\n"
        "vllm,llama-3.1-8b-instruct,h100_sxm,agg,1000,500,8,fast,12\n"
    )
    _expect_exit_2(tmp_path, capsys, f"{res / 'm.csv'}:3:silicon_ttft_ms", "positive finite number")
    (res / "m.csv").write_text("backend,isl\nvllm,1000\n")
    _expect_exit_2(tmp_path, capsys, str(res / "m.csv"), "lacks columns")
    (res / "m.csv").write_text(head + "vllm,llama-3.1-8b-instruct,h100_sxm,agg,1000,500,8,120,12\n")
    assert len(load_data(res).rows) == 1


def test_folder_without_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results").mkdir()
    _expect_exit_2(tmp_path, capsys, str(tmp_path / "results"), "no result files")


def test_missing_or_unknown_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.yaml"
    cases = ((tmp_path / "none", "does not exist"), (tmp_path / "r.txt", "expected a"))
    for data, message in cases:
        if data.suffix:
            data.write_text("x")
        assert main(["calibrate", "e2e", "--data", str(data), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --data") and message in err and err.count("\n") == 1
    assert not out.exists()
