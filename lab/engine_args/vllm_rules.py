"""vLLM: how a config dataclass field becomes a command-line argument.

A static re-statement of the type rules of `_compute_kwargs` in vllm/engine/arg_utils.py
(the order of the checks matters and is kept), applied to the field's annotation as
written in the source, plus the `_customize_cli_kwargs` edits of the frontend classes.
"""

from __future__ import annotations

import ast

from lab.engine_args.argwalk import Spec, type_of
from lab.engine_args.astlib import (
    Comp,
    Module,
    Source,
    annotation,
    class_fields,
    comp_members,
    comp_values,
    method,
)

HUMAN_INT_FIELDS = {
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "kv_cache_memory_bytes",
    "safetensors_prefetch_block_size",
    "max_num_queued_tokens",
}


def _has(comps: list[Comp], tname: str) -> bool:
    return any(c == ("type", tname) for c in comps)


def _non_builtin(comps: list[Comp]) -> bool:
    return any(c[0] in {"class", "literal", "unknown"} for c in comps)


def _literal_spec(comps: list[Comp]) -> Spec:
    values = comp_values(next(c for c in comps if c[0] == "literal"))
    vtype = type(values[0]).__name__ if values else "str"
    if _has(comps, "str"):
        return {"type": "str"}
    return {
        "type": vtype if vtype in {"int", "float", "str"} else "str",
        "choices": sorted(values, key=str),
    }


def _collection_spec(comp: Comp) -> Spec:
    elems = comp_members(comp)
    spec: Spec = {"nargs": comp[3]}
    if len([e for e in elems if e != ("none",)]) > 1:
        spec["type"] = "str"
    elif elems and elems[0][0] == "literal":
        spec.update(_literal_spec(elems))
    elif elems and elems[0][0] == "type" and elems[0][1] in {"int", "float", "str"}:
        spec["type"] = elems[0][1]
    else:
        spec["type"] = "any"
    return spec


def field_spec(name: str, comps: list[Comp]) -> Spec:
    comps = [("dict",) if c[0] == "class" and c[2] == "dict" else c for c in comps]
    kinds = {c[0] for c in comps}
    spec: Spec
    if any(c[0] == "class" and c[2] == "dataclass" for c in comps):
        spec = {"type": "json"}
    elif {repr(c) for c in comps} == {"('type', 'bool')", "('type', 'str')", "('none',)"}:
        return {"type": "str", "nargs": "?", "const": True}
    elif _has(comps, "bool"):
        return {"action": "boolean_optional"}
    elif "literal" in kinds:
        spec = _literal_spec(comps)
    elif "coll" in kinds:
        coll = [c for c in comps if c[0] == "coll"]
        order = {"tuple": 0, "list": 1, "set": 2}
        spec = _collection_spec(min(coll, key=lambda c: order[str(c[1])]))
    elif _has(comps, "int"):
        spec = {
            "type": "human_int_or_auto"
            if name == "max_model_len"
            else "human_int"
            if name in HUMAN_INT_FIELDS
            else "int"
        }
    elif _has(comps, "float"):
        spec = {"type": "float"}
    elif "dict" in kinds and (_has(comps, "str") or _non_builtin(comps)):
        spec = {"type": "json_or_str"}
    elif "dict" in kinds:
        spec = {"type": "json"}
    elif _has(comps, "str") or _non_builtin(comps) or _has(comps, "Any"):
        spec = {"type": "str"}
    else:
        return {"unresolved": f"{name}: {comps}"}
    if ("none",) in comps:
        spec["nullable"] = True
    return spec


class VllmFields:
    """The `field_hook` for vLLM config classes (cached per class and field)."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self._cache: dict[tuple[str, str], Spec] = {}

    def __call__(self, mod: Module, cls: ast.ClassDef, name: str) -> Spec:
        key = (cls.name, name)
        if key not in self._cache:
            self._cache[key] = self._compute(mod, cls, name)
        return dict(self._cache[key])

    def _compute(self, mod: Module, cls: ast.ClassDef, name: str) -> Spec:
        for fmod, stmt in class_fields(self.src, mod, cls):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                spec = field_spec(name, annotation(self.src, fmod, stmt.annotation))
                spec.update(self._customized(mod, cls).get(name, {}))
                return {k: v for k, v in spec.items() if v is not _DELETE}
        return {"unresolved": f"{cls.name}.{name} not found"}

    def _customized(self, mod: Module, cls: ast.ClassDef) -> dict[str, Spec]:
        """Edits made by `_customize_cli_kwargs` (the class's and its bases')."""
        out: dict[str, Spec] = {}
        for cmod, ccls in _mro(self.src, mod, cls):
            found = method(self.src, cmod, ccls, "_customize_cli_kwargs", depth=99)
            if found:
                for fname, edit in _edits(self.src, found[0], found[1]):
                    out.setdefault(fname, {}).update(edit)
        return out


_DELETE = object()


def _mro(src: Source, mod: Module, cls: ast.ClassDef) -> list[tuple[Module, ast.ClassDef]]:
    out: list[tuple[Module, ast.ClassDef]] = []
    for base in cls.bases:
        found = src.resolve_attr(mod, base)
        if found and isinstance(found[1], ast.ClassDef):
            out.extend(_mro(src, found[0], found[1]))
    return out + [(mod, cls)]


def _edits(src: Source, mod: Module, fn: ast.FunctionDef) -> list[tuple[str, Spec]]:
    """Edits: `kw["f"]["type"] = json.loads`, `kw["f"]["action"] = ...`, `del kw["f"]["nargs"]`."""
    out: list[tuple[str, Spec]] = []
    for node in ast.walk(fn):
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for tgt in targets:
            path = _path(tgt)
            if path is None:
                continue
            fname, key = path
            if value is None:
                out.append((fname, {key: _DELETE}))
            elif key == "type":
                out.append((fname, type_of(src, mod, value)))
            elif key == "action":
                act = (
                    value.value
                    if isinstance(value, ast.Constant)
                    else ("custom:" + ast.unparse(value))
                )
                out.append((fname, {"action": act}))
    return out


def _path(node: ast.expr) -> tuple[str, str] | None:
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.value, ast.Subscript)
        and isinstance(node.value.slice, ast.Constant)
    ):
        return str(node.value.slice.value), str(node.slice.value)
    return None
