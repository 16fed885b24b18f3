"""Fields documented once: every pydantic field has a description, and a CLI flag that sets a field
shows that description as its ``--help`` (``planner.cli.field_help``)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest
from pydantic import BaseModel

from planner.cli.field_help import MAPPED, description
from planner.cli.main import build_parser

PACKAGES = ("hardware", "kernels_db", "planner", "solvers")
SKIP_MODULES = ("kernels_db.bench", "planner.__main__")


def _models() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for pkg in PACKAGES:
        root = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(root.__path__, pkg + "."):
            if info.name.startswith(SKIP_MODULES):
                continue
            mod = importlib.import_module(info.name)
            for name, obj in vars(mod).items():
                if (
                    inspect.isclass(obj)
                    and issubclass(obj, BaseModel)
                    and obj.__module__ == mod.__name__
                ):
                    found[f"{mod.__name__}.{name}"] = obj
    return found


def test_every_field_has_a_description() -> None:
    models = _models()
    assert "planner.perf.deployment.WorkerConfig" in models and len(models) > 30
    missing = [
        f"{qual}.{field}"
        for qual, cls in models.items()
        for field, info in cls.model_fields.items()
        if not (info.description or "").strip()
    ]
    assert missing == [], f"fields without a description: {missing}"


def test_plan_flags_are_mapped() -> None:
    """``planner plan``'s flags that set a ``PlanRequest`` field are in the table (so the test
    below checks their help); the rest are the shared model/hardware/output flags."""
    sub = _subparsers(build_parser())["plan"]
    flags = {s for a in sub._actions for s in a.option_strings if s.startswith("--")}
    shared = {"--help", "--model", "--model-id", "--hardware-dir", "--out", "--force"}
    shared |= {"--host", "--target"}  # how --out writes the bundle, not what is planned
    shared |= {"--trace"}  # the file the lengths and rate are read from
    spec = {"--spec-method", "--spec-draft-model", "--spec-draft-len", "--spec-acceptance"}
    assert flags - shared - spec - {"--format", "--calibration"} == set(MAPPED["plan"])


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no sub-commands")


@pytest.mark.parametrize("command", sorted(MAPPED))
def test_flag_help_is_the_field_description(command: str) -> None:
    sub = _subparsers(build_parser())[command]
    flags = {s: a for a in sub._actions for s in a.option_strings}
    for flag, (model, field) in MAPPED[command].items():
        assert flag in flags, f"planner {command} has no {flag}"
        shown = (flags[flag].help or "").replace("%%", "%")
        text = description(model, field)
        # the description, then at most a parenthetical default or note on how the flag spells it
        assert shown == text or shown.startswith(text + " ("), (flag, shown, text)


def test_max_num_seqs_defaults_to_the_engines_own() -> None:
    """One source for an engine's default slot cap and chunk: engines.yaml, per --backend."""
    from planner.cli.field_help import engine_limits
    from planner.engines.calibration import engine

    for backend in ("vllm", "sglang", "trtllm"):
        args = argparse.Namespace(backend=backend, max_num_seqs=None, max_num_batched_tokens=None)
        cal = engine(backend)
        assert engine_limits(args) == {
            "max_num_seqs": int(cal.max_num_seqs.value),
            "max_num_batched_tokens": int(cal.max_num_batched_tokens.value),
        }
    given = argparse.Namespace(backend="trtllm", max_num_seqs=64, max_num_batched_tokens=4096)
    assert engine_limits(given) == {"max_num_seqs": 64, "max_num_batched_tokens": 4096}


def _all_parsers(
    parser: argparse.ArgumentParser, name: str = "planner"
) -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                out += _all_parsers(sub, f"{name} {sub_name}")
    return out


def test_every_help_states_every_default() -> None:
    """A flag with a default says it in ``--help`` (``planner plan``'s budget of 8 GPUs among
    them): no hidden defaults."""
    missing = []
    parsers = _all_parsers(build_parser())
    assert len(parsers) > 20
    for name, p in parsers:
        text = p.format_help()
        for a in p._actions:
            d = a.default
            if not a.option_strings or a.required or a.help == argparse.SUPPRESS:
                continue
            if d is None or d is False or d in ([], (), argparse.SUPPRESS):
                continue
            helped = p.formatter_class(prog=name)._get_help_string(a) or ""  # type: ignore[attr-defined]
            if "default" not in helped:
                missing.append(f"{name} {a.option_strings[0]}")
        if name == "planner plan":
            assert "(default: 8)" in " ".join(text.split())
    assert missing == []
