"""Layering: hardware -> kernels_db -> planner core -> solvers -> CLI/reports/emitters/app.

Importing any module of hardware, kernels_db or the planner core (every planner module outside
``planner.cli``, ``planner.reports`` and ``planner.emitters``) must not import solvers, app or the
terminal/report/emitter layers. Each module is imported alone in a fresh child process (forked from
one interpreter that has loaded only third-party libraries, so a module cannot hide behind another
one's imports) and its ``sys.modules`` is checked. The core also prints nothing: it hands progress
lines to a callback of its caller (``planner.replay.Progress``) and leaves output to the CLI.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("hardware", "kernels_db", "planner", "solvers", "app")
UPPER = ("planner.cli", "planner.reports", "planner.emitters")
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
    assert {"hardware.spec", "kernels_db.lookup", "planner.serving", "planner.simulator"} <= set(
        mods
    )
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


# Programs inside the core that print their own results (entry points run with python -m), and
# modules whose progress still goes to stderr; everything else hands output to its caller.
PROGRAMS = ("planner.validation.", "kernels_db.bench.")
PRINTS_TODAY = {
    # issue 23: progress on stderr; to become a callback like planner.replay's
    "planner.calibration_profile",
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
