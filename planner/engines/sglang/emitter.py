"""SGLang: ``python -m sglang.launch_server`` arguments, PD disaggregation and its router."""

from __future__ import annotations

from planner.emitters.common import (
    host_tier_gib,
    listen_address,
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
from planner.emitters.types import Command, EmitContext, EngineBuild, Slot

BASE_PORT = 30000  # SGLang's default server port
ROUTER_PORT = 8000  # the PD guide's router port
BOOTSTRAP_BASE = 8998  # --disaggregation-bootstrap-port default; one per prefill server on a host
DIST_INIT_PORT = 20000  # the multi-node guide's --dist-init-addr port on the head host


def bootstrap_port(slot: Slot) -> int:
    """A distinct bootstrap port for every prefill replica."""
    return BOOTSTRAP_BASE + slot.index


def spec_values(ctx: EmitContext) -> dict[str, object]:
    """MTP as SGLang runs it: the EAGLE algorithm over the model's MTP head, one candidate per
    step, ``k`` steps and ``k + 1`` tokens verified (docs basic_usage/deepseek, MTP)."""
    if ctx.speculative is None:
        return {}
    k = ctx.speculative.draft_tokens
    return {
        "spec_algorithm": ctx.speculative.method,
        "spec_steps": k,
        "spec_topk": 1,
        "spec_verify_tokens": k + 1,
    }


def prefix_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Prefix caching and the host-memory tier as SGLang runs them: the radix cache (on by
    default) with LRU eviction, and HiCache with a host pool of ``--hicache-size`` GB per rank
    (``per_rank.yaml``) written through (every computed block copied to host memory)."""
    if ctx.prefix_cache is None:
        return {}
    out: dict[str, object] = {"radix_eviction": "lru"}
    host = host_tier_gib(ctx, slot, "sglang")
    if host > 0:
        entry = per_rank_table("sglang").tier("hicache_size")
        out |= {
            "hicache": True,
            "hicache_size": max(int(tier_flag(entry, host, 1)), 1),
            "hicache_write": "write_through",
        }
    return out


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Planner values in SGLang's terms: with DP attention ``--tp-size`` counts all tp*dp GPUs,
    and the running requests and chunk count every rank (``per_rank.yaml``)."""
    values = server_values(ctx, slot, "sglang")
    values["tp"] = slot.worker.parallel.tp * slot.worker.parallel.dp
    if "moe_a2a" in values:
        values["deepep_mode"] = values["moe_a2a"]
    values |= spec_values(ctx)
    values |= prefix_values(ctx, slot)
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
        "host": listen_address(ctx),
        "port": slot.port,
        **serve_values(ctx, slot),
        **multi_node_values(slot),
    }
    if ctx.speculative is not None:
        for param in spec_values(ctx):
            flags.get(param)  # a version without the spelling cannot run the planned MTP
    for param in prefix_values(ctx, slot):
        flags.get(param)  # nor without these the planned prefix cache
    cmd = with_program(
        flags,
        "serve_program",
        "serve",
        render(flags, values).args,
        comment=replica_comment(slot),
    )
    return cmd.model_copy(update={"env": visible_devices(slot)})


def router(ctx: EmitContext, flags: Flags) -> Command:
    """``sglang_router.launch_router``: round-robin over the aggregated replicas, or
    ``--pd-disaggregation`` over every prefill and decode URL."""

    def flag(param: str) -> str:
        return flags.get(param, "router").flag

    args: list[tuple[str, tuple[str, ...]]] = []
    if ctx.deployment.mode == "agg":
        args.append((flag("router_workers"), tuple(s.url for s in ctx.heads())))
    else:
        args.append((flag("router_pd"), ()))
        args += [
            (flag("router_prefill"), (s.url, str(bootstrap_port(s))))
            for s in ctx.role_slots("prefill")
        ]
        args += [(flag("router_decode"), (s.url,)) for s in ctx.role_slots("decode")]
    routing = prefix_router_values(ctx)
    for param in routing:
        flags.get(param, "router")  # a router without the spelling cannot route as planned
    policy = render(flags, routing, "router").args
    args += [*policy, (flag("router_host"), (listen_address(ctx),))]
    args.append((flag("router_port"), (str(ROUTER_PORT),)))
    what = (
        f"router ({str(routing['router_policy']).replace('_', ' ')})"
        if ctx.deployment.mode == "agg"
        else "PD router"
    )
    return with_program(flags, "router_program", "router", tuple(args), comment=what)


def build(ctx: EmitContext, flags: Flags) -> EngineBuild:
    """Servers, and the router in front of several replicas or a disaggregated deployment."""
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.slots)
    if not needs_router(ctx):
        return EngineBuild(servers=servers, endpoints=tuple((s.host, s.port) for s in ctx.heads()))
    notes = ["The router comes from `pip install sglang-router` (sgl-model-gateway)."]
    if ctx.deployment.mode == "disagg":
        notes.append("The NIXL transfer backend needs `pip install nixl`.")
    return EngineBuild(
        servers=servers,
        router=router(ctx, flags),
        endpoints=((router_host(ctx), ROUTER_PORT),),
        notes=tuple(notes),
    )
