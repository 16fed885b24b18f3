"""A fourth, made-up engine from one folder: constants, flags, capabilities, argument list and
emitter (``test_fake_engine`` registers it)."""

from pathlib import Path

from planner.engines import Engine

ENGINE = Engine(name="fake", folder=Path(__file__).parent, emitter=f"{__name__}.emitter")
