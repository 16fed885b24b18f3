"""The decode caps InferenceMAX disaggregated rows are replayed at
(``lab.disagg_recipes``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.errors import PlannerInputError
from lab.disagg_recipes import (
    decode_cap,
    launch_expert_parallel,
    load_disagg_recipes,
    load_expert_parallel_launches,
    matching_recipe,
)
from lab.prepare_e2e import prepare_frame
from planner.replay_e2e.candidates import candidate_columns
from planner.replay_e2e.predict import predict
from tests.lab import disagg_dump_row, lab_prepare

IMAGE = "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2"


def _row(clients: int = 27, **kw: object) -> dict[str, object]:
    """A dump row of the packaged 3-worker GB200 deployment (prefill attention DP 8, decode TP 8
    with EP 8, 8 slots per decode worker at 27 clients)."""
    own = {
        "id": f"dsr1_gb200_trtllm_fp8_disagg_1024x1024_c{clients}_cfg386",
        "decode_batch_size": clients / 3,
    }
    return disagg_dump_row(**(own | kw))


def _cols(row: pd.Series | dict[str, object]) -> dict[str, float] | str:
    """The candidate columns of a raw row once the lab step has prepared it (``prepare_e2e``)."""
    frame = prepare_frame(pd.DataFrame([dict(row)]))
    return candidate_columns(frame.iloc[0], "bf16")


def test_the_packaged_entries_load_and_name_their_source() -> None:
    entries = load_disagg_recipes()
    assert len(entries) >= 30
    for e in entries:
        assert "nvidia-master.yaml" in e.source
        assert re.search(r"@[0-9a-f]{40} \(\d{4}-\d{2}-\d{2}\)", e.source), e.source
        assert "batch" in e.source.lower(), e.source  # the recipe or setting the cap is read from


def test_a_matching_row_gets_its_recipes_decode_cap() -> None:
    row = pd.Series(_row())
    assert decode_cap(row, 27) == 8.0
    cols = _cols(row)
    assert isinstance(cols, dict)
    assert cols["max_num_seqs"] == 8.0
    assert cols["concurrency"] == 27.0


@pytest.mark.parametrize(
    ("change", "clients", "why"),
    [
        ({}, 28, "a client count the entry does not list"),
        ({"mode": "agg"}, 27, "aggregated rows have their own recipes"),
        ({"silicon_data_source": "source_file=2026-04-06.csv; model=DeepSeek-R1;"}, 27, "no dump"),
        ({"silicon_data_source": "db-dump/2026-04-27; config_id=386; other:image"}, 27, "image"),
        ({"decode_num_workers": 4}, 27, "another decode layout"),
        ({"isl": 8192}, 27, "another workload"),
        ({"model_path": "moonshotai/Kimi-K2.5"}, 27, "another model"),
    ],
)
def test_other_rows_keep_the_clients_per_rank_reading(
    change: dict[str, object], clients: int, why: str
) -> None:
    row = pd.Series(_row() | change)
    assert matching_recipe(row, clients) is None, why
    assert np.isnan(decode_cap(row, clients)), why


def test_a_cap_below_the_clients_prices_a_wait_for_a_decode_slot() -> None:
    """27 clients on 3 x 8 slots: three requests wait for a slot, which the replay of the old
    reading (a cap of 9 per worker, the clients per worker) did not price."""
    capped = pd.DataFrame([_row()])
    uncapped = pd.DataFrame([_row(silicon_data_source="db-dump/2026-04-27; config_id=1; x:y")])
    with_cap = predict(lab_prepare(capped).rows, progress=False)
    without = predict(lab_prepare(uncapped).rows, progress=False)
    assert with_cap["pred_ttft_ms"].iloc[0] > 1.5 * without["pred_ttft_ms"].iloc[0]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("decode_max_batch_size: 0", "decode_max_batch_size must be a whole number"),
        ("decode_max_batch_size: 8.5", "decode_max_batch_size must be a whole number"),
        ("concurrency: []", "concurrency must list client counts"),
        ("decode: {workers: 3, gpus: 8}", "decode must be a mapping of workers, gpus and ep"),
        ("source: ''", "source must be a non-empty string"),
    ],
)
def test_a_malformed_file_is_refused(tmp_path: Path, entry: str, message: str) -> None:
    good = {
        "model": "model: m",
        "image": "image: i",
        "system": "system: gb200",
        "precision": "precision: fp8",
        "isl": "isl: 1024",
        "osl": "osl: 1024",
        "prefill": "prefill: {workers: 1, gpus: 8, ep: 8}",
        "decode": "decode: {workers: 3, gpus: 8, ep: 8}",
        "concurrency": "concurrency: [27]",
        "decode_max_batch_size": "decode_max_batch_size: 8",
        "source": "source: s",
    }
    good[entry.split(":")[0]] = entry
    path = tmp_path / "d.yaml"
    path.write_text("deployments:\n  - " + "\n    ".join(good.values()) + "\n")
    with pytest.raises(PlannerInputError, match=message):
        load_disagg_recipes(path)


def test_one_cap_per_deployment_and_client_count(tmp_path: Path) -> None:
    entry = (
        "  - {model: m, image: i, system: gb200, precision: fp8, isl: 1024, osl: 1024, "
        "prefill: {workers: 1, gpus: 8, ep: 8}, decode: {workers: 3, gpus: 8, ep: 8}, "
        "concurrency: [27, CLIENTS], decode_max_batch_size: CAP, source: s}\n"
    )
    path = tmp_path / "d.yaml"
    path.write_text(
        "deployments:\n"
        + entry.replace("CLIENTS", "30").replace("CAP", "8")
        + entry.replace("CLIENTS", "40").replace("CAP", "16")
    )
    with pytest.raises(PlannerInputError, match=r"repeats deployments\[0\] at 27 clients"):
        load_disagg_recipes(path)


SGLANG_DEC = "lmsysorg/sglang:v0.5.5.post2"


def _sglang_row(**kw: object) -> dict[str, object]:
    """A December 2025 SGLang GB200 dump row as the dump records it: attention DP 4 on one
    prefill worker and four decode workers, expert parallelism 1 (the launch ran DEP4)."""
    return (
        _row(
            id="dsr1_gb200_sglang_fp8_disagg_1024x1024_c16_cfg227",
            silicon_data_source=(
                f"db-dump/2026-04-27; config_id=227; silicon_concurrency=16; measured=2025-12-21; "
                f"{SGLANG_DEC}"
            ),
            backend="sglang",
            backend_version="0.5.5.post2",
            prefill_attention_dp_size=4,
            prefill_moe_tp_size=4,
            prefill_moe_ep_size=1,
            decode_batch_size=1,
            decode_num_workers=4,
            decode_tp_size=1,
            decode_attention_dp_size=4,
            decode_moe_tp_size=4,
            decode_moe_ep_size=1,
        )
        | kw
    )


def test_the_packaged_dep_launches_load_and_name_their_source() -> None:
    launches = load_expert_parallel_launches()
    assert {(e.image, e.system) for e in launches} >= {(SGLANG_DEC, "gb200")}
    for e in launches:
        assert "nvidia-master.yaml" in e.source and "--enable-deepep-moe" in e.source


def test_a_dep_launch_spans_each_attention_dp_worker_with_expert_parallelism() -> None:
    row = pd.Series(_sglang_row())
    assert launch_expert_parallel(row)
    cols = _cols(row)
    assert isinstance(cols, dict)
    assert (cols["dp"], cols["ep"], cols["prefill_dp"], cols["prefill_ep"]) == (4, 4, 4, 4)
    assert cols["concurrency"] == 16.0  # the clients stay as recorded


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            {"silicon_data_source": "db-dump/2026-04-27; config_id=481; x:lmsysorg/sglang:v0.5.8"},
            "another image (the February 2026 runs record their EP)",
        ),
        ({"system": "h200_sxm"}, "another GPU"),
        ({"mode": "agg"}, "aggregated rows"),
    ],
)
def test_other_launches_keep_the_recorded_expert_parallelism(
    change: dict[str, object], why: str
) -> None:
    row = pd.Series(_sglang_row() | change)
    assert not launch_expert_parallel(row), why


def test_a_worker_without_attention_dp_keeps_its_recorded_layout() -> None:
    """The fp4 8k1k low-latency entry ran its prefill worker without attention DP (TP 4)."""
    row = pd.Series(
        _sglang_row(prefill_tp_size=4, prefill_attention_dp_size=1, prefill_moe_tp_size=4)
    )
    cols = _cols(row)
    assert isinstance(cols, dict)
    assert (cols["prefill_tp"], cols["prefill_dp"], cols["prefill_ep"]) == (4, 1, 1)
    assert (cols["dp"], cols["ep"]) == (4, 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- x", "needs a mapping at the top level"),
        ("expert_parallel_launches: {image: i}", "expert_parallel_launches must be a list"),
        (
            "expert_parallel_launches:\n  - {image: i, system: gb200, source: s}",
            r"expert_parallel_launches\[0\]: needs exactly",
        ),
        (
            "expert_parallel_launches:\n  - {model: m, image: ' i', system: gb200, source: s}",
            r"expert_parallel_launches\[0\]: image has surrounding spaces",
        ),
        (
            "expert_parallel_launches:\n  - {model: m, image: i, system: GB200, source: s}",
            r"expert_parallel_launches\[0\]: system 'GB200' is not a GPU key; known: .*gb200",
        ),
        (
            "expert_parallel_launches:\n  - {model: m, image: i, system: gb200, source: 3}",
            r"expert_parallel_launches\[0\]: source must be a non-empty string",
        ),
        (
            "expert_parallel_launches:\n  - {model: m, image: i, system: gb200, source: s}\n"
            "  - {model: m, image: i, system: gb200, source: t}",
            r"expert_parallel_launches\[1\] repeats expert_parallel_launches\[0\]",
        ),
    ],
)
def test_a_malformed_launch_list_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(text + "\n")
    with pytest.raises(PlannerInputError, match=message):
        load_expert_parallel_launches(path)


def test_a_launch_matches_its_model_only() -> None:
    row = pd.Series(_sglang_row(model_path="moonshotai/Kimi-K2.5"))
    assert not launch_expert_parallel(row)


def test_a_deployment_behind_slot_blind_routers_waits_with_free_slots_elsewhere() -> None:
    """Config 386 at 3 clients: 3 decode workers of one slot behind 7 srt-slurm frontends, each
    routing round-robin without looking at free slots. Measured TTFT 4,963 ms; with the slots
    pooled (no wait while one is free) the replay priced 154 ms."""
    from lab.disagg_recipes import decode_routers

    row = _row(clients=3, decode_batch_size=1)
    row["id"] = "dsr1_gb200_trtllm_fp8_disagg_1024x1024_c3_cfg386"
    assert decode_routers(pd.Series(row), 3) == 7.0
    blind = predict(lab_prepare(pd.DataFrame([row])).rows, progress=False)["pred_ttft_ms"].iloc[0]
    other = _row(clients=3, decode_batch_size=1, silicon_data_source="db-dump/x; config_id=1; y:z")
    rows = lab_prepare(pd.DataFrame([other])).rows
    pooled = predict(rows, progress=False)["pred_ttft_ms"].iloc[0]
    assert blind > 10 * pooled
    assert np.isnan(decode_routers(pd.Series(other), 3))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("decode_routers: 7", "optionally both of"),
        ("routers_source: s", "optionally both of"),
        ("decode_routers: 0\n    routers_source: s", "decode_routers must be a whole number"),
        ("decode_routers: 65\n    routers_source: s", "decode_routers must be a whole number"),
        ("decode_routers: 7\n    routers_source: ''", "routers_source must be a non-empty"),
    ],
)
def test_routers_come_with_their_source(tmp_path: Path, extra: str, message: str) -> None:
    entry = (
        "model: m\n    image: i\n    system: gb200\n    precision: fp8\n    isl: 1024\n"
        "    osl: 1024\n    prefill: {workers: 1, gpus: 8, ep: 8}\n"
        "    decode: {workers: 3, gpus: 8, ep: 8}\n    concurrency: [3]\n"
        "    decode_max_batch_size: 1\n    source: s\n    "
    )
    path = tmp_path / "d.yaml"
    path.write_text("deployments:\n  - " + entry + extra + "\n")
    with pytest.raises(PlannerInputError, match=message):
        load_disagg_recipes(path)
