"""Collect argparse `add_argument` calls from a function's source, following the helper
functions and `X.add_cli_args(parser)` methods it calls, without running any of it.

The engine-specific parts (how a config class's fields become arguments) are hooks:
`field_hook(mod, cls, field)` returns the partial spec of one field for
`**kwargs_var["field"]` where `kwargs_var = get_kwargs(Cls)`, and `call_hook` may claim a
call (e.g. SGLang's `add_cli_args_from_dataclass`) and return the specs it adds.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TypeAlias

from lab.engine_args.astlib import Module, Source, base_name, const, method

Spec: TypeAlias = dict[str, object]
"""One argument record (flags, takes_value, type, nargs, choices...; see
planner/engines/*/args.yaml) or a partial one (the keywords of one `add_argument` call)."""
Env: TypeAlias = dict[str, ast.expr | tuple[Module, ast.ClassDef]]
"""Local names -> the expression assigned to them; ``__cls__`` -> the class of a method."""
KwBinding: TypeAlias = tuple[str, Module, ast.ClassDef, str]
"""A local bound to `get_kwargs(Cls)` ("cls", mod, Cls, "") or to one of its fields
("field", mod, Cls, field name)."""
SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version"}
NAMED_TYPES = {
    "human_readable_int": "human_int",
    "human_readable_int_or_auto": "human_int_or_auto",
    "json_list_type": "json",
    "nullable_str": "str",
    "loads": "json",
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "str",
}


class Walker:
    """Walks functions, keeping every argument the first time one of its flags is seen."""

    def __init__(
        self,
        src: Source,
        field_hook: Callable[[Module, ast.ClassDef, str], Spec] | None = None,
        call_hook: Callable[[Walker, Module, ast.Call], bool] | None = None,
    ) -> None:
        self.src = src
        self.field_hook = field_hook
        self.call_hook = call_hook
        self.args: list[Spec] = []
        self.flags: set[str] = set()
        self.files: set[str] = set()
        self._stack: list[int] = []

    def add(self, spec: Spec) -> None:
        flags = spec.get("flags")
        names = [str(n) for n in flags if n not in self.flags] if isinstance(flags, list) else []
        if not names:
            return
        spec["flags"] = names
        self.flags.update(names)
        self.args.append(spec)

    def walk(
        self,
        mod: Module,
        fn: ast.FunctionDef,
        cls: ast.ClassDef | None = None,
        cls_mod: Module | None = None,
    ) -> None:
        if id(fn) in self._stack:
            return
        self._stack.append(id(fn))
        self.files.add(self.src.relpath(mod))
        env: Env = {}
        kw_env: dict[str, KwBinding] = {}
        if cls is not None:
            env["__cls__"] = (cls_mod or mod, cls)
        self._block(mod, fn.body, env, kw_env)
        self._stack.pop()

    def _block(
        self, mod: Module, body: list[ast.stmt], env: Env, kw_env: dict[str, KwBinding]
    ) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self._assign(mod, stmt, env, kw_env)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                self._call(mod, stmt.value, env, kw_env)
            elif isinstance(stmt, ast.For):
                if not self._for_fields(mod, stmt, env, kw_env):
                    self._block(mod, stmt.body, env, kw_env)
            elif isinstance(stmt, (ast.If, ast.While)):
                self._block(mod, stmt.body, env, kw_env)
                self._block(mod, stmt.orelse, env, kw_env)
            elif isinstance(stmt, ast.With):
                self._block(mod, stmt.body, env, kw_env)
            elif isinstance(stmt, ast.Try):
                self._block(mod, stmt.body, env, kw_env)
            elif isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
                self._call(mod, stmt.value, env, kw_env)

    def _assign(
        self,
        mod: Module,
        stmt: ast.Assign | ast.AnnAssign,
        env: Env,
        kw_env: dict[str, KwBinding],
    ) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        if value is None:
            return
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        bound = self._kwargs_binding(mod, value, env, kw_env)
        for name in names:
            if bound is not None:
                kw_env[name] = bound
            else:
                env[name] = value
        if isinstance(value, ast.Call) and bound is None:
            self._call(mod, value, env, kw_env)

    def _kwargs_binding(
        self, mod: Module, value: ast.expr, env: Env, kw_env: dict[str, KwBinding]
    ) -> KwBinding | None:
        """`get_kwargs(Cls)` -> ("cls", mod, Cls, ""); `get_kwargs(Cls)["f"]` -> ("field", ...)."""
        if isinstance(value, ast.Call) and base_name(value.func) == "get_kwargs" and value.args:
            found = self._class_of(mod, value.args[0], env)
            return ("cls", found[0], found[1], "") if found else None
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call):
            inner = self._kwargs_binding(mod, value.value, env, kw_env)
            key = const(self.src, mod, value.slice)
            if inner and isinstance(key, str):
                return ("field", inner[1], inner[2], key)
        bound = (
            kw_env.get(value.value.id)
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
            else None
        )
        if isinstance(value, ast.Subscript) and bound is not None and bound[0] == "cls":
            key = const(self.src, mod, value.slice)
            if isinstance(key, str):
                return ("field", bound[1], bound[2], key)
        if isinstance(value, ast.Call):  # x = cls._customize_cli_kwargs(x) keeps the binding
            for arg in value.args:
                if isinstance(arg, ast.Name) and arg.id in kw_env:
                    return kw_env[arg.id]
        return None

    def _class_of(
        self, mod: Module, node: ast.expr, env: Env
    ) -> tuple[Module, ast.ClassDef] | None:
        if isinstance(node, ast.Name) and node.id == "cls" and "__cls__" in env:
            found = env["__cls__"]
            return found if isinstance(found, tuple) else None
        got = self.src.resolve_attr(mod, node)
        if got and isinstance(got[1], ast.ClassDef):
            return got[0], got[1]
        return None

    def _call(self, mod: Module, call: ast.Call, env: Env, kw_env: dict[str, KwBinding]) -> None:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument":
            spec = self.spec_from_call(mod, call, env, kw_env)
            if spec is not None:
                self.add(spec)
            return
        if self.call_hook and self.call_hook(self, mod, call):
            return
        self._follow(mod, call, env)

    def _follow(self, mod: Module, call: ast.Call, env: Env) -> None:
        """Walk a called helper that registers arguments (it mentions add_argument)."""
        func = call.func
        target: tuple[Module, ast.FunctionDef] | None = None
        cls_found: tuple[Module, ast.ClassDef] | None = None
        if isinstance(func, ast.Attribute):
            cls_found = self._class_of(mod, func.value, env)
            if cls_found:
                target = method(self.src, cls_found[0], cls_found[1], func.attr)
        if target is None:
            got = self.src.resolve_attr(mod, func)
            if got and isinstance(got[1], ast.FunctionDef):
                target = (got[0], got[1])
        if target is None or "add_argument" not in ast.unparse(target[1]):
            return
        if cls_found:
            self.walk(target[0], target[1], cls_found[1], cls_found[0])
        else:
            self.walk(target[0], target[1])

    def _for_fields(
        self, mod: Module, stmt: ast.For, env: Env, kw_env: dict[str, KwBinding]
    ) -> bool:
        """`for key, value in kwargs.items(): group.add_argument(f"--{key...}", **value)`."""
        it = stmt.iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Attribute)
            and it.func.attr == "items"
            and isinstance(it.func.value, ast.Name)
        ):
            return False
        bound = kw_env.get(it.func.value.id)
        if not bound or bound[0] != "cls" or self.field_hook is None:
            return False
        from lab.engine_args.astlib import class_fields

        cmod, cls = bound[1], bound[2]
        for _fmod, fstmt in class_fields(self.src, cmod, cls):
            name = fstmt.target.id  # type: ignore[union-attr]
            part = self.field_hook(cmod, cls, name)
            self.add(finish(["--" + name.replace("_", "-")], part))
        return True

    def spec_from_call(
        self, mod: Module, call: ast.Call, env: Env, kw_env: dict[str, KwBinding]
    ) -> Spec | None:
        names: list[str] = []
        for arg in call.args:
            text = self._flag_text(mod, arg, env)
            if text is not None:
                names.append(text)
        if not names:
            return None
        part: Spec = {}
        for kw in call.keywords:
            if kw.arg is None:
                part.update(self._star_kwargs(mod, kw.value, env, kw_env))
            else:
                part.update(self.keyword(mod, kw.arg, kw.value, env))
        return finish(names, part)

    def _flag_text(self, mod: Module, node: ast.expr, env: Env) -> str | None:
        if isinstance(node, ast.JoinedStr):
            out = ""
            for piece in node.values:
                if isinstance(piece, ast.Constant):
                    out += str(piece.value)
                elif isinstance(piece, ast.FormattedValue):
                    part = const(self.src, mod, piece.value, env)
                    out += "" if part is None else str(part)
            return out
        val = const(self.src, mod, node, env)
        return val if isinstance(val, str) else None

    def _star_kwargs(
        self, mod: Module, node: ast.expr, env: Env, kw_env: dict[str, KwBinding]
    ) -> Spec:
        if isinstance(node, ast.Dict):
            part: Spec = {}
            for key, val in zip(node.keys, node.values, strict=True):
                if key is None:
                    part.update(self._star_kwargs(mod, val, env, kw_env))
                else:
                    kname = const(self.src, mod, key)
                    if isinstance(kname, str):
                        part.update(self.keyword(mod, kname, val, env))
            return part
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            bound = kw_env.get(node.value.id)
            field = const(self.src, mod, node.slice)
            if bound and bound[0] == "cls" and isinstance(field, str) and self.field_hook:
                return dict(self.field_hook(bound[1], bound[2], field))
        if isinstance(node, ast.Name):
            bound = kw_env.get(node.id)
            if bound and bound[0] == "field" and self.field_hook:
                return dict(self.field_hook(bound[1], bound[2], bound[3]))
        return {"unresolved": ast.unparse(node)}

    def keyword(self, mod: Module, name: str, node: ast.expr, env: Env) -> Spec:
        if name == "type":
            return type_of(self.src, mod, node)
        if name == "choices":
            val = const(self.src, mod, node, env)
            if isinstance(val, dict):
                val = list(val)
            return {"choices": val} if isinstance(val, list) else {"choices_dynamic": True}
        if name in {"action", "nargs", "required", "dest"}:
            if name == "action" and not isinstance(node, ast.Constant):
                aname = base_name(node) or ast.unparse(node)
                if aname == "BooleanOptionalAction":
                    return {"action": "boolean_optional"}
                return {"action": "custom:" + aname}
            return {name: const(self.src, mod, node, env)}
        if name == "const":
            return {"const": True}
        return {}


def type_of(src: Source, mod: Module, node: ast.expr) -> Spec:
    """An explicit `type=` callable as a type name (plus `nullable` for optional_type)."""
    if isinstance(node, ast.Lambda):
        return {"type": "any"}
    if isinstance(node, ast.Call) and node.args:
        fname = base_name(node.func)
        if fname == "optional_type":
            return {**type_of(src, mod, node.args[0]), "nullable": True}
        if fname == "parse_type":
            return type_of(src, mod, node.args[0])
        return {"type": "any"}
    name = base_name(node) or ""
    if name in NAMED_TYPES:
        out: Spec = {"type": NAMED_TYPES[name]}
        if name == "nullable_str":
            out["nullable"] = True
        return out
    return {"type": "any", "type_source": name}


def finish(names: list[str], part: Spec) -> Spec:
    """A partial spec (type, nargs, action, choices...) as one argument record."""
    flags = list(names)
    spec: Spec = {"flags": flags}
    action = part.get("action")
    if not names[0].startswith("-"):
        spec["positional"] = True
    if action == "boolean_optional":
        flags += ["--no-" + n[2:] for n in names if n.startswith("--")]
        spec["takes_value"] = False
        return spec
    if isinstance(action, str) and (action in SWITCH_ACTIONS or _custom_switch(action, part)):
        spec["takes_value"] = False
        return spec
    spec["takes_value"] = True
    spec["type"] = part.get("type", "str")
    for key in (
        "nargs",
        "choices",
        "choices_dynamic",
        "nullable",
        "required",
        "type_source",
        "unresolved",
    ):
        if part.get(key) not in (None, False):
            spec[key] = part[key]
    if part.get("nargs") is None and "nargs" in part and _is_custom(action):
        spec.pop("nargs", None)
    if action == "append":
        spec["append"] = True
    if spec.get("choices_dynamic"):
        spec.pop("choices", None)
    choices = spec.get("choices")
    if isinstance(choices, list) and spec["type"] == "str":
        spec["choices"] = [c for c in choices if c is not None]
    return spec


def _is_custom(action: object) -> bool:
    return isinstance(action, str) and action.startswith("custom:")


def _custom_switch(action: str, part: Spec) -> bool:
    """A custom action class that takes no value: named Store{True,False,Const} without
    an explicit `nargs`, or given `nargs=0`."""
    if not _is_custom(action):
        return False
    if "nargs" in part:
        return part["nargs"] == 0
    return any(k in action for k in ("StoreTrue", "StoreFalse", "StoreConst"))
