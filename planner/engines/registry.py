"""The engines the planner knows: the only place that lists them.

Built-in engines are imported on first use (each package defines ``ENGINE``); :func:`register`
adds another one (a plug-in, or a test's fake engine) for the rest of the process.
"""

from __future__ import annotations

import importlib

from planner.engines.base import Engine
from planner.errors import PlannerInputError

BUILTIN: dict[str, str] = {
    "vllm": "planner.engines.vllm",
    "sglang": "planner.engines.sglang",
    "trtllm": "planner.engines.trtllm",
}
"""Engine name -> the package defining its ``ENGINE`` (one line per engine)."""
DEFAULT_ENGINE = "vllm"
"""The engine a request that names none runs on."""
_ADDED: dict[str, Engine] = {}


def register(engine: Engine) -> None:
    """Make ``engine`` known by its name (replacing an engine added before under that name)."""
    if engine.name in BUILTIN:
        raise ValueError(f"{engine.name!r} is a built-in engine")
    _ADDED[engine.name] = engine


def unregister(name: str) -> None:
    """Forget an engine added by :func:`register` (nothing when unknown)."""
    _ADDED.pop(name, None)


def engine_names() -> tuple[str, ...]:
    """Every known engine's name: the built-in ones, then those registered, in order."""
    return (*BUILTIN, *_ADDED)


def get_engine(name: str, field: str = "--backend") -> Engine:
    """The engine called ``name``; an unknown name is an input error on ``field`` listing the
    choices."""
    if name in _ADDED:
        return _ADDED[name]
    if name not in BUILTIN:
        raise PlannerInputError(field, f"'{name}' not one of {sorted(engine_names())}")
    engine: Engine = importlib.import_module(BUILTIN[name]).ENGINE
    return engine


def prefill_first(name: str) -> bool:
    """Whether engine ``name`` runs prefill batches before, not inside, decode steps
    (``Engine.prefill_first``); False for a name no engine has."""
    return name in engine_names() and get_engine(name).prefill_first is not None
