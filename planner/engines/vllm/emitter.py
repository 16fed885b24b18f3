"""vLLM: ``vllm serve`` command lines, ``--config`` YAML files, NixlConnector P/D and the
project's router (``vllm-router``)."""

from __future__ import annotations

import json

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
from planner.emitters.types import Command, EmitContext, EngineBuild, OutFile, Role, Slot
from planner.emitters.writer import yaml_text
from planner.errors import PlannerInputError

BASE_PORT = 8100  # the NixlConnector guide's prefiller port
ROUTER_PORT = 8192  # the NixlConnector guide's proxy port, kept for the router
NIXL_SIDE_CHANNEL_BASE = 5600  # VLLM_NIXL_SIDE_CHANNEL_PORT default; one per instance on a host
KV_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}
DP_RPC_PORT = 13345  # the data-parallel deployment guide's --data-parallel-rpc-port
MASTER_PORT = 29501  # torch.distributed rendezvous port of a multi-node TP/PP replica


def multi_node_values(slot: Slot) -> dict[str, object]:
    """Per-host values of a replica spanning ``slot.nodes`` hosts (none for one host).

    With attention DP every host runs ``dp / nodes`` whole DP ranks (the shape rule
    ``rank_per_host``): --data-parallel-size-local, --data-parallel-start-rank and the head's
    --data-parallel-address (docs serving/data_parallel_deployment). Without DP the TP/PP group
    spans the hosts: --nnodes, --node-rank, --master-addr (docs serving/parallelism_scaling).
    Hosts other than the head run --headless (no API server).
    """
    if slot.nodes == 1:
        return {}
    par = slot.worker.parallel
    values: dict[str, object]
    if par.dp > 1:
        local = par.dp // slot.nodes
        values = {
            "dp_local": local,
            "dp_start_rank": slot.node_rank * local,
            "dp_address": slot.head,
            "dp_rpc_port": DP_RPC_PORT,
        }
    else:
        values = {
            "executor": "mp",
            "nnodes": slot.nodes,
            "node_rank": slot.node_rank,
            "master_addr": slot.head,
            "master_port": MASTER_PORT,
        }
    values["headless"] = slot.node_rank > 0
    return values


def spec_values(ctx: EmitContext) -> dict[str, object]:
    """MTP as vLLM runs it: ``--speculative-config`` with method ``mtp`` (vllm/config/
    speculative.py, v0.33.0)."""
    if ctx.speculative is None:
        return {}
    spec = {
        "method": ctx.speculative.method,
        "num_speculative_tokens": ctx.speculative.draft_tokens,
    }
    return {"speculative": json.dumps(spec, separators=(",", ":"))}


