"""Robust plans (issue 17, part 3): with ``--confidence 0.8`` (the default) the SLO must hold at the
upper edge of the prediction band; ``--confidence 0`` keeps the point-prediction pick."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hardware.errors import PlannerInputError
from solvers.plan import PlanRequest, plan
from solvers.plan_core import check_confidence, evaluate_request, pick_best

# 70B on up to 8 H200, 32 clients, 4000/500: the point-prediction pick meets TPOT <= 40 ms at its
# prediction but not at the 0.8-quantile of its band (GPU-held-out band table of 2026-12-05: the
# pick's SLO / band edge is 0.94 on TPOT; with the earlier table TTFT <= 1000 ms bound instead).
CASE = dict(
    model="llama-3.1-70b",
    gpus=("h200",),
    max_gpus=8,
    isl=4000,
    osl=500,
    concurrency=32,
    ttft_ms=1000,
    tpot_ms=40,
)


def _edges_ok(choice: object) -> bool:
    h = choice.headroom  # type: ignore[attr-defined]
    return bool(
        h["ttft"]["slo_over_band_edge"] >= 1 - 1e-9 and h["tpot"]["slo_over_band_edge"] >= 1 - 1e-9
    )


def test_band_edge_changes_the_pick() -> None:
    robust = plan(PlanRequest(**CASE, confidence=0.8))
    point = plan(PlanRequest(**CASE, confidence=0))
    assert robust.best.config != point.best.config
    # the point pick meets the SLO at its prediction but not at its band edge ...
    h: Any = point.best.headroom
    assert h["ttft"]["slo_over_predicted"] >= 1 and h["tpot"]["slo_over_predicted"] >= 1
    assert not _edges_ok(point.best)
    # ... the default pick meets it at the edge, and so does every alternative it offers
    assert _edges_ok(robust.best)
    assert all(_edges_ok(c) for c in robust.alternatives.values() if c is not None)
    assert robust.best.headroom["tightest_at_band_edge"] in ("TTFT", "TPOT")
    assert robust.slo["confidence"] == 0.8 and point.slo["confidence"] == 0


def test_confidence_zero_keeps_the_point_prediction_pick() -> None:
    """--confidence 0: the best candidate of those meeting both SLOs at the point prediction."""
    req = PlanRequest(**CASE, confidence=0)
    ev = evaluate_request(req)
    ok = ev.within_budget & ev.predicted_ok & (ev.ttft <= req.ttft_ms) & (ev.tpot <= req.tpot_ms)
    assert np.array_equal(ok, ev.meets())
    assert np.array_equal(ok & ~ev.pp_dropped(ok), ev.feasible())
    ok &= ~ev.pp_dropped(ok)
    assert plan(req).best.config == ev.summary(pick_best(ev, ok, req.objective))


def test_band_edges_are_above_predictions() -> None:
    ev = evaluate_request(PlanRequest(**CASE))
    assert np.all(ev.ttft_edge >= ev.ttft) and np.all(ev.tpot_edge >= ev.tpot)
    assert np.all(np.isfinite(ev.ttft_edge[np.isfinite(ev.ttft)]))


@pytest.mark.parametrize("c", [0.3, 0.995, 1.0])
def test_confidence_outside_its_range_is_refused(c: float) -> None:
    with pytest.raises(ValueError, match="--confidence"):  # a ValidationError naming the flag
        PlanRequest(**CASE, confidence=c)
    with pytest.raises(PlannerInputError, match="--confidence"):
        check_confidence(c)


def test_default_confidence_is_the_band_level() -> None:
    from planner.cli.main import build_parser

    assert PlanRequest(**CASE).confidence == 0.8
    args = build_parser().parse_args(
        ["plan", "--model", "llama-3.1-70b", "--gpu", "h200", "--isl", "1", "--osl", "1"]
        + ["--ttft-ms", "1", "--tpot-ms", "1"]
    )
    assert args.confidence == 0.8


def test_binding_constraint_is_named_at_the_band_edge() -> None:
    """The next better plan fails its SLO at the band edge (its point prediction may meet it)."""
    r = plan(PlanRequest(**CASE))
    b: Any = r.binding
    assert b["constraint"] in ("TTFT", "TPOT")
    assert b["value"] is None or b["value"] > b["limit"]  # None: an unbounded queue
    assert f"{b['constraint']} p90 binds at 80% confidence (one-sided)" in b["sentence"]
    point: Any = plan(PlanRequest(**CASE, confidence=0)).binding
    assert "confidence" not in point["sentence"]


# --- issue 47, item 2: a confidence is a one-sided probability of meeting each SLO ---

ISSUE_70B = dict(
    model="llama-3.1-70b", max_gpus=64, isl=2000, osl=300, rate_per_s=20, ttft_ms=1000, tpot_ms=40
)
ISSUE_DISAGG = dict(
    model="llama-3.1-70b",
    gpus=("h100", "b200"),
    max_gpus=32,
    isl=4000,
    osl=500,
    rate_per_s=10,
    ttft_ms=1500,
    tpot_ms=40,
    mode="disagg",
)


def test_quantile_factor_is_one_sided() -> None:
    """0.9 one-sided is the upper edge of the table's 80% band (what 0.8 meant before); 0.8
    one-sided sits below it, 0.95 above."""
    from planner.model.bundled import load_model
    from solvers.plan_core import band_factor

    req = PlanRequest(**CASE)
    ev = evaluate_request(req)
    b, m = ev.blocks[0], load_model(req.model)
    edge = band_factor(m, b, req.backend, "ttft")
    assert np.allclose(band_factor(m, b, req.backend, "ttft", confidence=0.9), edge)
    f80 = band_factor(m, b, req.backend, "ttft", confidence=0.8)
    f95 = band_factor(m, b, req.backend, "ttft", confidence=0.95)
    assert np.all(f80 < edge) and np.all(f95 > edge)


def test_meet_probability_inverts_the_quantile() -> None:
    from planner.uncertainty.bands import LogBand
    from solvers.plan_core import meet_probability

    for band in (LogBand(-0.3, 0.5), LogBand(-0.3, 0.5, ((0.1, -0.3), (0.5, 0.0), (0.9, 0.5)))):
        for c in (0.2, 0.5, 0.8, 0.85):
            assert meet_probability(band, band.quantile(c), 0.8) == pytest.approx(c, abs=1e-6)
        assert meet_probability(band, 10.0, 0.8) == pytest.approx(0.999)


def _met(choice: object, metric: str) -> float:
    """The probability of meeting ``metric``'s SLO a choice reports."""
    h = choice.headroom  # type: ignore[attr-defined]
    return float(h[metric]["probability_met"])


