"""TensorRT-LLM: ``trtllm-serve`` plus LLM-API YAML for one replica; behind NVIDIA Dynamo's
frontend (``python -m dynamo.frontend`` routing to ``python -m dynamo.trtllm`` workers that read
the same YAML) for several replicas and for disaggregated prefill/decode."""

from __future__ import annotations

from planner.emitters.common import (
    host_tier_gib,
    listen_address,
    multi_host,
    needs_router,
    prefix_router_values,
    render,
    replica_comment,
    router_host,
    server_values,
    visible_devices,
    with_program,
)
from planner.emitters.flag_table import Flags
from planner.emitters.per_rank import per_rank_table, tier_flag
from planner.emitters.types import Command, EmitContext, EngineBuild, OutFile, Role, Slot
from planner.emitters.writer import yaml_text

BASE_PORT = 8001  # the disaggregated-serving guide's first context server
ROUTER_PORT = 8000  # Dynamo's frontend --http-port default


def prefix_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Prefix caching and the host-memory tier in LLM-API terms: ``kv_cache_config``'s block
    reuse and its host cache in bytes per rank (``per_rank.yaml``)."""
    if ctx.prefix_cache is None:
        return {}
    out: dict[str, object] = {"prefix_caching": True}
    host = host_tier_gib(ctx, slot, "trtllm")
    if host > 0:
        entry = per_rank_table("trtllm").tier("kv_host_cache")
        out["kv_host_cache"] = tier_flag(entry, host, 1)
    return out


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Planner values in LLM-API terms: the world size is tp*dp when attention DP is on."""
    par = slot.worker.parallel
    values = server_values(ctx, slot, "trtllm")
    values.pop("dp", None)
    values["tp"] = par.tp * par.dp
    values["chunked_prefill"] = True
    values["cuda_graph_padding"] = True
    if ctx.speculative is not None:
        values["spec_method"] = ctx.speculative.method
        values["spec_tokens"] = ctx.speculative.draft_tokens
    if slot.role != "agg":
        values["disagg_backend"] = "default"
        values["disagg_buffer_tokens"] = values["max_len"]
    if slot.role == "prefill":
        values["disable_overlap"] = True
    return values | prefix_values(ctx, slot)


def config_name(role: Role) -> str:
    return "trtllm-config.yaml" if role == "agg" else f"trtllm-{role}.yaml"


def config_file(ctx: EmitContext, flags: Flags, slot: Slot) -> OutFile:
    """The extra LLM-API options YAML of one role."""
    header = [f"TensorRT-LLM {flags.version_text} LLM-API options, {slot.role} role"]
    values = serve_values(ctx, slot)
    if ctx.speculative is not None:
        for param in ("spec_method", "spec_tokens"):
            flags.get(param)  # a version without the spelling cannot run the planned MTP
    for param in prefix_values(ctx, slot):
        flags.get(param)  # nor without these the planned prefix cache
    tree = render(flags, values).tree
    return OutFile(name=config_name(slot.role), text=yaml_text(tree, header))


def mpi_launcher(
    ctx: EmitContext, flags: Flags, slot: Slot, env: tuple[tuple[str, str], ...] = ()
) -> tuple[str, ...]:
    """``mpirun -H node0:4,node1:4 -n 8 [-x VAR] trtllm-llmapi-launch`` for a replica spanning
    hosts (one line on the head host starts every rank; docs commands/trtllm-serve, multi-node;
    Open MPI's ``-x`` passes each variable of ``env`` on to the remote ranks); () else."""
    if slot.nodes == 1:
        return ()
    hosts = [s for s in ctx.slots if s.role == slot.role and s.index == slot.index]
    spec = ",".join(f"{s.host}:{len(s.gpu_ids)}" for s in hosts)
    ranks = sum(len(s.gpu_ids) for s in hosts)
    exported = [word for name, _ in env for word in ("-x", name)]
    return (
        "mpirun",
        "-H",
        spec,
        "-n",
        str(ranks),
        *exported,
        *flags.words("mpi_launcher", "serve"),
    )


ETCD_PORT = 2379  # etcd's client port
DISCOVERY_ENV = "ETCD_ENDPOINTS"
"""Where Dynamo processes reach etcd (dynamo/common/configuration/groups/runtime_args.py:
--discovery-backend etcd reads the ETCD_* variables)."""


def discovery(ctx: EmitContext) -> str:
    """How Dynamo's frontend finds its workers: a folder on one host, etcd across hosts, the
    Kubernetes API in pods."""
    if ctx.platform == "kubernetes":
        return "kubernetes"
    return "cluster" if multi_host(ctx) else "host"


