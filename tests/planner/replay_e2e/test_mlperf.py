"""`planner validate mlperf` on the shared MLPerf v4.1 table, and its input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from planner.cli.main import main
from planner.replay_e2e.mlperf import _backend, _benchmark_model, validate_mlperf
from planner.replay_e2e.rows import parse_version, resolve_model

DATA = Path(__file__).resolve().parents[3].parent / "shared/validation/e2e/mlperf_v4.1_llm.csv"


def test_benchmark_names_and_frameworks() -> None:
    assert (
        _benchmark_model("llama2-70b-99.9") == "llama2-70b"
        and _benchmark_model("gptj-99") == "gptj"
    )
    assert resolve_model("llama2-70b").key == "llama-2-70b"  # type: ignore[union-attr]
    assert resolve_model("gptj").key == "gpt-j-6b"  # type: ignore[union-attr]
    assert _backend("TensorRT 10.2.0, CUDA 12.4") == ("trtllm", False)
    assert _backend("vLLM 0.4.3+rocm614, PyTorch 2.3.0") == ("vllm", False)
    assert _backend("PyTorch") == ("vllm", True)


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("0.20 (per doc text)", (0, 20)),
        ("post-1.0", (1, 0)),
        ("v0.14.0", (0, 14, 0)),
        ("n/a", None),
    ],
)
def test_versions_are_read_wherever_written(text: str, version: tuple[int, ...] | None) -> None:
    assert parse_version(text) == version


def test_missing_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["validate", "mlperf", "--data", str(tmp_path / "nope.csv"), "--format", "json"]) == 2
    )
    err = capsys.readouterr().err
    assert "--data" in err and len(err.strip().splitlines()) == 1


@pytest.mark.validation
def test_mlperf_rows_are_modelled_and_within_the_stated_errors() -> None:
    """Issue 15 acceptance: >= 80 % of closed Offline rows and of closed Server rows with both
    limits modelled; Offline median APE <= 20 % (8.9 % at this commit), Server <= 25 % (11.7 %).
    No constant is fitted to these rows (the dataset lengths and the beam-search model are stated
    with their sources in ``planner.replay_e2e.mlperf``)."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    rep = validate_mlperf(DATA, progress=False)
    df = pd.read_csv(DATA)
    closed = df[df["division"] == "closed"]
    sc = closed["scenario"].str.lower()
    n_off = int((sc == "offline").sum())
    n_srv = int(
        (
            (sc == "server")
            & closed["ttft_constraint_ms"].notna()
            & closed["tpot_constraint_ms"].notna()
        ).sum()
    )
    groups = {(g["by"], g["key"]): g for g in rep["groups"]}  # type: ignore[attr-defined]
    assert set(rep) >= {"rows", "modelled", "skipped", "groups"}
    assert groups[("scenario", "offline")]["n"] >= 0.8 * n_off
    assert groups[("scenario", "server")]["n"] >= 0.8 * n_srv
    assert groups[("scenario", "server")]["throughput"]["median_ape_pct"] <= 25.0
    assert groups[("scenario", "offline")]["throughput"]["median_ape_pct"] <= 20.0
    assert {"overall", "scenario", "accelerator", "benchmark"} <= {b for b, _ in groups}
    skipped: dict[str, int] = rep["skipped"]  # type: ignore[assignment]
    assert rep["rows"] == rep["modelled"] + sum(skipped.values())
    json.dumps(rep)


def test_beam_search_is_priced_as_beams_sharing_one_prompt() -> None:
    """GPT-J's 4 beams: the prompt is prefilled and held once, so each beam sequence carries a
    quarter of it and its own output; single-beam benchmarks keep their lengths."""
    from planner.replay_e2e.mlperf import DATASETS, _beam_lengths

    gptj = DATASETS["gptj"]
    assert gptj.beams == 4
    assert _beam_lengths(gptj) == (gptj.isl / 4, gptj.osl)
    assert _beam_lengths(DATASETS["llama2-70b"]) == (294.0, 294.45)
    for ds in DATASETS.values():
        assert "submission_checker.py" in ds.source  # output lengths from the accuracy targets
