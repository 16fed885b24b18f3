"""Static reading of Python source with `ast`: modules, name look-up, constants, annotations.

Used by `extract.py` to read engines' argument definitions without importing the engines.
Only what the engines' argument code needs is understood; anything else reads as unknown
(`None` from `const`, `("unknown", text)` from `annotation`), never as a guess.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

BUILTIN_TYPES = {"int", "float", "str", "bool", "dict", "list", "tuple", "set", "bytes"}
TYPING_ALIASES = {
    "List": "list",
    "Sequence": "list",
    "Iterable": "list",
    "Tuple": "tuple",
    "Set": "set",
    "FrozenSet": "set",
    "frozenset": "set",
    "Dict": "dict",
    "Mapping": "dict",
    "MutableMapping": "dict",
}


@dataclass
class Module:
    """One parsed source file and its top-level names."""

    name: str
    path: Path
    tree: ast.Module
    assigns: dict[str, ast.expr] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    funcs: dict[str, ast.FunctionDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)


class Source:
    """A checkout (or unpacked wheel): dotted module names map to files under `roots`."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self._cache: dict[str, Module | None] = {}

    def module(self, dotted: str) -> Module | None:
        if dotted not in self._cache:
            self._cache[dotted] = self._load(dotted)
        return self._cache[dotted]

    def _load(self, dotted: str) -> Module | None:
        rel = Path(*dotted.split("."))
        for root in self.roots:
            for cand in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
                if cand.is_file():
                    tree = ast.parse(cand.read_text(encoding="utf-8"), filename=str(cand))
                    mod = Module(dotted, cand, tree)
                    _index(mod, tree.body, cand.name == "__init__.py")
                    return mod
        return None

    def relpath(self, mod: Module) -> str:
        for root in self.roots:
            try:
                return str(mod.path.relative_to(root))
            except ValueError:
                continue
        return str(mod.path)

    def lookup(self, mod: Module, name: str, depth: int = 0) -> tuple[Module, ast.AST] | None:
        """Where `name` (as seen from `mod`) is defined: a class, function or assignment."""
        if depth > 12:
            return None
        for table in (mod.classes, mod.funcs, mod.assigns):
            if name in table:
                return mod, table[name]
        if name in mod.imports:
            target, attr = mod.imports[name]
            other = self.module(target)
            if other is None:
                return None
            if attr is None:
                return other, other.tree
            return self.lookup(other, attr, depth + 1)
        return None

    def resolve_attr(self, mod: Module, node: ast.expr) -> tuple[Module, ast.AST] | None:
        """`a.b.C` where `a.b` is an imported module (or a class attribute)."""
        if isinstance(node, ast.Name):
            return self.lookup(mod, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve_attr(mod, node.value)
            if base is None:
                return None
            bmod, bnode = base
            if isinstance(bnode, ast.Module):
                return self.lookup(bmod, node.attr)
            if isinstance(bnode, ast.ClassDef):
                return _class_attr(bmod, bnode, node.attr)
        return None


def _class_attr(mod: Module, cls: ast.ClassDef, name: str) -> tuple[Module, ast.AST] | None:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) and stmt.name == name:
            return mod, stmt
        if isinstance(stmt, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return mod, stmt.value
    return None


def _index(mod: Module, body: list[ast.stmt], is_pkg: bool) -> None:
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            mod.classes[stmt.name] = stmt
        elif isinstance(stmt, ast.FunctionDef):
            mod.funcs[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for tgt in stmt.targets:
                if isinstance(tgt, ast.Name):
                    mod.assigns[tgt.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.value is not None:
                mod.assigns[stmt.target.id] = stmt.value
        elif type(stmt).__name__ == "TypeAlias":
            mod.assigns[stmt.name.id] = stmt.value  # type: ignore[attr-defined]
        elif isinstance(stmt, ast.ImportFrom):
            _index_import_from(mod, stmt, is_pkg)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                mod.imports[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0],
                    None,
                )
        elif isinstance(stmt, ast.If):
            _index(mod, stmt.body, is_pkg)
            _index(mod, stmt.orelse, is_pkg)
        elif isinstance(stmt, ast.Try):
            _index(mod, stmt.body, is_pkg)


def _index_import_from(mod: Module, stmt: ast.ImportFrom, is_pkg: bool) -> None:
    base = stmt.module or ""
    if stmt.level:
        parts = mod.name.split(".")
        keep = len(parts) - stmt.level + (1 if is_pkg else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    for alias in stmt.names:
        local = alias.asname or alias.name
        # `from pkg import submodule` is told apart from `from mod import name` at look-up.
        mod.imports[local] = (base, alias.name)


def const(
    src: Source,
    mod: Module,
    node: ast.AST | None,
    env: Mapping[str, object] | None = None,
    depth: int = 0,
) -> object:
    """The value of a constant expression (lists of strings and the like) or None.

    ``env`` maps local names to the expressions assigned to them (other bindings are ignored).
    """
    if node is None or depth > 20:
        return None
    env = env or {}
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        vals = [const(src, mod, e, env, depth + 1) for e in node.elts]
        return None if any(v is None for v in vals) else vals
    if isinstance(node, ast.Dict):
        keys = [const(src, mod, k, env, depth + 1) for k in node.keys]
        return None if any(k is None for k in keys) else {k: True for k in keys}
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
        left = const(src, mod, node.left, env, depth + 1)
        right = const(src, mod, node.right, env, depth + 1)
        if isinstance(left, list) and isinstance(right, list):
            return left + right
        if isinstance(left, dict) and isinstance(right, dict):
            return {**left, **right}
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        return None
    if isinstance(node, ast.Name):
        if node.id in env:
            bound = env[node.id]
            return const(src, mod, bound, None, depth + 1) if isinstance(bound, ast.AST) else None
        found = src.lookup(mod, node.id)
        if found and isinstance(found[1], ast.expr):
            return const(src, found[0], found[1], None, depth + 1)
        return None
    if isinstance(node, ast.Attribute):
        found = src.resolve_attr(mod, node)
        if found and isinstance(found[1], ast.expr):
            return const(src, found[0], found[1], None, depth + 1)
        return None
    if isinstance(node, ast.Subscript):
        return _literal_values(src, mod, node, depth)
    if isinstance(node, ast.Call):
        return _const_call(src, mod, node, env, depth)
    return None


def _literal_values(src: Source, mod: Module, node: ast.Subscript, depth: int) -> object:
    if _base_name(node.value) != "Literal":
        return None
    vals = literal_args(src, mod, node)
    return vals


def _const_call(
    src: Source, mod: Module, node: ast.Call, env: Mapping[str, object], depth: int
) -> object:
    fname = _base_name(node.func)
    if fname in {"list", "sorted", "set", "tuple", "frozenset", "get_args"} and node.args:
        val = const(src, mod, node.args[0], env, depth + 1)
        if isinstance(val, dict):
            val = list(val)
        if isinstance(val, list) and fname == "sorted":
            return sorted(val, key=str)
        return val if isinstance(val, list) else None
    if isinstance(node.func, ast.Attribute) and node.func.attr == "keys" and not node.args:
        val = const(src, mod, node.func.value, env, depth + 1)
        return list(val) if isinstance(val, dict) else None
    return None


def literal_args(src: Source, mod: Module, node: ast.Subscript) -> list[object] | None:
    """The values of `Literal[...]` (nested Literals and named Literal aliases included)."""
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    out: list[object] = []
    for elt in elts:
        if isinstance(elt, ast.Constant):
            out.append(elt.value)
            continue
        val = const(src, mod, elt)
        if isinstance(val, list):
            out.extend(val)
        elif val is not None:
            out.append(val)
        else:
            return None
    return out


def _base_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def base_name(node: ast.AST) -> str | None:
    """`Foo` for `Foo` and for `mod.Foo`."""
    return _base_name(node)


Comp: TypeAlias = tuple[object, ...]
"""One member of an annotation's union, a tagged tuple (see :func:`annotation`)."""


def comp_values(comp: Comp) -> list[object]:
    """The values of a ``("literal", [values])`` member ([] for any other)."""
    return comp[1] if comp[0] == "literal" and isinstance(comp[1], list) else []


def comp_members(comp: Comp) -> list[Comp]:
    """The element members of a ``("coll", kind, [members], nargs)`` member ([] for others)."""
    if comp[0] != "coll" or not isinstance(comp[2], list):
        return []
    return [c for c in comp[2] if isinstance(c, tuple)]


ANNOTATED = {"Annotated", "A"}


def split_annotated(node: ast.expr) -> tuple[ast.expr, list[ast.expr]]:
    """`Annotated[T, meta...]` -> (T, [meta...]); anything else -> (node, [])."""
    if isinstance(node, ast.Subscript) and _base_name(node.value) in ANNOTATED:
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return elts[0], list(elts[1:])
    return node, []


def annotation(src: Source, mod: Module, node: ast.AST | None, depth: int = 0) -> list[Comp]:
    """The union members of a type annotation, each a tuple:
    ("none",), ("type", "int"|"float"|"str"|"bool"|"Any"|...), ("literal", [values]),
    ("coll", "list"|"tuple"|"set", [element members], nargs), ("dict",),
    ("class", name, "dataclass"|"model"|"dict"|"enum"|"other"), ("unknown", text)."""
    if node is None or depth > 15:
        return [("unknown", "")]
    if isinstance(node, ast.Constant):
        if node.value is None:
            return [("none",)]
        if isinstance(node.value, str):
            return annotation(src, mod, ast.parse(node.value, mode="eval").body, depth + 1)
        return [("unknown", repr(node.value))]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return annotation(src, mod, node.left, depth + 1) + annotation(
            src, mod, node.right, depth + 1
        )
    if isinstance(node, ast.Subscript):
        return _subscript(src, mod, node, depth)
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _named(src, mod, node, depth)
    return [("unknown", ast.unparse(node) if isinstance(node, ast.expr) else "")]


def _subscript(src: Source, mod: Module, node: ast.Subscript, depth: int) -> list[Comp]:
    base = _base_name(node.value) or ""
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if base in ANNOTATED:
        return annotation(src, mod, elts[0], depth + 1)
    if base == "Optional":
        return annotation(src, mod, elts[0], depth + 1) + [("none",)]
    if base == "Union":
        return [c for e in elts for c in annotation(src, mod, e, depth + 1)]
    if base == "Literal":
        vals = literal_args(src, mod, node)
        return [("literal", vals)] if vals is not None else [("unknown", ast.unparse(node))]
    kind = TYPING_ALIASES.get(base, base)
    if kind in {"list", "set"}:
        return [("coll", kind, annotation(src, mod, elts[0], depth + 1), "+")]
    if kind == "tuple":
        if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
            return [("coll", "tuple", annotation(src, mod, elts[0], depth + 1), "+")]
        return [("coll", "tuple", annotation(src, mod, elts[0], depth + 1), len(elts))]
    if kind == "dict":
        return [("dict",)]
    return [("unknown", ast.unparse(node))]


def _named(src: Source, mod: Module, node: ast.expr, depth: int) -> list[Comp]:
    name = _base_name(node) or ""
    if name in BUILTIN_TYPES or name in {"Any", "object"}:
        return [("type", name)]
    if name in TYPING_ALIASES:
        return (
            [("coll", TYPING_ALIASES[name], [("type", "str")], "+")]
            if (TYPING_ALIASES[name] != "dict")
            else [("dict",)]
        )
    found = src.resolve_attr(mod, node)
    if found is None:
        return [("unknown", name)]
    fmod, fnode = found
    if isinstance(fnode, ast.ClassDef):
        return [("class", fnode.name, class_kind(src, fmod, fnode))]
    if isinstance(fnode, ast.expr):
        return annotation(src, fmod, fnode, depth + 1)
    return [("unknown", name)]


DATACLASS_DECORATORS = {"dataclass", "config", "dataclasses"}
MODEL_BASES = {"BaseModel", "StrictBaseModel", "BaseSettings"}


def class_kind(src: Source, mod: Module, cls: ast.ClassDef, depth: int = 0) -> str:
    """dataclass (decorated), model (pydantic/msgspec base), dict, enum or other."""
    for dec in cls.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if _base_name(target) in DATACLASS_DECORATORS:
            return "dataclass"
    for base in cls.bases:
        name = _base_name(base) or ""
        if name in {"dict", "Dict"}:
            return "dict"
        if name in {"Enum", "StrEnum", "IntEnum"}:
            return "enum"
        if name in MODEL_BASES or name == "Struct":
            return "model"
        if name == "TypedDict":
            return "other"
        found = src.resolve_attr(mod, base)
        if found and isinstance(found[1], ast.ClassDef) and depth < 10:
            kind = class_kind(src, found[0], found[1], depth + 1)
            if kind != "other":
                return kind
    return "other"


def class_fields(
    src: Source, mod: Module, cls: ast.ClassDef, depth: int = 0
) -> list[tuple[Module, ast.AnnAssign]]:
    """Annotated class attributes, base classes' first (dataclass field order)."""
    out: list[tuple[Module, ast.AnnAssign]] = []
    if depth < 10:
        for base in cls.bases:
            found = src.resolve_attr(mod, base)
            if found and isinstance(found[1], ast.ClassDef):
                out.extend(class_fields(src, found[0], found[1], depth + 1))
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            out = [(m, s) for m, s in out if _fname(s) != stmt.target.id]
            out.append((mod, stmt))
    return out


def _fname(stmt: ast.AnnAssign) -> str:
    return stmt.target.id if isinstance(stmt.target, ast.Name) else ""


def find_class(src: Source, dotted: str, name: str) -> tuple[Module, ast.ClassDef]:
    mod = src.module(dotted)
    if mod is None:
        raise LookupError(f"module {dotted} not found under {src.roots}")
    found = src.lookup(mod, name)
    if found is None or not isinstance(found[1], ast.ClassDef):
        raise LookupError(f"class {name} not found from {dotted}")
    return found[0], found[1]


def find_function(src: Source, dotted: str, qualname: str) -> tuple[Module, ast.FunctionDef]:
    """`func` or `Class.method` in module `dotted`."""
    mod = src.module(dotted)
    if mod is None:
        raise LookupError(f"module {dotted} not found under {src.roots}")
    parts = qualname.split(".")
    found = src.lookup(mod, parts[0])
    if found is None:
        raise LookupError(f"{parts[0]} not found in {dotted}")
    fmod, node = found
    if len(parts) == 2 and isinstance(node, ast.ClassDef):
        meth = method(src, fmod, node, parts[1])
        if meth is None:
            raise LookupError(f"{qualname} not found in {dotted}")
        return meth
    if not isinstance(node, ast.FunctionDef):
        raise LookupError(f"{qualname} in {dotted} is not a function")
    return fmod, node


def method(
    src: Source, mod: Module, cls: ast.ClassDef, name: str, depth: int = 0
) -> tuple[Module, ast.FunctionDef] | None:
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
            return mod, stmt
    if depth < 10:
        for base in cls.bases:
            found = src.resolve_attr(mod, base)
            if found and isinstance(found[1], ast.ClassDef):
                got = method(src, found[0], found[1], name, depth + 1)
                if got:
                    return got
    return None
