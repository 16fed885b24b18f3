"""Layering: hardware -> kernels_db runtime -> planner core -> solvers -> interfaces (CLI,
reports, emitters, app), and no import cycle between modules.

Two checks. Read from the source (every ``import`` and ``from`` anywhere in a module: at the top,
inside functions, under ``TYPE_CHECKING``): a module imports only its own layer and the layers
below it; the kernels_db runtime never imports its fitters, validators and tools (``KERNEL_TOOLS``:
they sit beside it and import it); and the module graph has no strongly connected component of
more than one module. Run: importing any module of hardware, kernels_db or the planner core alone,
in a fresh child process (forked from one interpreter that has loaded only third-party libraries,
so a module cannot hide behind another one's imports), loads no solver, app or interface module.
The core also prints nothing: it hands progress lines to a callback of its caller
(``planner.perf.replay.Progress``) and leaves output to the CLI.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("hardware", "kernels_db", "planner", "solvers", "app")
UPPER = ("planner.cli", "planner.reports", "planner.emitters", "planner.emit")
FORBIDDEN = ("solvers", "app", *UPPER)
# planner/__main__.py is the CLI's entry point, not a core module
NOT_CORE = ("planner.__main__",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_upper(name: str) -> bool:
    # an engine's emitter (planner/engines/<name>/emitter.py) belongs to the emit layer
    emitter = name.startswith("planner.engines.") and name.endswith(".emitter")
    return emitter or any(name == u or name.startswith(u + ".") for u in UPPER)


@cache
def core_files() -> dict[str, Path]:
    """Every module of hardware, kernels_db and the planner core, found on disk: name -> file."""
    found = {
        _module_name(p): p
        for pkg in ("hardware", "kernels_db", "planner")
        for p in sorted((ROOT / pkg).rglob("*.py"))
    }
    return {n: p for n, p in found.items() if not _is_upper(n) and n not in NOT_CORE}


def core_modules() -> list[str]:
    return list(core_files())


def _third_party(modules: list[str]) -> list[str]:
    """Third-party modules the modules import (preloaded once, before the forks, so that each
    child only imports project code)."""
    found: set[str] = set()
    for name in modules:
        for node in ast.walk(ast.parse(core_files()[name].read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return sorted(n for n in found if n.split(".")[0] not in (*PROJECT, "__future__"))


CHILD = """
import importlib, json, os, sys
preload, modules, forbidden = json.loads(sys.argv[1])
for name in preload:
    try:
        importlib.import_module(name)
    except Exception:
        pass
assert not [n for n in sys.modules if n.split(".")[0] in PROJECT], "preload imported the project"
out = {}
for name in modules:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            bad = sorted(n for n in sys.modules
                         if any(n == f or n.startswith(f + ".") for f in forbidden))
            msg = json.dumps(bad)
        except BaseException as e:  # the import itself failed: report it
            msg = json.dumps([f"import failed: {type(e).__name__}: {e}"])
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out[name] = json.loads(f.read() or '["child died"]')
    os.waitpid(pid, 0)