def prefix_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Prefix caching and the host-memory tier as vLLM runs them: ``--enable-prefix-caching``,
    and ``--kv-offloading-size`` (GiB summed over the engine's ranks, ``per_rank.yaml``) with the
    native backend (its OffloadingConnector stores every computed block to CPU memory)."""
    if ctx.prefix_cache is None:
        return {}
    out: dict[str, object] = {"prefix_caching": True}
    host = host_tier_gib(ctx, slot, "vllm")
    if host > 0:
        if slot.role != "agg":
            raise PlannerInputError(
                "plan.prefix_cache.host_kv_gib_per_gpu",
                "vllm: the offloading connector and the P/D NixlConnector both take "
                "--kv-transfer-config; plan an aggregated deployment or --host-kv-gib 0",
            )
        par = slot.worker.parallel
        entry = per_rank_table("vllm").tier("kv_offload_size")
        out["kv_offload_size"] = tier_flag(entry, host, par.tp * par.pp)
        out["kv_offload_backend"] = "native"
    return out


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Planner values in vLLM's terms: DP ranks are the attention-DP ranks, each a data-parallel
    engine with its own scheduler (``per_rank.yaml``); EP is a switch."""
    values = server_values(ctx, slot, "vllm")
    values.pop("attention_dp", None)
    if "ep" in values:
        values["ep"] = True
    values |= spec_values(ctx)
    values |= prefix_values(ctx, slot)
    if slot.role != "agg":
        connector = {"kv_connector": "NixlConnector", "kv_role": KV_ROLES[slot.role]}
        values["kv_transfer"] = json.dumps(connector, separators=(",", ":"))
    return values


def config_file(ctx: EmitContext, flags: Flags, role: Role, slot: Slot) -> OutFile:
    """``vllm serve --config`` YAML for one role (long flag names as keys)."""
    body = {"model": ctx.model_id, **render(flags, serve_values(ctx, slot)).flat}
    name = "vllm-config.yaml" if role == "agg" else f"vllm-{role}.yaml"
    header = [f"vLLM {flags.version_text} {role} settings: vllm serve --config {name} --port PORT"]
    return OutFile(name=name, text=yaml_text(body, header))


def server(ctx: EmitContext, flags: Flags, slot: Slot) -> Command:
    """One ``vllm serve`` replica (one line per host of a multi-node replica)."""
    values = {"host": listen_address(ctx), "port": slot.port, **serve_values(ctx, slot)}
    multi = multi_node_values(slot)
    for param in [*multi, *spec_values(ctx), *prefix_values(ctx, slot)]:
        flags.get(param)  # an engine version without the spelling cannot launch this replica
    values |= multi
    env = visible_devices(slot)
    if slot.role != "agg":
        env += (
            ("VLLM_NIXL_SIDE_CHANNEL_PORT", str(NIXL_SIDE_CHANNEL_BASE + slot.port - BASE_PORT)),
        )
    cmd = with_program(
        flags,
        "serve_program",
        "serve",
        render(flags, values).args,
        positional=(ctx.model_id,),
        comment=replica_comment(slot),
    )
    return cmd.model_copy(update={"env": env})


def router(ctx: EmitContext, flags: Flags) -> Command:
    """``vllm-router``: round-robin over the aggregated replicas, or ``--vllm-pd-disaggregation``
    sending each request to a prefill replica, then a decode replica (NIXL pull)."""

    def flag(param: str) -> str:
        return flags.get(param, "router").flag

    args: list[tuple[str, tuple[str, ...]]] = []
    values: dict[str, object] = prefix_router_values(ctx)
    for param in values:
        flags.get(param, "router")  # a router without the spelling cannot route as planned
    if ctx.deployment.mode == "agg":
        args.append((flag("router_workers"), tuple(s.url for s in ctx.heads())))
    else:
        args.append((flag("router_pd"), ()))
        args += [(flag("router_prefill"), (s.url,)) for s in ctx.role_slots("prefill")]
        args += [(flag("router_decode"), (s.url,)) for s in ctx.role_slots("decode")]
        values["router_kv_connector"] = "default"
    values |= {"router_host": listen_address(ctx), "router_port": ROUTER_PORT}
    args += render(flags, values, "router").args
    what = (
        f"router ({str(values['router_policy']).replace('_', ' ')})"
        if ctx.deployment.mode == "agg"
        else "P/D router"
    )
    return with_program(flags, "router_program", "router", tuple(args), comment=what)


def build(ctx: EmitContext, flags: Flags) -> EngineBuild:
    """Servers, per-role config files, and the router in front of several replicas or a
    disaggregated deployment."""
    first = {s.role: s for s in reversed(ctx.slots)}
    configs = tuple(config_file(ctx, flags, role, slot) for role, slot in sorted(first.items()))
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.slots)
    if not needs_router(ctx):
        return EngineBuild(
            servers=servers, configs=configs, endpoints=tuple((s.host, s.port) for s in ctx.heads())
        )
    notes = ["The router comes from `pip install vllm-router` (vllm-project/router)."]
    if ctx.deployment.mode == "disagg":
        notes.append(
            "NixlConnector needs `pip install nixl`; set VLLM_NIXL_SIDE_CHANNEL_HOST when "
            "prefill and decode run on different hosts."
        )
    return EngineBuild(
        servers=servers,
        configs=configs,
        router=router(ctx, flags),
        endpoints=((router_host(ctx), ROUTER_PORT),),
        notes=tuple(notes),
    )
