"""Rows of the aic harness, whose serving regime is open (``prepare_e2e.AIC_HARNESS``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lab.prepare_e2e import prepare_frame
from planner.replay_e2e import regimes
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.predict import predict
from tests.lab import SILICON_MEASURED, read_rows

DATA = SILICON_MEASURED
AIC = "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/sglang/0.5.1.post1/Qwen_Qwen3-32B.csv"
LOCKSTEP_CAMPAIGN = "aic-auto-gap-analysis/data/h100_sxm/sglang/0.5.1.post1/Qwen_Qwen3-32B.csv"


def test_the_lab_step_names_the_aic_harness_run() -> None:
    """The aic harness's rows get ``alt_bench_requests`` = 10 x their clients; others none."""
    base = {
        "backend": "sglang",
        "model_path": "Qwen/Qwen3-32B",
        "system": "h100_sxm",
        "mode": "agg",
        "isl": 1024,
        "osl": 1024,
        "batch_size": 8,
        "tp_size": 1,
        "silicon_ttft_ms": 100.0,
        "silicon_tpot_ms": 10.0,
    }
    rows = pd.DataFrame([base | {"id": "a", "silicon_data_source": AIC}, base | {"id": "b"}])
    got = prepare_frame(rows)["alt_bench_requests"].tolist()
    assert got[0] == 80.0 and np.isnan(got[1])


@pytest.mark.validation
def test_the_lockstep_campaign_sits_inside_its_envelope() -> None:
    """The SGLang 0.5.1.post1 campaign that stays in lockstep (notes/sglang.md): the lockstep
    prediction puts TTFT up and TPOT down, and the envelope residual is far smaller than the
    steady-state one."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    df, _ = read_rows(DATA)
    df = df[df["silicon_data_source"].astype(str).str.contains(LOCKSTEP_CAMPAIGN, regex=False)]
    pred = regimes.with_alternatives(predict(prepare(df).rows, progress=False))
    assert len(pred) >= 50 and regimes.open_regime(pred).all()
    assert np.median(pred["alt_ttft_ms"] / pred["pred_ttft_ms"]) > 2.0
    assert np.median(pred["alt_tpot_ms"] / pred["pred_tpot_ms"]) < 0.95
    for m in ("ttft", "tpot"):
        meas = pred[f"silicon_{m}_ms"].to_numpy(float)
        steady = np.abs(np.log(meas / pred[f"pred_{m}_ms"].to_numpy(float)))
        env = np.abs(regimes.envelope_residual(meas, *regimes.envelope(pred, m)))
        assert np.median(env) < 0.5 * np.median(steady)
