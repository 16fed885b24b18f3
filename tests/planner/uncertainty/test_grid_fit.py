"""Quantile-grid band tables (``planner.uncertainty.grid_fit``) and their YAML grids."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from planner.uncertainty.bands import table_from_dict
from planner.uncertainty.grid_fit import GRID_PROBS, fit_table, grid_quantiles


def test_the_grid_is_five_percent_steps_and_the_99th() -> None:
    assert GRID_PROBS[0] == 0.05 and GRID_PROBS[-2] == 0.95 and GRID_PROBS[-1] == 0.99
    assert len(GRID_PROBS) == 20


def test_grid_quantiles_of_normal_draws_are_the_normal_quantiles() -> None:
    rng = np.random.default_rng(1)
    res = rng.normal(0.2, 0.5, 20000)
    q = grid_quantiles(res, np.ones(res.size))
    want = [NormalDist(0.2, 0.5).inv_cdf(p) for p in GRID_PROBS]
    assert np.all(np.diff(q) >= 0)
    assert q == pytest.approx(want, abs=0.03)


def _rows(n: int, shift: float, gpu: str, engine: str = "vllm") -> pd.DataFrame:
    rng = np.random.default_rng(len(gpu) + n)
    return pd.DataFrame(
        {
            "engine": engine,
            "mode": "agg",
            "load": "light",
            "tier": "fitted",
            "gpu_name": gpu,
            "model_name": "m",
            "campaign": [f"{gpu}-{i % 5}" for i in range(n)],
            "res_ttft": rng.normal(shift, 0.3, n),
            "res_tpot": rng.normal(0.0, 0.1, n),
        }
    )


def test_a_table_of_grids_bands_at_its_edge_quantiles_and_falls_back_with_few_rows() -> None:
    rows = pd.concat([_rows(400, 0.0, "A"), _rows(10, 1.0, "B", engine="sglang")])
    table, groups, _ = fit_table(rows, 0.8)
    full = (("engine", "vllm"), ("mode", "agg"), ("load", "light"), ("tier", "fitted"))
    assert full in groups and (("engine", "sglang"), ("mode", "agg")) not in groups
    b = table.groups[full]["ttft"]
    assert b.lo == pytest.approx(b.quantile(0.1)) and b.hi == pytest.approx(b.quantile(0.9))
    assert b.quantile(0.5) == pytest.approx(0.0, abs=0.05)
    # a GPU without rows takes the same groups: the residuals are GPU-held-out already
    key = dict(full)
    assert table.lookup(key, gpu="Other", model="m") == table.lookup(key, gpu="A", model="m")
    wide = table.lookup(key, gpu="A", model="unknown")["ttft"]
    assert wide.hi - wide.lo >= b.hi - b.lo


def _yaml(grid: list[list[float]]) -> dict[str, object]:
    band = {"lo": -0.1, "hi": 0.1, "grid": grid}
    return {
        "level": 0.8,
        "gpu_held_out": True,
        "groups": [{"key": {}, "ttft": band, "tpot": band}],
        "widest_by_tier": {"*": {"ttft": band, "tpot": band}},
        "gpus": ["H100-SXM"],
        "models": ["m"],
    }


def test_the_loader_fills_the_grid_and_refuses_a_bad_one() -> None:
    t = table_from_dict(_yaml([[0.1, -0.1], [0.5, 0.0], [0.9, 0.1]]))
    assert t.gpu_held_out and t.groups[()]["ttft"].quantile(0.7) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="quantiles decrease"):
        table_from_dict(_yaml([[0.1, 0.1], [0.9, -0.1]]))
    with pytest.raises(ValueError, match="probabilities"):
        table_from_dict(_yaml([[0.5, 0.0], [0.1, 0.1]]))
    with pytest.raises(TypeError, match="pair"):
        table_from_dict(_yaml([[0.5]]))
