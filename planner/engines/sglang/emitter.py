"""SGLang: ``python -m sglang.launch_server`` arguments, PD disaggregation and its router."""

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
from planner.emitters.types import Command, EmitContext, EngineBuild, Slot

BASE_PORT = 30000  # SGLang's default server port
ROUTER_PORT = 8000  # the PD guide's router port
BOOTSTRAP_BASE = 8998  # --disaggregation-bootstrap-port default; one per prefill server on a host
DIST_INIT_PORT = 20000  # the multi-node guide's --dist-init-addr port on the head host


def bootstrap_port(slot: Slot) -> int:
    """A distinct bootstrap port for every prefill replica."""
    return BOOTSTRAP_BASE + slot.index


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Planner values in SGLang's terms: with DP attention ``--tp-size`` counts all tp*dp GPUs."""
    values = worker_values(ctx.deployment, slot.worker, ctx.quant.get(slot.role))
    values["tp"] = slot.worker.parallel.tp * slot.worker.parallel.dp
    if slot.role != "agg":
        values["disagg_mode"] = slot.role
        values["disagg_backend"] = "default"
    if slot.role == "prefill":
        values["disagg_bootstrap_port"] = bootstrap_port(slot)
    return values


def multi_node_values(slot: Slot) -> dict[str, object]:
    """Per-host values of a replica spanning hosts: the same line on every host with
    --nnodes, --node-rank and the head's --dist-init-addr (docs references/multi_node_deployment);
    --tp-size already counts the GPUs of all hosts."""
    if slot.nodes == 1:
        return {}
    return {
        "nnodes": slot.nodes,
        "node_rank": slot.node_rank,
        "dist_init_addr": f"{slot.head}:{DIST_INIT_PORT}",
    }


def server(ctx: EmitContext, flags: Flags, slot: Slot) -> Command:
    """One ``sglang.launch_server`` replica."""
    values = {
        "model_path": ctx.model_id,
        "host": bind_host(slot),
        "port": slot.port,
        **serve_values(ctx, slot),
        **multi_node_values(slot),
    }
    cmd = with_program(
        flags,
        "serve_program",
        "serve",
        render(flags, values).args,
        comment=replica_comment(slot),
    )
    return cmd.model_copy(update={"env": visible_devices(slot)})


def router(ctx: EmitContext, flags: Flags) -> Command:
    """``sglang_router.launch_router --pd-disaggregation`` over every prefill and decode URL."""

    def flag(param: str) -> str:
        return flags.get(param, "router").flag

    args: list[tuple[str, tuple[str, ...]]] = [(flag("router_pd"), ())]
    args += [
        (flag("router_prefill"), (s.url, str(bootstrap_port(s)))) for s in ctx.role_slots("prefill")
    ]
    args += [(flag("router_decode"), (s.url,)) for s in ctx.role_slots("decode")]
    args += [(flag("router_host"), (LOCAL_HOST,)), (flag("router_port"), (str(ROUTER_PORT),))]
    return with_program(flags, "router_program", "router", tuple(args), comment="PD router")


def build(ctx: EmitContext, flags: Flags) -> EngineBuild:
    """Servers, and the router for disaggregated deployments."""
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.slots)
    if ctx.deployment.mode == "agg":
        return EngineBuild(servers=servers, endpoints=tuple((s.host, s.port) for s in ctx.heads()))
    notes = (
        "The NIXL transfer backend needs `pip install nixl`; the router comes from "
        "`pip install sglang-router`.",
    )
    return EngineBuild(
        servers=servers,
        router=router(ctx, flags),
        endpoints=((LOCAL_HOST, ROUTER_PORT),),
        notes=notes,
    )
