"""Assemble every file of an engine bundle in memory, then write them: the public entry points."""

from __future__ import annotations

import importlib
import json
import math
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import yaml

from hardware.catalog import get_gpu
from hardware.spec import GpuSpec
from planner.emitters.capabilities import check_shape, quant_flag
from planner.emitters.common import place, render, roles, unmapped
from planner.emitters.context import at_address, check_fits_one_request, check_host
from planner.emitters.flag_table import FlagRow, Flags
from planner.emitters.plan_file import PlanFile, parse_plan
from planner.emitters.plan_md import plan_markdown
from planner.emitters.types import Command, EmitContext, EngineBuild, OutFile, Slot
from planner.emitters.writer import argv, script, shell_line
from planner.engines import get_engine
from planner.errors import PlannerInputError
from planner.perf.deployment import Deployment, Speculative
from planner.safe_files import prepare_out_dir, write_new_file

ROUNDS_PER_CLIENT = 5  # requests per closed-loop client, as in an engine's benchmark guide
RATE_WINDOW_S = 120.0  # open-loop run length used to size --num-prompts
MIN_PROMPTS = 100
RESULTS_RUN = "results/latest"  # benchmark.sh: the run in progress; renamed results/run-<UTC time>


def launch_file(ctx: EmitContext, flags: Flags, build: EngineBuild) -> OutFile:
    """``launch.sh``: every server in the background, the router, then wait."""
    nodes = sorted({slot.node for slot, _ in build.servers} | {build.router_node})
    blocks = []
    for node in nodes:
        cmds = [
            shell_line(cmd, background=True) for slot, cmd in build.servers if slot.node == node
        ]
        if build.router is not None and node == build.router_node:
            cmds.append(shell_line(build.router, background=True))
        body = "\n\n".join(cmds)
        if len(nodes) > 1:
            body = f'if [ "${{NODE_RANK:-0}}" = "{node}" ]; then\n{body}\nfi'
        blocks.append(body)
    dep = ctx.deployment
    what = (
        f"{shlex.quote(ctx.model_id)} on {dep.total_gpus} x {shlex.quote(gpu_text(dep))}, "
        f"{flags.engine} {flags.version_text}, {dep.mode}"
    )
    title = f"{what}; set NODE_RANK on each node" if len(nodes) > 1 else what
    text = script(title, ['cd "$(dirname "$0")"', *blocks, "wait"])
    return OutFile(name="launch.sh", text=text, executable=True)


def split(total: float, parts: int, index: int) -> float:
    """Share ``index`` of ``total`` split as evenly as integers allow."""
    return total // parts + (1 if index < total % parts else 0)


def bench_command(
    ctx: EmitContext, flags: Flags, host: str, port: int, index: int, n: int
) -> Command:
    """One load-generator client against one endpoint, carrying its share of the load."""
    wl = ctx.workload
    values: dict[str, object] = {
        "bench_backend": "default",
        "bench_model": ctx.model_id,
        "bench_host": host,
        "bench_port": port,
        "bench_dataset": "default",
        "bench_isl": wl.isl,
        "bench_osl": wl.osl,
        "bench_range_ratio": "fixed",
        "bench_prefix_len": 0,
    }
    prompts = 0
    if wl.concurrency is not None:
        clients = int(split(wl.concurrency, n, index)) or 1
        values["bench_concurrency"] = clients
        prompts = clients * ROUNDS_PER_CLIENT
    if wl.rate is not None and wl.concurrency is None:
        # with a concurrency the plan was predicted for a closed loop; its rate is an output then
        rate = round(wl.rate / n, 6)
        values["bench_rate"] = rate
        prompts = max(prompts, math.ceil(rate * RATE_WINDOW_S))
    values["bench_num_prompts"] = max(prompts, MIN_PROMPTS)
    values["bench_ignore_eos"] = True
    values |= _result_values(flags, index)
    return Command(
        program=flags.words("bench_program", "bench"),
        args=render(flags, values, "bench").args,
        comment=f"client {index} -> {host}:{port}",
    )


def _result_values(flags: Flags, index: int) -> dict[str, object]:
    """Where client ``index`` writes its native result file (the layout ``planner calibrate e2e``
    reads): a result folder where the engine's client takes one (``--save-result`` JSON), else
    one JSON-lines file."""
    if flags.find("bench_result_dir", "bench") is not None:
        return {
            "bench_save_result": True,
            "bench_result_dir": RESULTS_RUN,
            "bench_result_file": f"client{index}.json",
        }
    return {"bench_result_file": f"{RESULTS_RUN}/client{index}.jsonl"}


def sidecar_file(ctx: EmitContext, flags: Flags) -> OutFile:
    """``deployment.json``: what the results were measured on (the plan's deployment, engine and
    version); benchmark.sh copies it next to each run's result files."""
    sidecar = {
        "deployment": ctx.deployment.model_dump(
            mode="json", exclude=None if ctx.deployment.prefill_gpu else {"prefill_gpu"}
        ),
        "backend": flags.engine,
        "engine_version": flags.version_text,
    }
    text = json.dumps(sidecar, indent=2, sort_keys=True) + "\n"
    return OutFile(name="deployment.json", text=text)


