"""SGLang: the arguments `add_cli_args_from_dataclass(parser, ServerArgs)` registers.

A static re-statement of python/sglang/srt/arg_groups/arg_utils.py: every field of the
input namespaces listed in `_INPUT_NAMESPACES` (server_args.py) whose annotation is
`A[T, "help"]` or `A[T, Arg(...)]` becomes `--field-name` (or `Arg.cli_name`) plus
`Arg.aliases`; `Arg.no_cli` fields are skipped.
"""

from __future__ import annotations

import ast

from lab.engine_args.argwalk import Spec, Walker, finish, type_of
from lab.engine_args.astlib import (
    Comp,
    Module,
    Source,
    annotation,
    base_name,
    class_fields,
    comp_members,
    comp_values,
    const,
    split_annotated,
)


def _arg_meta(src: Source, mod: Module, metas: list[ast.expr]) -> dict[str, ast.expr] | None:
    """The `Arg(...)` keywords as nodes, `{}` for a bare help string, None if neither."""
    for meta in metas:
        if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
            return {}
        if isinstance(meta, ast.JoinedStr) or (
            isinstance(meta, ast.BinOp) and isinstance(meta.op, ast.Add)
        ):
            return {}
        if isinstance(meta, ast.Call) and base_name(meta.func) == "Arg":
            return {kw.arg: kw.value for kw in meta.keywords if kw.arg}
    return None


def _infer(comp: Comp | None) -> str:
    if comp and comp[0] == "type" and comp[1] in {"int", "float", "str"}:
        return str(comp[1])
    return "str"


def _unwrap_optional(comps: list[Comp]) -> tuple[list[Comp], bool]:
    non_none = [c for c in comps if c != ("none",)]
    if len(non_none) == 1 and len(comps) > 1:
        return non_none, True
    return comps, False


def field_spec(src: Source, mod: Module, stmt: ast.AnnAssign) -> Spec | None:
    inner, metas = split_annotated(stmt.annotation)
    meta = _arg_meta(src, mod, metas)
    if meta is None or const(src, mod, meta.get("no_cli")) is True:
        return None
    name = stmt.target.id  # type: ignore[union-attr]
    cli = const(src, mod, meta.get("cli_name")) or "--" + name.replace("_", "-")
    aliases = const(src, mod, meta.get("aliases")) or []
    names = [str(cli), *(str(a) for a in (aliases if isinstance(aliases, list) else []))]
    walker = Walker(src)
    part: Spec = {}
    if "action" in meta:
        part.update(walker.keyword(mod, "action", meta["action"], {}))
        kwargs = meta.get("action_kwargs")
        if isinstance(kwargs, ast.Dict):
            for key, val in zip(kwargs.keys, kwargs.values, strict=True):
                kname = const(src, mod, key)
                if isinstance(kname, str):
                    part.update(walker.keyword(mod, kname, val, {}))
        return finish(names, part)
    comps, _optional = _unwrap_optional(annotation(src, mod, inner))
    parser = type_of(src, mod, meta["type_parser"]) if "type_parser" in meta else None
    choices = const(src, mod, meta.get("choices")) if "choices" in meta else None
    nargs = const(src, mod, meta.get("nargs"))
    if len(comps) == 1 and comps[0][0] == "literal":
        values = comp_values(comps[0])
        vtype = type(values[0]).__name__ if values else "str"
        part = parser or {"type": _infer(("type", vtype))}
        part["choices"] = choices or values
    elif len(comps) == 1 and comps[0][0] == "coll" and comps[0][1] == "list" and not parser:
        elems = comp_members(comps[0])
        part = {"type": _infer(elems[0] if len(elems) == 1 else None), "nargs": nargs or "+"}
        if choices:
            part["choices"] = choices
    elif comps == [("type", "bool")]:
        part = {"action": "store_true"}
    else:
        part = parser or {"type": _infer(comps[0] if len(comps) == 1 else None)}
        if choices:
            part["choices"] = choices
        if nargs:
            part["nargs"] = nargs
    if "const" in meta:
        part["const"] = True
    if stmt.value is None and const(src, mod, meta.get("required")) is not False:
        part["required"] = True
    if "choices" in meta and choices is None:
        part["choices_dynamic"] = True
    return finish(names, part)


def namespace_classes(src: Source, mod: Module) -> list[tuple[Module, ast.ClassDef]]:
    """The classes listed in server_args.py's `_INPUT_NAMESPACES`."""
    node = mod.assigns.get("_INPUT_NAMESPACES")
    if not isinstance(node, ast.List):
        raise LookupError("_INPUT_NAMESPACES not found in sglang/srt/server_args.py")
    out = []
    for elt in node.elts:
        found = src.resolve_attr(mod, elt)
        if found is None or not isinstance(found[1], ast.ClassDef):
            raise LookupError(f"namespace class {ast.unparse(elt)} not found")
        out.append((found[0], found[1]))
    return out


def dataclass_hook(walker: Walker, mod: Module, call: ast.Call) -> bool:
    """`call_hook` claiming `add_cli_args_from_dataclass(parser, ServerArgs)`."""
    if base_name(call.func) != "add_cli_args_from_dataclass":
        return False
    src = walker.src
    for cmod, cls in namespace_classes(src, mod):
        walker.files.add(src.relpath(cmod))
        for fmod, stmt in class_fields(src, cmod, cls):
            spec = field_spec(src, fmod, stmt)
            if spec is not None:
                walker.add(spec)
    return True
