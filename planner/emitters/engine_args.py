"""Strict argument parsers built from the engines' own argument lists.

The lists (``args.yaml`` in each engine's folder, ``planner/engines/<name>/``) were read from
each engine's source at a cited release by ``python -m lab.engine_args.extract`` (names, types,
choices). A parser built
here raises `EngineArgError` on an unknown flag, a value of the wrong type, a value outside
the choices, or a missing value; it never exits and never abbreviates flags.

    build_parser("vllm", "serve").parse_args(["MODEL", "--tensor-parallel-size", "2"])
    check_llm_api_yaml(tree, "trtllm")   # an engine's YAML options -> list of problems
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import NoReturn, Required, TypeAlias, TypedDict, TypeVar, cast, overload

from hardware.input_files import read_packaged_yaml
from hardware.jsontypes import JSONValue
from planner.engines import engine_names, get_engine

ARGS_FILE = "args.yaml"
"""Name of an engine folder's argument lists."""

_N = TypeVar("_N")
_HUMAN_INT = re.compile(r"^-?\d+(\.\d+)?([kKmMgGtT]i?)?$")


class ArgRecord(TypedDict, total=False):
    """One argument of an engine tool as the data files hold it (see the files' header)."""

    flags: Required[list[str]]
    takes_value: Required[bool]
    positional: bool
    type: str
    nargs: str | int
    choices: list[str | int | float | bool | None]
    choices_dynamic: bool
    choices_checked_by: str
    nullable: bool
    append: bool
    required: bool
    type_source: str
    unresolved: str


class ToolRecord(TypedDict, total=False):
    """One tool of an engine (``serve``, ``bench``, ``router``)."""

    program: Required[str]
    entry: str
    sources: list[str]
    notes: str
    count: int
    arguments: Required[list[ArgRecord]]


class FieldRecord(TypedDict, total=False):
    """One field of the LLM-API YAML schema: accepted types, null, choices, nested model."""

    types: list[str]
    nullable: bool
    choices: list[str | int | float | bool | None]
    model: str
    note: str


class LlmApiSchema(TypedDict, total=False):
    """The LLM-API YAML schema: class -> field -> record, and the top-level class."""

    root: Required[str]
    sources: list[str]
    models: Required[dict[str, dict[str, FieldRecord]]]


class EngineArgs(TypedDict, total=False):
    """One engine's data file."""

    engine: Required[str]
    source: dict[str, str]
    tools: Required[dict[str, ToolRecord]]
    llm_api_yaml: LlmApiSchema


Converted: TypeAlias = JSONValue
"""What a converter makes of one command-line word (a JSON document for the json types)."""


class EngineArgError(ValueError):
    """A command line or YAML value the engine's own parser or schema would reject."""


class StrictParser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise EngineArgError(f"{self.prog}: {message}")

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None, namespace: _N
    ) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: object = None
    ) -> tuple[object, list[str]]:
        try:
            return super().parse_known_args(args, namespace)
        except argparse.ArgumentError as exc:
            raise EngineArgError(f"{self.prog}: {exc}") from exc


@functools.cache
def load(engine: str) -> EngineArgs:
    """The parsed data file of one engine."""
    if engine not in engine_names():
        raise EngineArgError(f"unknown engine {engine!r} (allowed: {', '.join(engine_names())})")
    path = get_engine(engine).file(ARGS_FILE)
    # a bundled file that the extractor wrote in this layout (tests/planner/emitters check it)
    data = cast("EngineArgs | None", read_packaged_yaml(path))
    if not isinstance(data, dict) or data.get("engine") != engine:
        raise EngineArgError(f"{engine}.yaml: not an argument list for {engine}")
    return data


def tools(engine: str) -> list[str]:
    return list(load(engine)["tools"])


def program(engine: str, tool: str) -> str:
    """The words that start the tool, e.g. `vllm serve`."""
    return str(_tool(engine, tool)["program"])


def _tool(engine: str, tool: str) -> ToolRecord:
    known = load(engine)["tools"]
    if tool not in known:
        raise EngineArgError(f"{engine} has no tool {tool!r} (allowed: {', '.join(known)})")
    return known[tool]


def _human_int(text: str) -> str:
    if not _HUMAN_INT.match(text):
        raise ValueError(text)
    return text


def _human_int_or_auto(text: str) -> str:
    return text if text == "auto" else _human_int(text)


def _json(text: str) -> Converted:
    value: Converted = json.loads(text)
    return value


def _json_or_str(text: str) -> Converted:
    return _json(text) if text.lstrip().startswith("{") else text


def _bool_text(text: str) -> bool:
    low = text.lower()
    if low in {"true", "1", "yes"}:
        return True
    if low in {"false", "0", "no"}:
        return False
    raise ValueError(text)


CONVERTERS: dict[str, Callable[[str], Converted]] = {
    "int": int,
    "float": float,
    "str": str,
    "any": str,
    "json": _json,
    "json_or_str": _json_or_str,
    "human_int": _human_int,
    "human_int_or_auto": _human_int_or_auto,
    "bool": _bool_text,
}


