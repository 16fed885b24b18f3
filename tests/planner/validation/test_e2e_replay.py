"""Replay of ../shared/validation/e2e/silicon_measured.csv: every row modelled or counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.validation.e2e import validate_e2e

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "validation" / "e2e" / "silicon_measured.csv"


@pytest.mark.validation
def test_every_row_is_modelled_or_counted() -> None:
    if not DATA.is_file():
        pytest.skip(f"{DATA} absent (shared validation folder not mounted)")
    r = validate_e2e(DATA, progress=False)
    assert r["modelled"] + sum(r["skipped"].values()) == r["rows"]
    complete = r["rows"] - r["skipped"].get("incomplete_config", 0)
    assert r["modelled"] >= 0.9 * complete
