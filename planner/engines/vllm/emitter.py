"""vLLM: ``vllm serve`` command lines, ``--config`` YAML files, NixlConnector P/D and its proxy."""

from __future__ import annotations

import json

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

BASE_PORT = 8100  # the NixlConnector guide's prefiller port
ROUTER_PORT = 8192  # the guide's toy proxy port
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


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """Planner values in vLLM's terms: DP ranks are the attention-DP ranks; EP is a switch."""
    values = worker_values(ctx.deployment, slot.worker, ctx.quant.get(slot.role))
    values.pop("attention_dp", None)
    if "ep" in values:
        values["ep"] = True
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
    values = {"host": bind_host(slot), "port": slot.port, **serve_values(ctx, slot)}
    multi = multi_node_values(slot)
    for param in multi:
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
    """The documented toy proxy that sends each request to a prefiller, then a decoder."""
    pre, dec = ctx.role_slots("prefill"), ctx.role_slots("decode")
    values: dict[str, object] = {
        "router_port": ROUTER_PORT,
        "router_prefill_hosts": tuple(s.host for s in pre),
        "router_prefill_ports": tuple(s.port for s in pre),
        "router_decode_hosts": tuple(s.host for s in dec),
        "router_decode_ports": tuple(s.port for s in dec),
    }
    return with_program(
        flags,
        "router_program",
        "router",
        render(flags, values, "router").args,
        comment="P/D proxy (run from a vLLM source checkout)",
    )


def build(ctx: EmitContext, flags: Flags) -> EngineBuild:
    """Servers, per-role config files, and the proxy for disaggregated deployments."""
    first = {s.role: s for s in reversed(ctx.slots)}
    configs = tuple(config_file(ctx, flags, role, slot) for role, slot in sorted(first.items()))
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.slots)
    if ctx.deployment.mode == "agg":
        return EngineBuild(
            servers=servers, configs=configs, endpoints=tuple((s.host, s.port) for s in ctx.heads())
        )
    notes = (
        "NixlConnector needs `pip install nixl`; set VLLM_NIXL_SIDE_CHANNEL_HOST when "
        "prefill and decode run on different hosts.",
    )
    return EngineBuild(
        servers=servers,
        configs=configs,
        router=router(ctx, flags),
        endpoints=((LOCAL_HOST, ROUTER_PORT),),
        notes=notes,
    )
