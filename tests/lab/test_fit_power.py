"""``lab.fit_power`` writes a parameter file the product reads back, each value in its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.fit_power import as_yaml
from planner.perf.power import PARAM_NAMES, PowerParams, load_params


def test_written_parameters_read_back(tmp_path: Path) -> None:
    prm = PowerParams(0.25, 0.1, 0.5, 120.0, "fitted on 3 runs of b200_sxm")
    f = tmp_path / "power.yaml"
    f.write_text(as_yaml(prm, Path("runs.csv")))
    back = load_params(f)
    for name in PARAM_NAMES:
        assert getattr(back, name) == pytest.approx(getattr(prm, name), rel=1e-3)
    assert "lab.fit_power" in back.source and "runs.csv" in back.source
