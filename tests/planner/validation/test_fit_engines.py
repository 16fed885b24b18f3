"""``python -m planner.validation.fit_engines``: input errors, bounds, and the packaged file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from planner.engine_calibration import load_engines, packaged_text
from planner.engines.registry import BUILTIN
from planner.validation.e2e import prepare, read_rows
from planner.validation.fit_engines import (
    CONSTANTS,
    fit_constants,
    fit_file,
    fit_log_entry,
    fit_log_path,
    fitted_values,
    joint_pick,
    main,
    render,
    written_date,
)
from tests.planner.validation import SILICON_MEASURED

DATA = SILICON_MEASURED


def test_missing_data_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--data", str(tmp_path / "absent.csv"), "--out", str(tmp_path / "e.yaml")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error: --data:") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "e.yaml").exists()


def test_grids_lie_inside_the_bounds() -> None:
    for c in CONSTANTS:
        lo, hi = c.bounds
        assert (
            lo <= min(c.grid) and max(c.grid) <= hi and c.start in c.grid and c.unit and c.meaning
        )


def test_packaged_constants_carry_unit_bounds_and_command() -> None:
    for e in load_engines().values():
        for c in CONSTANTS:
            s = getattr(e, c.name)
            assert s.unit == c.unit and tuple(s.bounds or ()) == c.bounds
            assert "python -m planner.validation.fit_engines" in s.source


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
    """``python -m planner.validation.fit_engines`` regenerates engines.yaml exactly."""
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    text = render(fit_file(DATA, progress=False), load_engines(), written_date(None) or "")
    assert text == packaged_text(sorted(BUILTIN))


def test_sources_are_short_and_dated() -> None:
    """One short source per constant: what, fitted to what on which rows by which command, when
    (unit and bounds stand next to it); the history lives in engines_fit_log.md."""
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


def test_the_joint_search_finds_the_pair_a_coordinate_search_stops_short_of() -> None:
    """Two engines whose rows trade a shared share (i) against each one's overhead (j): their
    loss is least at i = 1 with j = 1, but from j = 0 a search of i alone stays at i = 0 (i = 1
    with j = 0 is worse) and from i = 0 a search of j alone stays at j = 0."""
    loss = {(0, 0): 0.30, (0, 1): 0.35, (1, 0): 0.40, (1, 1): 0.10}
    rows = [
        {"backend": b, "i": i, "j": j, "e": e + (0.01 if b == "vllm" else 0.0) + 0.001 * r}
        for b in ("sglang", "vllm")
        for (i, j), e in loss.items()
        for r in range(3)
    ]
    err = pd.DataFrame(rows)
    assert joint_pick(err) == (1, {"sglang": 1, "vllm": 1})
    # each engine takes its own best partner value for the chosen share
    err.loc[(err.backend == "vllm") & (err.i == 1) & (err.j == 0), "e"] = 0.05
    assert joint_pick(err) == (1, {"sglang": 1, "vllm": 0})


def test_every_partner_is_a_per_engine_constant_of_the_same_modes_and_metric() -> None:
    by_name = {c.name: c for c in CONSTANTS}
    partnered = [c for c in CONSTANTS if c.partner]
    assert {c.name for c in partnered} == {"burst_fraction", "disagg_burst_fraction"}
    for c in partnered:
        d = by_name[c.partner or ""]
        assert c.shared and not d.shared and d.modes == c.modes and d.metrics == c.metrics