def discovery_env(ctx: EmitContext) -> tuple[tuple[str, str], ...]:
    """``ETCD_ENDPOINTS`` on every Dynamo process of a multi-host bundle (etcd on node0)."""
    return ((DISCOVERY_ENV, f"http://node0:{ETCD_PORT}"),) if discovery(ctx) == "cluster" else ()


def server(ctx: EmitContext, flags: Flags, slot: Slot) -> Command:
    """One replica reading its role's YAML (under mpirun across hosts): ``trtllm-serve`` alone,
    or a Dynamo worker behind the frontend."""
    routed = needs_router(ctx)
    positional: tuple[str, ...] = ()
    if routed:
        values: dict[str, object] = {
            "routed_model": ctx.model_id,
            "routed_config": config_name(slot.role),
            "routed_mode": slot.role,
            "routed_discovery": discovery(ctx),
            "routed_health_port": slot.port,
        }
        if prefix_router_values(ctx)["router_policy"] == "cache_aware":
            flags.get("routed_kv_events")  # the KV-aware router reads the workers' block events
            values["routed_kv_events"] = True
        program = "routed_program"
    else:
        values = {
            "host": listen_address(ctx),
            "port": slot.port,
            "backend": "default",
            "config_file": config_name(slot.role),
        }
        program, positional = "serve_program", (ctx.model_id,)
    rendered = render(flags, values)
    cmd = with_program(
        flags,
        program,
        "serve",
        rendered.args,
        positional=positional,
        comment=replica_comment(slot).split(",")[0]
        + (f", all {slot.nodes} hosts from here (mpirun)" if slot.nodes > 1 else ""),
    )
    env = visible_devices(slot) + rendered.env + render(flags, serve_values(ctx, slot)).env
    if routed:
        env += discovery_env(ctx)
    launcher = mpi_launcher(ctx, flags, slot, env)
    return cmd.model_copy(update={"env": env, "launcher": launcher})


def router(ctx: EmitContext, flags: Flags) -> Command:
    """NVIDIA Dynamo's frontend: an OpenAI endpoint routing round robin over the registered
    workers (prefill then decode for a disaggregated plan)."""
    values: dict[str, object] = {
        "router_host": listen_address(ctx),
        "router_port": ROUTER_PORT,
        "router_policy": prefix_router_values(ctx)["router_policy"],
        "router_discovery": discovery(ctx),
    }
    what = f"Dynamo frontend ({str(values['router_policy']).replace('_', ' ')})"
    cmd = with_program(
        flags, "router_program", "router", render(flags, values, "router").args, comment=what
    )
    return cmd.model_copy(update={"env": discovery_env(ctx)})


def notes(ctx: EmitContext) -> tuple[str, ...]:
    """Where LLM-API semantics differ from the planner's."""
    out = [
        "kv_cache_config.free_gpu_memory_fraction is a share of the memory left after "
        "weights, not of the whole GPU; the planner's gpu_memory_utilization is passed as is.",
        "Weight quantization comes from the checkpoint (e.g. a ModelOpt FP8/NVFP4 export).",
    ]
    if any(s.worker.parallel.dp > 1 and s.worker.parallel.tp > 1 for s in ctx.slots):
        out.append("enable_attention_dp runs attention with TP 1 on every rank.")
    return tuple(out)


def build(ctx: EmitContext, flags: Flags) -> EngineBuild:
    """Servers with their per-role YAML, and Dynamo's frontend in front of several replicas or a
    disaggregated deployment."""
    first = {s.role: s for s in reversed(ctx.slots)}
    configs = tuple(config_file(ctx, flags, slot) for _, slot in sorted(first.items()))
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.heads())
    if not needs_router(ctx):
        return EngineBuild(
            servers=servers,
            configs=configs,
            notes=notes(ctx),
            endpoints=tuple((s.host, s.port) for s in ctx.heads()),
        )
    found = (
        f"etcd: start one on node0 (client port {ETCD_PORT}); every line sets {DISCOVERY_ENV}"
        if multi_host(ctx)
        else "a folder on this host ($DYN_FILE_KV, default $TMPDIR/dynamo_store_kv)"
    )
    dynamo = (
        "The frontend and workers come from `pip install ai-dynamo==1.6.1` (NVIDIA Dynamo); "
        f"workers register through {found}."
    )
    return EngineBuild(
        servers=servers,
        configs=configs,
        router=router(ctx, flags),
        endpoints=((router_host(ctx), ROUTER_PORT),),
        notes=(*notes(ctx), dynamo),
    )
