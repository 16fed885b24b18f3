"""Read NVIDIA Dynamo's command-line arguments (the frontend and the TensorRT-LLM worker) from
its release source, for the ``router`` and ``worker`` tools of
``planner/engines/trtllm/args.yaml``.

    python -m lab.engine_args.dynamo ROOT > /tmp/dynamo-tools.yaml

ROOT is an unpacked ``ai-dynamo`` wheel (its ``dynamo/`` package). Dynamo declares arguments
through its own helpers (``add_argument(group, flag_name=..., arg_type=..., choices=...)`` and
``add_negatable_bool_argument``, dynamo/common/configuration/utils.py); this reads those calls
with `ast` (nothing is imported or run) and prints the two tool blocks in the args.yaml layout.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import yaml

from lab.engine_args.argwalk import Spec

FRONTEND = (
    "dynamo/frontend/frontend_args.py",
    "dynamo/common/configuration/groups/router_args.py",
    "dynamo/common/configuration/groups/kv_router_args.py",
    "dynamo/common/configuration/groups/ais_perf_args.py",
)
"""Files whose argument groups ``FrontendArgGroup.add_arguments`` adds."""
WORKER = (
    "dynamo/trtllm/backend_args.py",
    "dynamo/common/configuration/groups/runtime_args.py",
)
"""Files whose groups ``dynamo/trtllm/args.py`` adds (DynamoRuntimeArgGroup,
DynamoTrtllmArgGroup)."""
TYPES = {"int": "int", "float": "float", "str": "str"}
MODES = "dynamo/trtllm/constants.py"
"""Holds ``DisaggregationMode``, whose values (less the aggregated one) ``--disaggregation-mode``
accepts besides the module constants it names."""


def _constants(root: Path, files: tuple[str, ...]) -> dict[str, str]:
    """Module-level ``NAME = "text"`` of ``files``, and ``Enum.MEMBER`` -> value of MODES."""
    out: dict[str, str] = {}
    for rel in (*files, MODES):
        for node in ast.parse((root / rel).read_text(encoding="utf-8")).body:
            out |= _assigned(node, "")
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    out |= _assigned(item, node.name + ".")
    return out


def _assigned(node: ast.stmt, prefix: str) -> dict[str, str]:
    """``NAME = "text"`` as {prefix + NAME: text}; {} for any other statement."""
    if not isinstance(node, ast.Assign):
        return {}
    text = _text(node.value)
    names = [t.id for t in node.targets if isinstance(t, ast.Name)]
    return {prefix + n: text for n in names} if text is not None else {}


def _choices(node: ast.List, consts: dict[str, str]) -> list[object] | None:
    """A choices list of literals, module constants and ``*[m.value for m in Enum if m !=
    Enum.X]``; None when some element cannot be read."""
    values: list[object] = []
    for e in node.elts:
        if isinstance(e, ast.Constant):
            values.append(e.value)
        elif isinstance(e, ast.Name) and e.id in consts:
            values.append(consts[e.id])
        elif isinstance(e, ast.Starred) and isinstance(e.value, ast.ListComp):
            gen = e.value.generators[0]
            enum = gen.iter.id if isinstance(gen.iter, ast.Name) else ""
            skip = {
                f"{enum}.{c.comparators[0].attr}"
                for c in gen.ifs
                if isinstance(c, ast.Compare) and isinstance(c.comparators[0], ast.Attribute)
            }
            members = [k for k in consts if k.startswith(enum + ".") and k not in skip]
            if not members:
                return None
            values += [consts[k] for k in members]
        else:
            return None
    return values


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _spec(call: ast.Call, negatable: bool, consts: dict[str, str]) -> list[Spec]:
    """The argument(s) one helper call adds (a negatable switch adds --x and --no-x)."""
    flag = _text(_keyword(call, "flag_name"))
    if flag is None:
        return []
    alias = _text(_keyword(call, "obsolete_flag"))
    flags = [flag] + ([alias] if alias else [])
    if negatable:
        neg = ["--no-" + f.removeprefix("--") for f in flags]
        return [{"flags": flags, "takes_value": False}, {"flags": neg, "takes_value": False}]
    arg: Spec = {"flags": flags, "takes_value": True}
    kind = _keyword(call, "arg_type")
    arg["type"] = TYPES.get(kind.id, "any") if isinstance(kind, ast.Name) else "str"
    if kind is not None and not isinstance(kind, ast.Name):
        arg["type"] = "any"
    choices = _keyword(call, "choices")
    listed = _choices(choices, consts) if isinstance(choices, ast.List) else None
    if listed is not None:
        arg["choices"] = listed  # type: ignore[typeddict-item]
    elif choices is not None:
        arg["choices_dynamic"] = True
    action = _text(_keyword(call, "action"))
    if action == "store_true":
        arg = {"flags": flags, "takes_value": False}
    nargs = _keyword(call, "nargs")
    if isinstance(nargs, ast.Constant):
        arg["nargs"] = nargs.value
    if action == "append":
        arg["append"] = True
    return [arg]


def read_args(root: Path, files: tuple[str, ...]) -> list[Spec]:
    """Every argument the helper calls of ``files`` declare, in source order."""
    args: list[Spec] = []
    consts = _constants(root, files)
    for rel in files:
        tree = ast.parse((root / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            if node.func.id in ("add_argument", "add_negatable_bool_argument"):
                args += _spec(node, node.func.id == "add_negatable_bool_argument", consts)
    seen: set[str] = set()
    unique = []
    for arg in args:
        flags = arg["flags"]
        first = str(flags[0]) if isinstance(flags, list) else ""
        if first not in seen:
            seen.add(first)
            unique.append(arg)
    return unique


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dynamo", description=__doc__.split("\n")[0])
    ap.add_argument("root", type=Path, help="unpacked ai-dynamo wheel")
    args = ap.parse_args(argv)
    tools = {
        "router": ("python -m dynamo.frontend", "dynamo/frontend/frontend_args.py", FRONTEND),
        "worker": ("python -m dynamo.trtllm", "dynamo/trtllm/args.py:parse_args", WORKER),
    }
    for name, (program, entry, files) in tools.items():
        found = read_args(args.root, files)
        print(f"  {name}:\n    program: {program}\n    entry: {entry}")
        print(f"    sources: [{', '.join(files)}]\n    count: {len(found)}\n    arguments:")
        for arg in found:
            text = yaml.safe_dump(arg, default_flow_style=True, width=10_000, sort_keys=False)
            print(f"      - {text.removesuffix(chr(10) + '...' + chr(10)).strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
