"""TensorRT-LLM: ``trtllm-serve`` plus LLM-API YAML, cache transceiver and the disaggregated
server."""

from __future__ import annotations

from planner.emitters.common import (
    LOCAL_HOST,
    bind_host,
    render,
    replica_comment,
    visible_devices,
    with_program,
    worker_values,
)
from planner.emitters.flag_table import Flags
from planner.emitters.types import Command, EmitContext, EngineBuild, OutFile, Role, Slot
from planner.emitters.writer import yaml_text

BASE_PORT = 8001  # the disaggregated-serving guide's first context server
ROUTER_PORT = 8000  # the guide's disaggregated server port


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Planner values in LLM-API terms: the world size is tp*dp when attention DP is on."""
    par = slot.worker.parallel
    values = worker_values(ctx.deployment, slot.worker, ctx.quant.get(slot.role))
    values.pop("dp", None)
    values["tp"] = par.tp * par.dp
    values["chunked_prefill"] = True
    values["cuda_graph_padding"] = True
    if slot.role != "agg":
        values["disagg_backend"] = "default"
        values["disagg_buffer_tokens"] = ctx.deployment.max_model_len
    if slot.role == "prefill":
        values["disable_overlap"] = True
    return values


def config_name(role: Role) -> str:
    return "trtllm-config.yaml" if role == "agg" else f"trtllm-{role}.yaml"


def config_file(ctx: EmitContext, flags: Flags, slot: Slot) -> OutFile:
    """The extra LLM-API options YAML of one role."""
    header = [f"TensorRT-LLM {flags.version_text} LLM-API options, {slot.role} role"]
    tree = render(flags, serve_values(ctx, slot)).tree
    return OutFile(name=config_name(slot.role), text=yaml_text(tree, header))


def mpi_launcher(ctx: EmitContext, flags: Flags, slot: Slot) -> tuple[str, ...]:
    """``mpirun -H node0:4,node1:4 -n 8 trtllm-llmapi-launch`` for a replica spanning hosts (one
    line on the head host starts every rank; docs commands/trtllm-serve, multi-node); () else."""
    if slot.nodes == 1:
        return ()
    hosts = [s for s in ctx.slots if s.role == slot.role and s.index == slot.index]
    spec = ",".join(f"{s.host}:{len(s.gpu_ids)}" for s in hosts)
    ranks = sum(len(s.gpu_ids) for s in hosts)
    return ("mpirun", "-H", spec, "-n", str(ranks), *flags.words("mpi_launcher", "serve"))


def server(ctx: EmitContext, flags: Flags, slot: Slot) -> Command:
    """One ``trtllm-serve`` replica reading its role's YAML (under mpirun across hosts)."""
    values = {
        "host": bind_host(slot),
        "port": slot.port,
        "backend": "default",
        "config_file": config_name(slot.role),
    }
    cmd = with_program(
        flags,
        "serve_program",
        "serve",
        render(flags, values).args,
        positional=(ctx.model_id,),
        comment=replica_comment(slot).split(",")[0]
        + (f", all {slot.nodes} hosts from here (mpirun)" if slot.nodes > 1 else ""),
    )
    launcher = mpi_launcher(ctx, flags, slot)
    return cmd.model_copy(update={"env": visible_devices(slot), "launcher": launcher})


def disagg_file(ctx: EmitContext, flags: Flags) -> OutFile:
    """``disagg_config.yaml`` for ``trtllm-serve disaggregated``."""
    pre, dec = ctx.role_slots("prefill"), ctx.role_slots("decode")
    values: dict[str, object] = {
        "router_host": LOCAL_HOST,
        "router_port": ROUTER_PORT,
        "router_backend": "default",
        "router_prefill_count": len(pre),
        "router_prefill_urls": tuple(f"{s.host}:{s.port}" for s in pre),
        "router_decode_count": len(dec),
        "router_decode_urls": tuple(f"{s.host}:{s.port}" for s in dec),
    }
    tree = render(flags, values, "router").tree
    return OutFile(name="disagg_config.yaml", text=yaml_text(tree, ["trtllm-serve disaggregated"]))


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
    """Servers, per-role YAML, and the disaggregated server with its config."""
    first = {s.role: s for s in reversed(ctx.slots)}
    configs = tuple(config_file(ctx, flags, slot) for _, slot in sorted(first.items()))
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.heads())
    if ctx.deployment.mode == "agg":
        return EngineBuild(
            servers=servers,
            configs=configs,
            notes=notes(ctx),
            endpoints=tuple((s.host, s.port) for s in ctx.heads()),
        )
    cfg = flags.get("router_config", "router").flag
    proxy = with_program(
        flags,
        "router_program",
        "router",
        ((cfg, ("disagg_config.yaml",)),),
        comment="disaggregated server",
    )
    return EngineBuild(
        servers=servers,
        configs=(*configs, disagg_file(ctx, flags)),
        router=proxy,
        endpoints=((LOCAL_HOST, ROUTER_PORT),),
        notes=notes(ctx),
    )
