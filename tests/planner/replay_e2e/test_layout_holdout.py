"""The e2e layout's duplicates and layout counts (``planner.replay_e2e.layout``) and campaign folds
and GPU folds
(``planner.replay_e2e.holdout``), several files read together."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hardware.errors import PlannerInputError
from planner.replay_e2e.holdout import campaign_folds, gpu_folds
from planner.replay_e2e.layout import drop_duplicates, layout_counts, read_rows


def _three_rows(**columns: list[object]) -> tuple[pd.DataFrame, int]:
    """``drop_duplicates`` of rows with ids b, a, c from three sources and ``columns``."""
    return drop_duplicates(
        pd.DataFrame({"id": ["b", "a", "c"], "silicon_data_source": ["x", "y", "z"], **columns})
    )


def test_duplicates_keep_the_lowest_id() -> None:
    kept, dropped = _three_rows(isl=[1, 1, 2], silicon_ttft_ms=[5.0, 5.0, 5.0])
    assert dropped == 1
    assert list(kept["id"]) == ["a", "c"]


def test_copies_differing_in_float_round_off_are_duplicates() -> None:
    kept, dropped = _three_rows(silicon_tpot_ms=[19.252099757615234, 19.25209975761523, 19.2621])
    assert dropped == 1 and list(kept["id"]) == ["a", "c"]
    assert kept["silicon_tpot_ms"].iloc[0] == 19.25209975761523  # values kept as read


def test_copies_written_to_a_hundredth_of_a_ms_are_duplicates() -> None:
    """The gap-analysis files restate InferenceMAX measurements to 0.01 ms; latencies that differ
    by more than that stay distinct measurements."""
    kept, dropped = _three_rows(
        silicon_ttft_ms=[148.606387, 148.61, 148.62], silicon_tpot_ms=[10.431418, 10.43, 10.43]
    )
    assert dropped == 1 and list(kept["id"]) == ["a", "c"]


def test_annotations_do_not_make_a_copy_distinct() -> None:
    """Campaign, layout provenance, the unmodellable note and launch settings read from a copy's
    source may differ between two copies of one measurement."""
    kept, dropped = _three_rows(
        isl=[1, 1, 2],
        campaign=["x", "y", "z"],
        memory_fraction=[0.8, float("nan"), 0.8],
        unmodellable=["benchmark_client", "", ""],
    )
    assert dropped == 1 and list(kept["id"]) == ["a", "c"]


def test_layouts_read_are_counted_by_where_they_were_read() -> None:
    df = pd.DataFrame({"layout_read_from": ["id", None, "columns", "id", ""]})
    assert layout_counts(df) == {"id": 2, "columns": 1}
    assert layout_counts(pd.DataFrame({"isl": [1]})) == {}


def test_campaigns_are_dealt_round_robin_and_never_split() -> None:
    src = [f"dump/{c}; config_id={i}; silicon_concurrency=4" for i, c in enumerate("cabcdeab")]
    camp = [s.split(";")[0] for s in src]
    folds = campaign_folds(pd.DataFrame({"silicon_data_source": src, "campaign": camp}), 2)
    by_campaign = {s.split(";")[0]: f for s, f in zip(src, folds, strict=True)}
    assert by_campaign == {"dump/a": 0, "dump/b": 1, "dump/c": 0, "dump/d": 1, "dump/e": 0}
    for s, f in zip(src, folds, strict=True):
        assert by_campaign[s.split(";")[0]] == f


def test_fold_count_is_checked() -> None:
    with pytest.raises(PlannerInputError, match="--folds"):
        campaign_folds(pd.DataFrame({"campaign": ["a"]}), 1)


def test_a_campaign_holdout_needs_the_campaign_column() -> None:
    with pytest.raises(PlannerInputError, match="campaign"):
        campaign_folds(pd.DataFrame({"silicon_data_source": ["a"]}), 2)


def test_each_gpu_is_one_fold_and_aliases_agree() -> None:
    rows = pd.DataFrame({"system": ["h200_sxm", "b200_sxm", "h200", "gb200"]})
    folds, names = gpu_folds(rows)
    assert names == ["b200_sxm", "gb200", "h200_sxm"]
    assert folds.tolist() == [2, 0, 2, 1]


def test_a_gpu_holdout_needs_two_gpus() -> None:
    with pytest.raises(PlannerInputError, match="two GPUs"):
        gpu_folds(pd.DataFrame({"system": ["h200_sxm", "h200_sxm"]}))


def _layout_file(path: Path, ids: list[str], ttft: list[float]) -> Path:
    pd.DataFrame(
        {
            "id": ids,
            "backend": "vllm",
            "model_path": "meta-llama/Llama-3.1-8B",
            "system": "h100_sxm",
            "mode": "agg",
            "isl": 1024,
            "osl": 128,
            "silicon_ttft_ms": ttft,
            "silicon_tpot_ms": 10.0,
        }
    ).to_csv(path, index=False)
    return path


def test_several_files_are_read_together_a_measurement_in_two_counting_once(
    tmp_path: Path,
) -> None:
    a = _layout_file(tmp_path / "a.csv", ["a1", "a2"], [100.0, 200.0])
    b = _layout_file(tmp_path / "b.csv", ["b1", "b2"], [200.0, 300.0])
    rows, dropped = read_rows([a, b])
    assert dropped == 1 and sorted(rows["id"]) == ["a1", "a2", "b2"]
    with pytest.raises(PlannerInputError, match="--data"):
        read_rows([])
