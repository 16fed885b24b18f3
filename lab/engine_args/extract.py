"""Regenerate an engine's argument lists (``planner/engines/<name>/args.yaml``) from its source,
read with `ast`.

    python -m lab.engine_args.extract vllm ROOT --tag v0.33.0 --commit SHA \
        [--artifact FILE] [--out planner/engines/vllm/args.yaml]

ROOT holds the engine's Python package (a git checkout's `python/` folder for SGLang, the
repository root for vLLM and TensorRT-LLM, or an unpacked release wheel); give the router's
package root with `--router-root` (SGLang: the `sglang-router` wheel, vLLM: the `vllm-router`
wheel). Nothing is imported or run: argument
names, types and choices are read from the source text. Writing refuses to replace an
existing file unless `--force`.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NotRequired, TypedDict

import yaml

from lab.engine_args.argwalk import Spec, Walker
from lab.engine_args.astlib import Source, const, find_function
from lab.engine_args.sglang_rules import dataclass_hook
from lab.engine_args.vllm_rules import VllmFields
from planner.safe_files import write_new_file

ENGINES_DIR = Path(__file__).resolve().parents[2] / "planner" / "engines"
"""Where each engine's folder, and so its ``args.yaml``, lives."""


class Tool(TypedDict):
    """One tool's block of the data file."""

    program: str
    entry: str
    sources: list[str]
    arguments: list[Spec]
    notes: NotRequired[str]


class Meta(TypedDict):
    """How the file was made: the command line and the release it was read from."""

    command: str
    source: dict[str, str]


def _tool(walker: Walker, program: str, entry: str) -> Tool:
    return {
        "program": program,
        "entry": entry,
        "sources": sorted(walker.files),
        "arguments": walker.args,
    }


# Arguments whose parser takes any string but whose config validates the value against a
# list at start-up (the engine exits there): (dest, module, list name, where it is checked).
VLLM_CHECKED = [
    (
        "--quantization",
        "vllm.model_executor.layers.quantization",
        "QUANTIZATION_METHODS",
        "vllm/config/model.py ModelConfig._verify_quantization",
    ),
    (
        "--kv-cache-dtype",
        "vllm.config.cache",
        "KV_CACHE_DTYPES",
        "vllm/config/cache.py CacheConfig._validate_cache_dtype",
    ),
]


def add_checked_choices(
    src: Source, walker: Walker, table: list[tuple[str, str, str, str]]
) -> None:
    """Give `choices` (and where they are checked) to arguments validated after parsing."""
    for flag, dotted, name, where in table:
        mod = src.module(dotted)
        values = const(src, mod, mod.assigns.get(name)) if mod else None
        if not isinstance(values, list):
            raise LookupError(f"{dotted}.{name} is not a constant list")
        for arg in walker.args:
            flags = arg.get("flags")
            if isinstance(flags, list) and flag in flags:
                arg["choices"] = values
                arg["choices_checked_by"] = where
        walker.files.add(src.relpath(mod))  # type: ignore[arg-type]


def vllm_tools(root: Path, router_root: Path | None = None) -> dict[str, Tool]:
    src = Source([root])
    fields = VllmFields(src)
    serve = Walker(src, field_hook=fields)
    mod, fn = find_function(src, "vllm.entrypoints.common.cli_args", "make_arg_parser")
    serve.walk(mod, fn)
    add_checked_choices(src, serve, VLLM_CHECKED)
    bench = Walker(src, field_hook=fields)
    mod, fn = find_function(src, "vllm.benchmarks.serve", "add_cli_args")
    bench.walk(mod, fn)
    return {
        "serve": _tool(serve, "vllm serve", "vllm/entrypoints/common/cli_args.py:make_arg_parser"),
        "bench": _tool(bench, "vllm bench serve", "vllm/benchmarks/serve.py:add_cli_args"),
        **(_router(router_root, "vllm_router", "vllm-router") if router_root else {}),
    }


def _router(root: Path, package: str, program: str) -> dict[str, Tool]:
    """The engine project's router (a separate release): ``launch_router.parse_router_args``."""
    rsrc = Source([root])
    router = Walker(rsrc)
    mod, fn = find_function(rsrc, f"{package}.launch_router", "parse_router_args")
    router.walk(mod, fn)
    return {"router": _tool(router, program, f"{package}/launch_router.py:parse_router_args")}


def sglang_tools(root: Path, router_root: Path | None = None) -> dict[str, Tool]:
    src = Source([root])
    serve = Walker(src, call_hook=dataclass_hook)
    mod, fn = find_function(src, "sglang.srt.server_args", "ServerArgs.add_cli_args")
    serve.walk(mod, fn)
    bench = Walker(src)
    mod, fn = find_function(src, "sglang.benchmark.serving", "cli_main")
    bench.walk(mod, fn)
    tools = {
        "serve": _tool(
            serve,
            "python -m sglang.launch_server",
            "sglang/srt/server_args.py:ServerArgs.add_cli_args",
        ),
        "bench": _tool(
            bench, "python -m sglang.benchmark.serving", "sglang/benchmark/serving.py:cli_main"
        ),
    }
    tools["bench"]["notes"] = (
        "python -m sglang.bench_serving is a deprecated shim that calls the same cli_main"
    )
    if router_root is not None:
        tools |= _router(router_root, "sglang_router", "python -m sglang_router.launch_router")
    return tools