def _converter(arg: ArgRecord) -> Callable[[str], Converted]:
    name = str(arg.get("type", "str"))
    base = CONVERTERS[name]
    nullable = bool(arg.get("nullable"))

    def conv(text: str) -> Converted:
        if nullable and text in {"", "None"}:
            return None
        return base(text)

    conv.__name__ = name  # argparse names the type in "invalid <name> value"
    return conv


def _add(parser: argparse.ArgumentParser, arg: ArgRecord) -> None:
    flags = list(arg["flags"])
    if not arg.get("takes_value", True):
        parser.add_argument(*flags, action="store_true", dest=_dest(flags))
        return
    conv, nargs = _converter(arg), arg.get("nargs")
    if arg.get("positional"):
        parser.add_argument(flags[0], type=conv, nargs=nargs)
        return
    choices: list[str | int | float | bool | None] | None = None
    if arg.get("choices") is not None and not arg.get("choices_dynamic"):
        choices = list(arg.get("choices", []))
        if arg.get("nullable"):
            choices.append(None)
    parser.add_argument(
        *flags,
        type=conv,
        dest=_dest(flags),
        nargs=nargs,
        choices=choices,
        action="append" if arg.get("append") else "store",
        required=bool(arg.get("required")),
    )


def _dest(flags: list[str]) -> str:
    longs = [f for f in flags if f.startswith("--")]
    return (longs or flags)[0].lstrip("-").replace("-", "_")


@functools.cache
def _spec(engine: str, tool: str) -> tuple[str, tuple[ArgRecord, ...]]:
    data = _tool(engine, tool)
    return str(data["program"]), tuple(data["arguments"])


def build_parser(engine: str, tool: str) -> argparse.ArgumentParser:
    """A strict parser for one engine tool (`serve`, `bench`, `router`, ...).

    It checks what the engine's parser checks at parse time (names, value counts, types,
    choices, required arguments; a value given through the engine's own `--config` file
    is not seen), plus the choices its configuration checks at start-up
    (`choices_checked_by`). Flags are never abbreviated."""
    prog, args = _spec(engine, tool)
    parser = StrictParser(prog=prog, add_help=False, allow_abbrev=False, exit_on_error=False)
    for arg in args:
        _add(parser, arg)
    return parser


@functools.cache
def _cached_parser(engine: str, tool: str) -> argparse.ArgumentParser:
    return build_parser(engine, tool)


def parse_command(engine: str, tool: str, argv: list[str]) -> argparse.Namespace:
    """Parse the words after the program name; `EngineArgError` if the engine would not."""
    return _cached_parser(engine, tool).parse_args(argv)


def yaml_keys(engine: str) -> LlmApiSchema:
    """The LLM-API YAML schema (`models`: class -> field -> type record; `root`: the
    class of the top level), for an engine whose launch reads such a file."""
    schema = load(engine).get("llm_api_yaml")
    if not schema:
        raise EngineArgError(f"{engine} has no LLM-API YAML schema")
    return schema


def check_llm_api_yaml(tree: object, engine: str) -> list[str]:
    """Problems of an extra-options YAML tree: unknown keys, wrong types, bad choices.

    Each problem reads `dotted.key: what is wrong (allowed: ...)`; an empty list means
    every key is a field the engine's LLM-API arguments declare, with a value of the declared
    type and choices. Types are checked strictly: pydantic would coerce "64" to 64, an
    emitted file must not rely on that."""
    schema = yaml_keys(engine)
    if not isinstance(tree, dict):
        return [f"<top>: expected a mapping, got {type(tree).__name__}"]
    problems: list[str] = []
    _check_model(schema, str(schema["root"]), tree, "", problems)
    return problems


def _check_model(
    schema: LlmApiSchema,
    model: str,
    tree: dict[str, object],
    prefix: str,
    problems: list[str],
) -> None:
    fields = schema["models"][model]
    for key, value in tree.items():
        where = f"{prefix}{key}"
        if key not in fields:
            problems.append(f"{where}: unknown key (not a field of {model})")
            continue
        _check_value(schema, fields[key], value, where, problems)


def _check_value(
    schema: LlmApiSchema, rec: FieldRecord, value: object, where: str, problems: list[str]
) -> None:
    if value is None:
        if not rec.get("nullable"):
            problems.append(f"{where}: null is not allowed")
        return
    kinds = rec.get("types", ["any"])
    if "choices" in rec and value not in rec.get("choices", []):
        allowed = ", ".join(map(str, rec["choices"]))
        problems.append(f"{where}: {value!r} is not allowed (allowed: {allowed})")
        return
    model = rec.get("model")
    if model and isinstance(value, dict):
        _check_model(schema, model, value, where + ".", problems)
        return
    if not any(_is_kind(value, kind) for kind in kinds) and not (model and "any" in kinds):
        problems.append(f"{where}: {type(value).__name__} {value!r} is not {' or '.join(kinds)}")


def _is_kind(value: object, kind: str) -> bool:
    if kind == "any":
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "list":
        return isinstance(value, list)
    if kind in {"dict", "model"}:
        return isinstance(value, dict)
    return False
