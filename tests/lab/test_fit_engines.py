"""``python -m lab.fit_engines``: input errors, bounds, and the packaged file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lab.fit_engines import (
    DEFAULT_DATA,
    fit_file,
    fit_log_entry,
    fit_log_path,
    main,
    render,
    written_date,
)
from planner.engines.calibration import load_engines, packaged_text
from planner.engines.registry import BUILTIN
from planner.replay_e2e.candidates import prepare
from planner.replay_e2e.fit import CONSTANTS, fit_constants, fitted_values
from tests.lab import SILICON_MEASURED, read_rows

DATA = SILICON_MEASURED


def test_missing_data_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--data", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "e.yaml")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: --data:") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "e.yaml").exists()


def test_packaged_constants_carry_unit_bounds_and_command() -> None:
    for e in load_engines().values():
        for c in CONSTANTS:
            s = getattr(e, c.name)
            assert s.unit == c.unit and tuple(s.bounds or ()) == c.bounds
            assert "python -m lab.fit_engines" in s.source


@pytest.mark.validation
def test_fit_on_a_few_rows_picks_grid_values() -> None:
    """Two (model, system) groups of vLLM rows: every fitted constant is one of its grid values."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    df, _ = read_rows(DATA)
    vllm = df[(df.backend == "vllm") & (df["mode"] == "agg")]
    keys = vllm.groupby(["model_path", "system"]).size().index[:2]
    few = (
        vllm[vllm.set_index(["model_path", "system"]).index.isin(keys)]
        .groupby(["model_path", "system"])
        .head(4)
    )
    values = fit_constants(prepare(pd.DataFrame(few)).rows)
    assert set(values) == {"vllm"}
    for c in CONSTANTS:
        assert values["vllm"][c.name] in c.grid


@pytest.mark.validation
@pytest.mark.heldout
def test_fit_reproduces_the_packaged_file() -> None:
    """``python -m lab.fit_engines`` (both shared files) regenerates the constants exactly."""
    for f in DEFAULT_DATA:
        if not f.is_file():
            pytest.skip(f"{f} absent (shared validation folder not mounted)")
    text = render(fit_file(DEFAULT_DATA, progress=False), load_engines(), written_date(None) or "")
    assert text == packaged_text(sorted(BUILTIN))


def test_sources_are_short_and_dated() -> None:
    """One short source per constant: what, fitted to what on which rows by which command, when
    (unit and bounds stand next to it); the history lives in lab/notes/engines_fit_log.md."""
    date = written_date(None)
    assert date is not None
    for e in load_engines().values():
        for c in CONSTANTS:
            src = getattr(e, c.name).source
            assert len(src) <= 300 and src.startswith(c.meaning) and src.endswith(date)
    assert fit_log_path(None).is_file()


def test_render_of_the_packaged_values_is_the_packaged_file() -> None:
    """The writer alone (no fit): the packaged values and date give back the packaged bytes."""
    engines = load_engines()
    text = render(fitted_values(engines), engines, written_date(None) or "")
    assert text == packaged_text(sorted(BUILTIN))


def test_fit_log_entry_lists_changed_values(tmp_path: Path) -> None:
    data = tmp_path / "rows.csv"
    data.write_text("a,b\n1,2\n")
    old = {"vllm": {"kernel_scale": 1.0, "step_overhead_s": 0.002}}
    new = {"vllm": {"kernel_scale": 1.1, "step_overhead_s": 0.002}}
    entry = fit_log_entry(old, new, data, "2026-12-01")
    assert "## 2026-12-01:" in entry and "rows.csv (sha256 " in entry
    assert "- vllm.kernel_scale: 1 -> 1.1" in entry and "step_overhead_s" not in entry
    assert "No value changed." in fit_log_entry(old, old, data, "2026-12-01")
