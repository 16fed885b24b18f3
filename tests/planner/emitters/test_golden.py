"""Golden files for every engine, aggregated and disaggregated.

Regenerate with ``PLANNER_UPDATE_GOLDEN=1 pytest tests/planner/emitters/test_golden.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from planner.emitters import build_bundle
from planner.emitters.plan_file import parse_plan
from planner.engines.registry import BUILTIN
from tests.planner.emitters.plans import PLANS

ENGINES = tuple(BUILTIN)

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("PLANNER_UPDATE_GOLDEN") == "1"


@pytest.mark.parametrize("mode", sorted(PLANS))
@pytest.mark.parametrize("engine", ENGINES)
def test_bundle_matches_golden(engine: str, mode: str) -> None:
    files = build_bundle(parse_plan(PLANS[mode]()), engine)
    folder = GOLDEN / f"{engine}_{mode}"
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            old.unlink()
        for f in files:
            (folder / f.name).write_text(f.text)
    expected = sorted(p.name for p in folder.iterdir())
    assert sorted(f.name for f in files) == expected
    for f in files:
        assert f.text == (folder / f.name).read_text(), (
            f"{folder.name}/{f.name} differs; see module doc"
        )