EXTRACTORS: dict[str, Callable[..., dict[str, Tool]]] = {
    "vllm": vllm_tools,
    "sglang": sglang_tools,
}


def _arg_line(arg: object) -> str:
    text = yaml.safe_dump(arg, default_flow_style=True, width=10_000, sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def render(
    engine: str,
    meta: Meta,
    tools: Mapping[str, Tool],
    extra: Mapping[str, object] | None = None,
) -> str:
    """The YAML text: a header, the provenance block, then one flow mapping per argument."""
    lines = [
        f"# Command-line arguments of {engine}, read from its own source (names, types, choices).",
        "# Generated; do not edit. Regenerate with (ROOT: see source.artifact; add --artifact):",
        f"#   {meta['command']}",
        "# Each argument: flags (every option string), takes_value, type (int, float, str, json,",
        "# json_or_str, human_int (1k/1K suffixes), human_int_or_auto, any = a converter we do not",
        "# restate), nargs, choices, nullable (the literal None is accepted), append.",
        yaml.safe_dump(
            {"engine": engine, "source": meta["source"]}, sort_keys=False, width=100
        ).rstrip(),
        "tools:",
    ]
    for name, tool in tools.items():
        lines.append(f"  {name}:")
        for key in ("program", "entry", "sources", "notes"):
            if key in tool:
                lines.append(f"    {key}: {_arg_line(tool.get(key))}")
        lines.append(f"    count: {len(tool['arguments'])}")
        lines.append("    arguments:")
        lines += [f"      - {_arg_line(a)}" for a in tool["arguments"]]
    if extra:
        lines.append(yaml.safe_dump(extra, sort_keys=False, width=100).rstrip())
    return "\n".join(lines) + "\n"


PACKAGES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt_llm"}


def recorded_commit(root: Path, package: str) -> str:
    """The `__commit_id__` a setuptools-scm `_version.py` records (git's `g` prefix dropped)."""
    path = root / package / "_version.py"
    if not path.is_file():
        return f"not recorded ({package}/_version.py absent)"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            if any(isinstance(t, ast.Name) and t.id == "__commit_id__" for t in node.targets):
                val = node.value.value
                if isinstance(val, str) and val:
                    return f"{val.removeprefix('g')} (abbreviated, from {package}/_version.py)"
    return f"not recorded ({package}/_version.py has commit_id None)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="extract", description=__doc__.split("\n")[0])
    ap.add_argument("engine", choices=sorted(EXTRACTORS))
    ap.add_argument("root", type=Path)
    ap.add_argument("--tag", required=True, help="release tag the source was taken from")
    ap.add_argument(
        "--commit",
        default="",
        help="commit the release tag points at (default: the commit_id that the "
        "release's PKG/_version.py records, when it records one)",
    )
    ap.add_argument("--artifact", default="", help="the release file read, if not a checkout")
    ap.add_argument(
        "--router-root", type=Path, help="the router's package root (sglang_router, vllm_router)"
    )
    ap.add_argument("--router-version", default="", help="the router's release version")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    out = args.out or ENGINES_DIR / args.engine / "args.yaml"
    if out.is_symlink() or (out.exists() and not args.force):
        print(f"extract: {out} exists (use --force to replace it)", file=sys.stderr)
        return 2
    tools = EXTRACTORS[args.engine](args.root, router_root=args.router_root)
    extra = tools.pop("_extra", None)
    cmd = ["python -m lab.engine_args.extract", args.engine, "ROOT"]
    if args.router_root:
        cmd += ["--router-root", "ROUTER_ROOT", "--router-version", args.router_version]
    cmd += ["--tag", args.tag] + (["--commit", args.commit] if args.commit else [])
    meta: Meta = {
        "command": " ".join(cmd[:1] + [shlex.quote(c) for c in cmd[1:]]),
        "source": {
            "tag": args.tag,
            "commit": args.commit,
            "artifact": args.artifact,
            "router_version": args.router_version,
            "extracted": _dt.date.today().isoformat(),
        },
    }
    if not args.router_version:
        meta["source"].pop("router_version")
    if not args.commit:
        meta["source"]["commit"] = recorded_commit(args.root, PACKAGES[args.engine])
    text = render(args.engine, meta, tools, extra)
    yaml.safe_load(text)
    write_new_file(out, text.encode("utf-8"), force=True)  # temporary file + rename
    counts = ", ".join(f"{k}: {len(v['arguments'])} arguments" for k, v in tools.items())
    print(f"extract: wrote {out} ({counts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