def _results_blocks() -> tuple[list[str], list[str]]:
    """Shell blocks before the clients (the run folder with a copy of ``deployment.json``) and
    after them (the run folder renamed by time, the next command printed)."""
    before = [
        'cd "$(dirname "$0")"',
        f"if [ -e {RESULTS_RUN} ]; then\n"
        f'    echo "{RESULTS_RUN} exists (an interrupted run?); move it away first" >&2\n'
        "    exit 1\nfi",
        f"mkdir -p {RESULTS_RUN}\ncp deployment.json {RESULTS_RUN}/deployment.json",
    ]
    after = [
        'run="results/run-$(date -u +%Y%m%dT%H%M%SZ)"\n'
        f'mv {RESULTS_RUN} "$run"\n'
        'echo "results in $PWD/$run; next: planner calibrate e2e --data $PWD/results '
        '--out calibration.yaml"',
    ]
    return before, after


def benchmark_file(ctx: EmitContext, flags: Flags, build: EngineBuild) -> OutFile:
    """``benchmark.sh``: the engine's load generator with the plan's ISL/OSL and load; each run's
    native result files and a ``deployment.json`` go to ``results/run-<UTC time>/``."""
    n = len(build.endpoints)
    cmds = [bench_command(ctx, flags, h, p, i, n) for i, (h, p) in enumerate(build.endpoints)]
    blocks = [shell_line(c, background=n > 1) for c in cmds] + (["wait"] if n > 1 else [])
    before, after = _results_blocks()
    wl = ctx.workload
    load = (
        f"concurrency {wl.concurrency}" if wl.concurrency is not None else f"rate {wl.rate} req/s"
    )
    title = f"Replay ISL {wl.isl} / OSL {wl.osl}, {load}, against launch.sh; compare with PLAN.md"
    text = script(title, [*before, *blocks, *after])
    return OutFile(name="benchmark.sh", text=text, executable=True)


