"""Engine-neutral steps shared by every emitter: placement, planner values, table rendering."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from planner.emitters.flag_table import Flags, Tool
from planner.emitters.per_rank import engine_values
from planner.emitters.types import Command, EmitContext, Role, Slot
from planner.emitters.writer import set_dotted
from planner.errors import PlannerInputError
from planner.perf.deployment import Deployment, WorkerConfig

# HGX-style servers hold 8 GPUs; replicas are packed onto nodes in this unit unless the GPU spec
# says otherwise (hardware GpuSpec.node_gpus: 4 per NVL72 compute tray).
GPUS_PER_NODE = 8
LOCAL_HOST = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"
A2A_EP_GPUS = 8
"""Expert parallelism wider than this many GPUs (one HGX host) runs its all-to-all on DeepEP or
the engine's equivalent, as the engines' wide-EP recipes do (SGLang's DeepSeek large-scale EP
guide, vLLM's expert-parallel deployment guide, TensorRT-LLM's wide-EP examples)."""
A2A_MODE: dict[Role, str] = {"agg": "auto", "prefill": "throughput", "decode": "latency"}
"""All-to-all kernels per role: high-throughput for prefill, low-latency for decode (CUDA
graphs), the engine's automatic choice for a worker that does both."""


def roles(deployment: Deployment) -> list[tuple[Role, WorkerConfig]]:
    """(role, worker) pairs of a deployment, prefill before decode."""
    pairs: list[tuple[Role, WorkerConfig | None]]
    if deployment.mode == "agg":
        pairs = [("agg", deployment.agg)]
    else:
        pairs = [("prefill", deployment.prefill), ("decode", deployment.decode)]
    return [(role, w) for role, w in pairs if w is not None]


