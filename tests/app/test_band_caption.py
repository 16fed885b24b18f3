"""The recommendation card's band line and the Pareto star's error bar (issue 17)."""

from __future__ import annotations

from app.plan_results import _per_user_band, band_caption

PLAN = {
    "best": {
        "predicted": {
            "ttft_ms_band": {
                "level": 0.8,
                "p90": {"lo": 200.0, "hi": 500.0},
                "mean": {"lo": 180.0, "hi": 450.0},
            },
            "tpot_ms_band": {
                "level": 0.8,
                "p90": {"lo": 20.0, "hi": 40.0},
                "mean": {"lo": 20.0, "hi": 40.0},
            },
        },
        "headroom": {"ttft": {"slo_over_band_edge": 2.0}, "tpot": {"slo_over_band_edge": 1.25}},
    }
}


def test_caption_names_level_bands_and_headroom() -> None:
    text = band_caption(PLAN, "p90")
    assert text.startswith("80% prediction band")
    assert "TTFT p90 200-500 ms" in text and "TPOT p90 20-40 ms" in text and "1.25" in text


def test_caption_says_where_the_band_came_from() -> None:
    account = "engine=vllm mode=agg load=light tier=fitted: group vllm/agg/light/fitted"
    plan = {"best": {**PLAN["best"], "predicted": {**PLAN["best"]["predicted"]}}}
    plan["best"]["predicted"]["provenance"] = {"bands": account}  # type: ignore[index]
    text = band_caption(plan, "p90")
    assert text.endswith(f"From {account}.") and "TTFT p90 200-500 ms" in text


def test_caption_empty_without_bands() -> None:
    assert band_caption({"best": {"predicted": {}}}, "p90") == ""


def test_per_user_error_bar_from_tpot_band() -> None:
    bar = _per_user_band(PLAN["best"]["predicted"], 40.0)  # type: ignore[index]
    assert bar is not None
    assert bar["array"] == [10.0] and bar["arrayminus"] == [15.0]  # 1000/20 - 40, 40 - 1000/40