def _flatten(tree: Mapping[str, object], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for key, value in tree.items():
        path = f"{prefix}{key}"
        keys |= _flatten(value, path + ".") if isinstance(value, Mapping) else {path}
    return keys


def used_rows(
    flags: Flags, commands: Mapping[str, list[Command]], configs: tuple[OutFile, ...]
) -> list[FlagRow]:
    """The table rows that appear in the bundle, matched per tool (``serve``/``router``/``bench``).

    YAML keys are matched against ``yaml`` rows of any tool (the router has its own file).
    """
    keys: set[str] = set()
    for f in configs:
        keys |= _flatten(yaml.safe_load(f.text) or {})
    found = []
    for row in flags.rows:
        cmds = commands.get(row.tool, [])
        if row.kind == "yaml":
            hit = row.flag in keys
        elif row.kind == "program":
            hit = any(" ".join(c.program) == row.flag for c in cmds)
        elif row.kind == "env":
            hit = any(row.flag in dict(c.env) for c in cmds)
        else:
            hit = any(row.flag in argv(c)[len(c.program) :] for c in cmds)
        if hit:
            found.append(row)
    return found


def bundle_commands(ctx: EmitContext, flags: Flags, build: EngineBuild) -> dict[str, list[Command]]:
    """Every command of the bundle, grouped by tool."""
    n = len(build.endpoints)
    return {
        "serve": [c for _, c in build.servers],
        "router": [build.router] if build.router else [],
        "bench": [
            bench_command(ctx, flags, h, p, i, n) for i, (h, p) in enumerate(build.endpoints)
        ],
    }


def _gpu(dep: Deployment, hardware_dirs: tuple[str, ...], role: str = "decode") -> GpuSpec:
    """The GPU type ``role`` runs on (``plan.best.deployment.prefill_gpu`` for prefill workers
    of a pair of two types, else ``gpu``)."""
    field = "prefill_gpu" if role == "prefill" and dep.prefill_gpu else "gpu"
    try:
        return get_gpu(dep.role_gpu(role), hardware_dirs)
    except PlannerInputError as exc:
        raise PlannerInputError(
            f"plan.best.deployment.{field}", f"{exc} (custom GPUs: --hardware-dir)"
        ) from exc


def role_gpus(dep: Deployment, hardware_dirs: tuple[str, ...]) -> dict[str, GpuSpec]:
    """Role -> the GPU type its workers run on."""
    return {role: _gpu(dep, hardware_dirs, role) for role, _ in roles(dep)}


def _quant_flags(backend: str, dep: Deployment, gpus: dict[str, GpuSpec]) -> dict[str, str | None]:
    """Per role, on its own GPU type: check the shape and the checkpoint format, and find the
    --quantization value."""
    out: dict[str, str | None] = {}
    for role, worker in roles(dep):
        gpu = gpus[role]
        check_shape(backend, role, worker.parallel, gpu.node_gpus)
        out[role] = quant_flag(backend, dep, worker.weight_quant, gpu.architecture)
    return out


def gpu_text(dep: Deployment) -> str:
    """'h200_sxm', or 'prefill h100_sxm + decode h200_sxm' for roles on two GPU types."""
    return f"prefill {dep.prefill_gpu} + decode {dep.gpu}" if dep.prefill_gpu else dep.gpu


class Emitter(Protocol):
    """An engine's emitter module (``Engine.emitter``)."""

    BASE_PORT: int
    """First server port on a host."""

    def build(self, ctx: EmitContext, flags: Flags) -> EngineBuild:
        """The engine's processes and config files."""
        ...

    def serve_values(self, ctx: EmitContext, slot: Slot) -> dict[str, object]:
        """Planner parameter -> value of one server (what ``unmapped`` checks)."""
        ...


def check_speculative(spec: Speculative | None) -> None:
    """Refuse a draft the emitters cannot name: an EAGLE-3 head or a draft model is a checkpoint
    of its own, and the plan does not carry its identity (identity is sacred: never guess one)."""
    if spec is not None and spec.method != "mtp":
        raise PlannerInputError(
            "plan",
            f"best.speculative.method {spec.method!r}: emitting needs the draft checkpoint's "
            "identity, which the plan does not carry; only mtp (the model's own MTP layers) is "
            "emitted. Plan with --spec-method mtp or none.",
        )


def emitter(backend: str) -> Emitter:
    """The emitter module of engine ``backend``."""
    module: Emitter = importlib.import_module(get_engine(backend).emitter)  # type: ignore[assignment]
    return module


def engine_build(
    plan: PlanFile,
    backend: str,
    version: str | None = None,
    hardware_dirs: tuple[str, ...] = (),
    host: str = "",
) -> tuple[EmitContext, Flags, EngineBuild]:
    """The checked context, the flag table and the engine's processes and config files
    (``host``: the address servers and the router listen on; empty: the default)."""
    flags = Flags(backend, version)
    module = emitter(backend)
    check_speculative(plan.best.speculative)
    dep = plan.best.deployment
    gpus = role_gpus(dep, hardware_dirs)
    gpu = _gpu(dep, hardware_dirs)
    # prefill and decode on two GPU types: each role on hosts of its own type
    hosts = {r: g.node_gpus for r, g in gpus.items()} if dep.prefill_gpu else {}
    slots = place(dep, module.BASE_PORT, gpu.node_gpus, hosts)
    ctx = EmitContext(
        deployment=dep,
        model_id=dep.hf_id,
        quant=_quant_flags(backend, dep, gpus),
        slots=at_address(slots, check_host(host)),
        workload=plan.workload,
        node_gpus=gpu.node_gpus,
        role_node_gpus=hosts,
        listen=check_host(host),
        speculative=plan.best.speculative,
        prefix_cache=plan.prefix_cache if plan.prefix_cache and plan.prefix_cache.enabled else None,
    )
    check_fits_one_request(plan, ctx)
    return ctx, flags, module.build(ctx, flags)


def build_bundle(
    plan: PlanFile,
    backend: str,
    version: str | None = None,
    hardware_dirs: tuple[str, ...] = (),
    host: str = "",
) -> tuple[OutFile, ...]:
    """Every file for ``backend``, built in memory; raises before anything is written."""
    ctx, flags, build = engine_build(plan, backend, version, hardware_dirs, host)
    module = emitter(backend)
    launch, bench = launch_file(ctx, flags, build), benchmark_file(ctx, flags, build)
    rows = used_rows(flags, bundle_commands(ctx, flags, build), build.configs)
    files = (launch, *build.configs, bench, sidecar_file(ctx, flags))
    first = {s.role: s for s in reversed(ctx.slots)}
    missing = {
        str(role): unmapped(flags, module.serve_values(ctx, slot))
        for role, slot in sorted(first.items(), reverse=True)
    }
    md = plan_markdown(plan, ctx, flags, build, rows, [f.name for f in files], missing)
    return (*files, OutFile(name="PLAN.md", text=md))


def write_files(
    files: tuple[OutFile, ...], out_dir: str | Path, force: bool = False, flag: str = "--out"
) -> list[Path]:
    """Write an already-built bundle into ``out_dir`` (see :mod:`planner.safe_files`)."""
    out = prepare_out_dir(out_dir, force, flag)
    return [write_new_file(out / f.name, f.text.encode(), force, flag, f.executable) for f in files]


def write_engine_configs(
    plan_dict: Mapping[str, object],
    backend: str,
    out_dir: str | Path,
    version: str | None = None,
    force: bool = False,
) -> list[Path]:
    """Validate ``plan_dict``, build the ``backend`` bundle in memory, then write it."""
    return write_files(build_bundle(parse_plan(dict(plan_dict)), backend, version), out_dir, force)
