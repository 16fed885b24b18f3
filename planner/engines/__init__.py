"""Inference engines as plug-ins: the interface (``base``), the registry and one subpackage per
engine holding its constants, policies, launch capabilities, argument lists, flags and emitter."""

from planner.engines.base import Engine, PromptHolds
from planner.engines.registry import (
    DEFAULT_ENGINE,
    engine_names,
    get_engine,
    prefill_first,
    register,
    unregister,
)

__all__ = [
    "DEFAULT_ENGINE",
    "Engine",
    "PromptHolds",
    "engine_names",
    "get_engine",
    "prefill_first",
    "register",
    "unregister",
]