@pytest.mark.parametrize("c", [0.5, 0.8, 0.95])
def test_every_limit_is_met_with_the_confidence_asked(c: float) -> None:
    r = plan(PlanRequest(**CASE, confidence=c))
    for metric in ("ttft", "tpot"):
        assert _met(r.best, metric) >= c - 1e-3


def test_issue_70b_h100_states_both_plans() -> None:
    """The issue's case: 40 H100 by default (90% one-sided) against 16 at the prediction. At 80%
    one-sided the plan needs fewer GPUs than the old default and shows the point plan beside it."""
    point = plan(PlanRequest(**ISSUE_70B, gpus=("h100",), confidence=0))
    robust = plan(PlanRequest(**ISSUE_70B, gpus=("h100",)))
    old = plan(PlanRequest(**ISSUE_70B, gpus=("h100",), confidence=0.9))
    assert point.best.gpus < robust.best.gpus <= old.best.gpus
    assert robust.best.gpus < 40  # the 90%-one-sided default the issue reported
    assert robust.at_prediction is not None and point.at_prediction is None
    assert robust.at_prediction.gpus == point.best.gpus
    assert robust.at_prediction.cost_per_hour_usd == point.best.cost_per_hour_usd
    assert _met(robust.at_prediction, "ttft") < 0.8 or (_met(robust.at_prediction, "tpot") < 0.8)


def test_issue_disaggregated_case_is_found_at_the_confidence() -> None:
    """H100 + B200 disaggregated at 10 req/s used to say "no configuration on up to 32 GPUs" at
    the default confidence: the rate search sized worker counts at the point prediction only."""
    r = plan(PlanRequest(**ISSUE_DISAGG))
    assert r.best.gpus <= 32
    assert _met(r.best, "ttft") >= 0.8 - 1e-3
    assert _met(r.best, "tpot") >= 0.8 - 1e-3
    point = plan(PlanRequest(**ISSUE_DISAGG, confidence=0))
    assert point.best.gpus < r.best.gpus and r.at_prediction is not None


def test_spec_files_take_the_same_confidence() -> None:
    from solvers.fleet import FleetSpec
    from solvers.sweep import SweepSpec

    fleet = dict(
        classes=[
            dict(name="a", model="llama-3.1-8b", rate_per_s=1, isl=1, osl=1, ttft_ms=1, tpot_ms=1)
        ],
        gpus=[dict(gpu="h100", available=8)],
    )
    sweep = dict(
        models=["llama-3.1-8b"],
        gpu_sets=[dict(name="h", gpus=["h100"], max_gpus=8)],
        workloads=[dict(name="w", isl=1, osl=1, rate_per_s=1)],
        slos=[dict(name="s", ttft_ms=1, tpot_ms=1)],
    )
    for cls, raw in ((FleetSpec, fleet), (SweepSpec, sweep)):
        assert cls.model_validate(raw).confidence == PlanRequest(**CASE).confidence == 0.8
        assert cls.model_validate(raw | {"confidence": 0.95}).confidence == 0.95
        with pytest.raises(ValueError, match="0.5-0.99"):
            cls.model_validate(raw | {"confidence": 0.3})