print(json.dumps(out))
""".replace("PROJECT", repr(PROJECT))


@cache
def imported_upper_layers() -> dict[str, list[str]]:
    """Module -> the forbidden modules importing it alone loaded (one child process each)."""
    modules = core_modules()
    arg = json.dumps([_third_party(modules), modules, list(FORBIDDEN)])
    res = subprocess.run(
        [sys.executable, "-c", CHILD, arg],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out: dict[str, list[str]] = json.loads(res.stdout.splitlines()[-1])
    return out


def test_the_core_is_found() -> None:
    mods = core_modules()
    assert {
        "hardware.spec",
        "kernels_db.lookup",
        "planner.perf.serving",
        "planner.perf.simulator",
    } <= set(mods)
    assert not [m for m in mods if _is_upper(m) or m.startswith(("solvers", "app"))]


@pytest.mark.skipif(sys.platform == "win32", reason="needs os.fork")
@pytest.mark.parametrize("module", core_modules())
def test_core_module_imports_no_upper_layer(module: str) -> None:
    assert imported_upper_layers()[module] == []


def test_the_check_sees_an_upper_import(tmp_path: Path) -> None:
    """The same child, given a module that does import the CLI, reports it (the test can fail)."""
    arg = json.dumps([[], ["planner.cli.output"], list(FORBIDDEN)])
    res = subprocess.run(
        [sys.executable, "-c", CHILD, arg],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert "planner.cli.output" in json.loads(res.stdout.splitlines()[-1])["planner.cli.output"]


LAYERS = ("hardware", "kernels_db", "planner core", "solvers", "interfaces")
"""From the bottom up: a module may import its own layer and the layers below it."""
KERNEL_TOOLS = (
    "kernels_db.tools",
    "kernels_db.bench",
    "kernels_db.fit",
    "kernels_db.validate",
    "kernels_db.moe_load",
    "kernels_db.aiconfigurator",
    "kernels_db.folder",
)
"""kernels_db's fitters, validators, table readers and command lines: beside the runtime (which
never imports them), used by the interfaces and by each other."""
NOT_CHECKED: tuple[str, ...] = ()
"""Modules left out of both AST checks (none)."""


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer(name: str) -> int:
    """Index into ``LAYERS`` of module ``name`` (kernels_db's tools: the planner core's, whose
    file helpers they write with; nothing below imports them)."""
    top = name.split(".")[0]
    if top == "app" or _is_upper(name) or name in NOT_CORE:
        return LAYERS.index("interfaces")
    if _under(name, KERNEL_TOOLS):
        return LAYERS.index("planner core")
    return {"hardware": 0, "kernels_db": 1, "planner": 2, "solvers": 3}[top]


@cache
def project_files() -> dict[str, Path]:
    """Every module of the project's packages, found on disk: name -> file."""
    return {_module_name(p): p for pkg in PROJECT for p in sorted((ROOT / pkg).rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_pkg: bool) -> Iterator[str]:
    """Project modules an import statement of module ``name`` names (a ``from`` import of a
    submodule names the submodule)."""
    if isinstance(node, ast.Import):
        wanted = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = name.split(".")[: None if is_pkg else -1]
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        wanted = [f"{base}.{a.name}" for a in node.names] + [base]
    known = project_files()
    for w in wanted:
        while w and w not in known:
            w = w.rpartition(".")[0]
        if w and w.split(".")[0] in PROJECT:
            yield w


@cache
def import_graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports anywhere in its source (top level, functions,
    ``TYPE_CHECKING`` blocks)."""
    graph = {}
    for name, path in project_files().items():
        tree = ast.parse(path.read_text())
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_targets(node, name, path.name == "__init__.py"))
        found.discard(name)
        # a from-import of a submodule also names its package; the package itself is no edge
        graph[name] = frozenset(t for t in found if not name.startswith(t + "."))
    return graph


def _checked(graph: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    return {
        m: frozenset(t for t in ts if not _under(t, NOT_CHECKED))
        for m, ts in graph.items()
        if not _under(m, NOT_CHECKED)
    }


def layer_violations(graph: Mapping[str, frozenset[str]]) -> list[str]:
    """'importer -> imported (why)' for each import that goes up a layer, or from the kernels_db
    runtime (or the planner core and solvers) into kernels_db's tools."""
    out = []
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if _under(t, KERNEL_TOOLS) and not _under(m, KERNEL_TOOLS) and layer(m) < 4:
                out.append(f"{m} -> {t} (runtime imports a kernels_db tool)")
            elif layer(t) > layer(m):
                out.append(f"{m} -> {t} ({LAYERS[layer(m)]} imports {LAYERS[layer(t)]})")
    return out


def cycles(graph: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_imports_anywhere_in_a_module_go_down_the_layers() -> None:
    assert layer_violations(_checked(import_graph())) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles(_checked(import_graph())) == []


def test_the_source_checks_can_fail() -> None:
    """A tiny graph with a cycle, an upward import and a runtime import of a fitter."""
    graph = {
        "planner.a": frozenset({"planner.b"}),
        "planner.b": frozenset({"planner.c"}),
        "planner.c": frozenset({"planner.a", "solvers.plan"}),
        "kernels_db.lookup": frozenset({"kernels_db.fit"}),
        "kernels_db.fit": frozenset({"kernels_db.lookup"}),
        "hardware.spec": frozenset(),
    }
    assert cycles(graph) == [
        ["kernels_db.fit", "kernels_db.lookup"],
        ["planner.a", "planner.b", "planner.c"],
    ]
    assert layer_violations(graph) == [
        "kernels_db.lookup -> kernels_db.fit (runtime imports a kernels_db tool)",
        "planner.c -> solvers.plan (planner core imports solvers)",
    ]


def test_the_graph_sees_imports_inside_functions() -> None:
    """An import inside a function (``planner.cli.cmd_plan`` imports ``solvers.plan`` there) is
    an edge of the graph."""
    assert "solvers.plan" in import_graph()["planner.cli.cmd_plan"]


COMMAND_LINES = (
    "planner.cli",
    "planner.__main__",
    "kernels_db.tools",
    "kernels_db.bench",
)
"""Where a command line (``argparse``, an ``if __name__ == "__main__"`` block) may live."""


def _has_command_line(path: Path) -> bool:
    """A ``__main__`` block or a module-level ``main`` (``argparse`` used as a library, to parse an
    engine's own argument list, is not a command line)."""
    tree = ast.parse(path.read_text())
    if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
        return True
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in ast.walk(tree)
    )


def test_runtime_modules_have_no_command_line() -> None:
    """Developer tools (fitters, checks, the GPU sweep) sit beside the runtime as their own
    modules; a runtime module of hardware, kernels_db, the planner or the solvers has none."""
    found = [
        name
        for name, path in project_files().items()
        if name.split(".")[0] in ("hardware", "kernels_db", "planner", "solvers")
        and not _under(name, COMMAND_LINES)
        and _has_command_line(path)
    ]
    assert found == []


# Programs inside the core that print their own results (entry points run with python -m), and
# modules whose progress still goes to stderr; everything else hands output to its caller.
PROGRAMS = ("kernels_db.bench.",)
PRINTS_TODAY = {
    # issue 23: progress on stderr; to become a callback like planner.perf.replay's
    "planner.calibration.profile",
    "planner.replay_e2e.fit",
    "planner.replay_e2e.holdout",
    "planner.replay_e2e.mlperf",
    "planner.replay_e2e.predict",
    "planner.replay_e2e.throughput",
}


def _prints(path: Path) -> list[int]:
    """Lines that call print() or touch sys.stdout/sys.stderr outside ``main`` and the
    ``if __name__ == "__main__"`` block."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        is_main = isinstance(node, ast.FunctionDef) and node.name == "main"
        is_guard = isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
        if is_main or is_guard:
            skip.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    hits = []
    for node in ast.walk(tree):
        call = isinstance(node, ast.Call) and ast.unparse(node.func) == "print"
        stream = isinstance(node, ast.Attribute) and ast.unparse(node) in (
            "sys.stdout",
            "sys.stderr",
        )
        if (call or stream) and node.lineno not in skip:
            hits.append(node.lineno)
    return sorted(set(hits))


def test_the_core_prints_nothing() -> None:
    found = {}
    for name in core_modules():
        if name.startswith(PROGRAMS) or name in PRINTS_TODAY:
            continue
        if lines := _prints(core_files()[name]):
            found[name] = lines
    assert found == {}, f"core modules that print (hand the lines to a callback): {found}"


def _imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of ``path``, inside functions too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
    return out


def test_no_product_module_imports_the_lab() -> None:
    """``lab/`` is not installed: no module of the product imports it, at the top or inside a
    function."""
    found = [
        f"{p.relative_to(ROOT)}:{line}: {name}"
        for pkg in PROJECT
        for p in sorted((ROOT / pkg).rglob("*.py"))
        for line, name in _imported_names(p)
        if name == "lab" or name.startswith("lab.")
    ]
    assert found == [], found


def test_the_lab_scan_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from lab.prepare_e2e import main\n    import lab\n")
    assert [n for _, n in _imported_names(f)] == ["lab.prepare_e2e", "lab"]


def test_the_command_line_check_can_fail(tmp_path: Path) -> None:
    """A ``main`` or a ``__main__`` block is seen; argparse used as a library is not."""
    cases = {
        "def main() -> int:\n    return 0\n": True,
        "if __name__ == '__main__':\n    pass\n": True,
        "import argparse\n\nP = argparse.ArgumentParser()\n": False,
    }
    for text, expected in cases.items():
        f = tmp_path / "m.py"
        f.write_text(text)
        assert _has_command_line(f) is expected, text
