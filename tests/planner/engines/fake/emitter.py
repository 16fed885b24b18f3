"""The fake engine's emitter: one ``fake-serve`` server per aggregated replica."""

from __future__ import annotations

from planner.emitters.common import (
    bind_host,
    render,
    replica_comment,
    visible_devices,
    with_program,
    worker_values,
)
from planner.emitters.flag_table import Flags
from planner.emitters.types import Command, EmitContext, EngineBuild, Slot
from planner.errors import PlannerInputError

BASE_PORT = 9000


def serve_values(ctx: EmitContext, slot: Slot) -> dict[str, object]:
    """The planner's values of one server."""
    return worker_values(ctx.deployment, slot.worker, ctx.quant.get(slot.role))


def server(ctx: EmitContext, flags: Flags, slot: Slot) -> Command:
    """One ``fake-serve`` replica."""
    values = {
        "model_path": ctx.model_id,
        "host": bind_host(slot),
        "port": slot.port,
        **serve_values(ctx, slot),
    }
    args = render(flags, values).args
    cmd = with_program(flags, "serve_program", "serve", args, comment=replica_comment(slot))
    return cmd.model_copy(update={"env": visible_devices(slot)})


def build(ctx: EmitContext, flags: Flags) -> EngineBuild:
    """The servers; the fake engine has no disaggregated serving."""
    if ctx.deployment.mode != "agg":
        raise PlannerInputError("plan.best.deployment.mode", "the fake engine serves agg only")
    servers = tuple((s, server(ctx, flags, s)) for s in ctx.slots)
    return EngineBuild(servers=servers, endpoints=tuple((s.host, s.port) for s in ctx.heads()))
