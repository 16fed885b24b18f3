"""Every engine the registry knows holds the whole interface in its folder: constants with
sources, flags, capabilities, argument lists and an emitter (``planner.engines.base``)."""

from __future__ import annotations

import importlib

import pytest

from planner.emitters import engine_args
from planner.emitters.capabilities import shape_rules
from planner.emitters.flag_table import engine_table
from planner.engines import engine_names, get_engine
from planner.engines.calibration import PACKAGED, packaged
from planner.errors import PlannerInputError


@pytest.mark.parametrize("name", engine_names())
def test_an_engine_folder_holds_its_interface(name: str) -> None:
    eng = get_engine(name)
    assert eng.name == name
    for f in ("constants.yaml", "flags.yaml", "capabilities.yaml", "args.yaml"):
        assert eng.file(f).is_file(), f
    cal = packaged(name)
    assert all(getattr(cal, f).source for f in type(cal).model_fields)
    assert engine_table(name).rows and shape_rules(name) is not None
    assert engine_args.load(name)["engine"] == name
    emitter = importlib.import_module(eng.emitter)
    assert callable(emitter.build) and callable(emitter.serve_values) and emitter.BASE_PORT > 0


@pytest.mark.parametrize("name", engine_names())
def test_the_packaged_policy_names_its_file(name: str) -> None:
    policy = PACKAGED.policy(name)
    assert policy.engine is get_engine(name) and policy.calibration == packaged(name)
    assert policy.label == f"planner/engines/{name}/constants.yaml"


def test_an_unknown_engine_is_an_input_error_listing_the_engines() -> None:
    with pytest.raises(PlannerInputError) as exc:
        get_engine("tgi")
    assert str(exc.value).startswith("--backend") and all(
        n in str(exc.value) for n in engine_names()
    )