def place(
    deployment: Deployment,
    base_port: int,
    node_gpus: int = GPUS_PER_NODE,
    role_node_gpus: Mapping[str, int] | None = None,
) -> tuple[Slot, ...]:
    """Pack replicas onto hosts of ``node_gpus`` GPUs in order. A replica that fits a host never
    straddles two; a wider one starts on a fresh host and gets one slot per host it spans (the
    planner's shapes fill whole hosts: ``planner.perf.deployment.placement_problem``). With
    ``role_node_gpus`` (prefill and decode on two GPU types) each role starts on hosts of its own
    type, of its own size."""
    slots: list[Slot] = []
    offset, replicas = 0, 0
    for role, worker in roles(deployment):
        if role_node_gpus:  # a role of another GPU type starts on its own hosts
            if offset % node_gpus:
                offset += node_gpus - offset % node_gpus
            offset = offset // node_gpus * role_node_gpus[role]
            node_gpus = role_node_gpus[role]
        width = worker.parallel.gpus
        nodes = -(-width // node_gpus)
        for index in range(worker.workers):
            if (nodes > 1 or offset % node_gpus + width > node_gpus) and offset % node_gpus:
                offset += node_gpus - offset % node_gpus  # do not straddle hosts
            node, local = divmod(offset, node_gpus)
            per = width // nodes
            for rank in range(nodes):
                first = local if nodes == 1 else 0
                slots.append(
                    Slot(
                        role=role,
                        index=index,
                        worker=worker,
                        node=node + rank,
                        gpu_ids=tuple(range(first, first + per)),
                        host=LOCAL_HOST,
                        port=base_port + replicas,
                        nodes=nodes,
                        node_rank=rank,
                    )
                )
            replicas += 1
            offset += width if nodes == 1 else nodes * node_gpus
    if any(s.node for s in slots):  # several nodes: servers must be reachable by name
        slots = [_named(s) for s in slots]
    return tuple(slots)


def _named(slot: Slot) -> Slot:
    """``slot`` with host names ``node<i>`` and its replica's head host."""
    return slot.model_copy(
        update={"host": f"node{slot.node}", "head": f"node{slot.node - slot.node_rank}"}
    )


def worker_values(
    deployment: Deployment, worker: WorkerConfig, quant: str | None = None
) -> dict[str, object]:
    """Engine-neutral planner values of one worker, keyed by flag-table ``param``.

    Parallel degrees of 1 are left out so the engine default applies. The running requests, the
    chunk and the CUDA-graph batch are per attention-DP rank (``server_values`` converts them to
    the engine's flags); graphs cover every running slot of a rank. ``quant`` is the
    engine's load-time quantization (``capabilities.quant_flag``); a pre-quantized checkpoint
    needs none, the engine reads its format.
    """
    par = worker.parallel
    values: dict[str, object] = {
        "tp": par.tp,
        "max_batch": worker.max_num_seqs,
        "chunk": worker.max_num_batched_tokens,
        "mem_fraction": worker.gpu_memory_utilization,
        "kv_dtype": worker.kv_dtype,
        "max_len": deployment.max_model_len,
        "cuda_graph_max": worker.max_num_seqs,
    }
    for name, degree in (("pp", par.pp), ("dp", par.dp), ("ep", par.ep)):
        if degree > 1:
            values[name] = degree
    if par.dp > 1:
        values["attention_dp"] = True
    if quant is not None:
        values["quant"] = quant
    return values


def multi_host(ctx: EmitContext) -> bool:
    """Whether the bundle's processes run on more than one host."""
    return any(s.node for s in ctx.slots)


def listen_address(ctx: EmitContext) -> str:
    """Where servers and the router listen: ``--host``, else loopback on one host and all
    interfaces when several hosts take part."""
    return ctx.listen or (ALL_INTERFACES if multi_host(ctx) else LOCAL_HOST)


def router_host(ctx: EmitContext) -> str:
    """Where clients reach the router: this host (at ``--host`` when it names one address), or
    the first host of a multi-host bundle."""
    if multi_host(ctx):
        return "node0"
    return ctx.listen if ctx.listen not in ("", ALL_INTERFACES, "::") else LOCAL_HOST


def needs_router(ctx: EmitContext) -> bool:
    """A router goes in front of several aggregated replicas and of every disaggregated plan."""
    return ctx.deployment.mode == "disagg" or len(ctx.heads()) > 1


def context_length(ctx: EmitContext) -> int:
    """The longest request the engine must accept: the plan's maximum model length, at least the
    workload's longest prompt plus longest answer."""
    wl = ctx.workload
    wanted = (wl.max_isl or wl.isl) + (wl.max_osl or wl.osl)
    return max(ctx.deployment.max_model_len, wanted)


def a2a_mode(slot: Slot, node_gpus: int) -> str | None:
    """The all-to-all kernels (``A2A_MODE``) of a worker whose experts span hosts or more than
    ``A2A_EP_GPUS`` GPUs; None when its expert parallelism stays inside one host."""
    ep = slot.worker.parallel.ep
    if ep <= A2A_EP_GPUS and ep <= node_gpus:
        return None
    return A2A_MODE[slot.role]


def server_values(ctx: EmitContext, slot: Slot, engine: str) -> dict[str, object]:
    """Planner values of one server in the engine's per-rank terms (``per_rank.yaml``), with its
    context length and, for wide expert parallelism, its all-to-all kernels (``moe_a2a``)."""
    worker = slot.worker
    values = worker_values(ctx.deployment, worker, ctx.quant.get(slot.role))
    values["max_len"] = context_length(ctx)
    spec = ctx.speculative.draft_tokens if ctx.speculative is not None else 0
    values = engine_values(engine, values, worker.parallel.dp, spec)
    mode = a2a_mode(slot, ctx.hosts_of(slot.role))
    if mode is not None:
        values["moe_a2a"] = mode
    return values


def engine_value(flags: Flags, param: str, value: object, tool: Tool) -> object:
    """The engine's value for a planner value, or None when the row maps it to nothing."""
    row = flags.get(param, tool)
    if row.values:
        return row.values.get(str(value))
    return value


class Rendered(BaseModel):
    """Planner values mapped through the table, in three shapes."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    args: tuple[tuple[str, tuple[str, ...]], ...] = Field(description="CLI (flag, values) pairs.")
    tree: dict[str, object] = Field(description="Nested mapping of the ``yaml`` rows.")
    flat: dict[str, object] = Field(
        description="CLI rows as a config-file mapping (flag without --)."
    )
    env: tuple[tuple[str, str], ...] = Field(
        default=(), description="Environment variables of the ``env`` rows."
    )


def render(flags: Flags, values: dict[str, object], tool: Tool = "serve") -> Rendered:
    """Map planner values through the table.

    A parameter without an active row is skipped (see ``unmapped``); a value the row
    maps to nothing (e.g. bf16 weights -> no --quantization) is omitted.
    """
    args: list[tuple[str, tuple[str, ...]]] = []
    tree: dict[str, object] = {}
    flat: dict[str, object] = {}
    env: list[tuple[str, str]] = []
    for param, raw in values.items():
        row = flags.find(param, tool)
        value = None if row is None else engine_value(flags, param, raw, tool)
        if row is None or value is None or value is False:
            continue
        if row.kind == "env":
            env.append((row.flag, str(value)))
            continue
        if row.kind == "yaml":
            set_dotted(tree, row.flag, list(value) if isinstance(value, tuple) else value)
            continue
        words = () if row.kind == "switch" else value if isinstance(value, tuple) else (value,)
        args.append((row.flag, tuple(str(w) for w in words)))
        flat[row.flag.lstrip("-")] = True if row.kind == "switch" else value
    return Rendered(args=tuple(args), tree=tree, flat=flat, env=tuple(env))


def unmapped(flags: Flags, values: dict[str, object], tool: Tool = "serve") -> list[str]:
    """Parameters the engine has no spelling for (reported in PLAN.md)."""
    return [p for p in values if flags.find(p, tool) is None]


def bind_host(slot: Slot) -> str:
    """Address a server listens on: loopback on a single node, all interfaces across nodes."""
    return LOCAL_HOST if slot.host == LOCAL_HOST else ALL_INTERFACES


def replica_comment(slot: Slot) -> str:
    """``prefill replica 0`` (``, host 2 of 4`` on a multi-node replica)."""
    where = f", host {slot.node_rank + 1} of {slot.nodes}" if slot.nodes > 1 else ""
    return f"{slot.role} replica {slot.index}{where}"


def visible_devices(slot: Slot) -> tuple[tuple[str, str], ...]:
    """``CUDA_VISIBLE_DEVICES``: the slot's GPUs on its node (a multi-node replica uses them
    all)."""
    if not slot.gpu_ids or slot.nodes > 1:
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


def prefix_router_values(ctx: EmitContext) -> dict[str, object]:
    """The router's policy: cache-aware with the thresholds the plan's replay assumed
    (``planner.perf.prefix_cache.RouterThresholds``) when the plan routes by prefix, else
    round robin (the plan spreads requests evenly)."""
    from planner.perf.prefix_cache import RouterThresholds

    pc = ctx.prefix_cache
    if pc is None or pc.routing == "round-robin":
        return {"router_policy": "round_robin"}
    if pc.routing == "session":
        raise PlannerInputError(
            "plan.prefix_cache.routing",
            "session affinity has no router policy checked against the engines' argument "
            "lists; plan with --routing round-robin,prefix",
        )
    th = RouterThresholds()
    return {
        "router_policy": "cache_aware",
        "router_cache_threshold": th.cache_threshold,
        "router_balance_abs": th.balance_abs,
        "router_balance_rel": th.balance_rel,
    }


def host_tier_gib(ctx: EmitContext, slot: Slot, engine: str) -> float:
    """Host-memory KV per GPU of this slot (0: none): the tier sits on the workers that receive
    prompts (aggregated or prefill). An SSD tier is refused: no engine's argument list here
    sizes one (docs/agentic.md)."""
    pc = ctx.prefix_cache
    if pc is None:
        return 0.0
    if pc.ssd_kv_gib_per_gpu > 0:
        raise PlannerInputError(
            "plan.prefix_cache.ssd_kv_gib_per_gpu",
            f"{engine}: no SSD tier size is checked against its argument lists; plan with "
            "--ssd-kv-gib 0",
        )
    return pc.host_kv_gib_per_gpu if slot.role != "decode" else 0.0
