"""Engine-neutral steps shared by every emitter: placement, planner values, table rendering."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner.deployment import Deployment, WorkerConfig
from planner.emitters.flag_table import Flags, Tool
from planner.emitters.types import Command, Role, Slot
from planner.emitters.writer import set_dotted

# HGX-style servers hold 8 GPUs; replicas are packed onto nodes in this unit.
GPUS_PER_NODE = 8
LOCAL_HOST = "127.0.0.1"


def roles(deployment: Deployment) -> list[tuple[Role, WorkerConfig]]:
    """(role, worker) pairs of a deployment, prefill before decode."""
    pairs: list[tuple[Role, WorkerConfig | None]]
    if deployment.mode == "agg":
        pairs = [("agg", deployment.agg)]
    else:
        pairs = [("prefill", deployment.prefill), ("decode", deployment.decode)]
    return [(role, w) for role, w in pairs if w is not None]


def place(deployment: Deployment, base_port: int) -> tuple[Slot, ...]:
    """Pack replicas onto nodes in order; a replica wider than a node gets no local GPU ids."""
    slots: list[Slot] = []
    offset = 0
    for role, worker in roles(deployment):
        width = worker.parallel.gpus
        for index in range(worker.workers):
            if width <= GPUS_PER_NODE and offset % GPUS_PER_NODE + width > GPUS_PER_NODE:
                offset += GPUS_PER_NODE - offset % GPUS_PER_NODE  # do not straddle nodes
            node, local = divmod(offset, GPUS_PER_NODE)
            gpu_ids = tuple(range(local, local + width)) if width <= GPUS_PER_NODE else ()
            slots.append(
                Slot(
                    role=role,
                    index=index,
                    worker=worker,
                    node=node,
                    gpu_ids=gpu_ids,
                    host=LOCAL_HOST,
                    port=base_port + len(slots),
                )
            )
            offset += width
    if any(s.node for s in slots):  # several nodes: servers must be reachable by name
        slots = [s.model_copy(update={"host": f"node{s.node}"}) for s in slots]
    return tuple(slots)


def worker_values(
    deployment: Deployment, worker: WorkerConfig, quant: str | None = None
) -> dict[str, Any]:
    """Engine-neutral planner values of one worker, keyed by flag-table ``param``.

    Parallel degrees of 1 are left out so the engine default applies. ``quant`` is the
    engine's load-time quantization (``capabilities.quant_flag``); a pre-quantized checkpoint
    needs none, the engine reads its format.
    """
    par = worker.parallel
    values: dict[str, Any] = {
        "tp": par.tp,
        "max_batch": worker.max_num_seqs,
        "chunk": worker.max_num_batched_tokens,
        "mem_fraction": worker.gpu_memory_utilization,
        "kv_dtype": worker.kv_dtype,
        "max_len": deployment.max_model_len,
        "cuda_graph_max": min(deployment.cuda_graph_max_batch, worker.max_num_seqs),
    }
    for name, degree in (("pp", par.pp), ("dp", par.dp), ("ep", par.ep)):
        if degree > 1:
            values[name] = degree
    if par.dp > 1:
        values["attention_dp"] = True
    if quant is not None:
        values["quant"] = quant
    return values


def engine_value(flags: Flags, param: str, value: Any, tool: Tool) -> Any:
    """The engine's value for a planner value, or None when the row maps it to nothing."""
    row = flags.get(param, tool)
    if row.values:
        return row.values.get(str(value))
    return value


class Rendered(BaseModel):
    """Planner values mapped through the table, in three shapes."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    args: tuple[tuple[str, tuple[str, ...]], ...] = Field(description="CLI (flag, values) pairs.")
    tree: dict[str, Any] = Field(description="Nested mapping of the ``yaml`` rows.")
    flat: dict[str, Any] = Field(description="CLI rows as a config-file mapping (flag without --).")


def render(flags: Flags, values: dict[str, Any], tool: Tool = "serve") -> Rendered:
    """Map planner values through the table.

    A parameter without an active row is skipped (see ``unmapped``); a value the row
    maps to nothing (e.g. bf16 weights -> no --quantization) is omitted.
    """
    args: list[tuple[str, tuple[str, ...]]] = []
    tree: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    for param, raw in values.items():
        row = flags.find(param, tool)
        value = None if row is None else engine_value(flags, param, raw, tool)
        if row is None or value is None or value is False:
            continue
        if row.kind == "yaml":
            set_dotted(tree, row.flag, list(value) if isinstance(value, tuple) else value)
            continue
        words = () if row.kind == "switch" else value if isinstance(value, tuple) else (value,)
        args.append((row.flag, tuple(str(w) for w in words)))
        flat[row.flag.lstrip("-")] = True if row.kind == "switch" else value
    return Rendered(args=tuple(args), tree=tree, flat=flat)


def unmapped(flags: Flags, values: dict[str, Any], tool: Tool = "serve") -> list[str]:
    """Parameters the engine has no spelling for (reported in PLAN.md)."""
    return [p for p in values if flags.find(p, tool) is None]


def bind_host(slot: Slot) -> str:
    """Address a server listens on: loopback on a single node, all interfaces across nodes."""
    return LOCAL_HOST if slot.host == LOCAL_HOST else "0.0.0.0"


def visible_devices(slot: Slot) -> tuple[tuple[str, str], ...]:
    """``CUDA_VISIBLE_DEVICES`` for a single-node replica; nothing for a multi-node one."""
    if not slot.gpu_ids:
        return ()
    return (("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in slot.gpu_ids)),)


def with_program(
    flags: Flags,
    param: str,
    tool: Tool,
    args: tuple[tuple[str, tuple[str, ...]], ...],
    positional: tuple[str, ...] = (),
    comment: str = "",
) -> Command:
    """A Command whose program words come from a ``kind: program`` row."""
    return Command(
        program=flags.words(param, tool), positional=positional, args=args, comment=comment
    )
