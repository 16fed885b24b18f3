"""Checks of what a bundle must accept: the address it listens on, and that one request of the
longest prompt plus the longest answer fits the KV cache of one attention-DP rank."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from planner.emitters.plan_file import PlanFile
from planner.emitters.types import EmitContext, Slot
from planner.errors import PlannerInputError

_HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def check_host(host: str) -> str:
    """``host`` if it is an IP address or a host name (it reaches every launch line); "" stays
    "" (the default address)."""
    if not host:
        return ""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if _HOST_NAME.match(host) is None:
        raise PlannerInputError(
            "--host", f"{host[:80]!r} is not an IP address or a host name (letters, digits, . -)"
        )
    return host


WILDCARDS = ("0.0.0.0", "::")
"""Addresses that mean every interface of a host."""


def at_address(slots: tuple[Slot, ...], host: str) -> tuple[Slot, ...]:
    """``slots`` reached at ``--host``: on one host a specific address replaces the loopback in
    every URL (the router and the benchmark reach the servers there); across hosts each host has
    its own address, so only the all-interfaces address can be given."""
    if not host or host in WILDCARDS:
        return slots
    if any(s.node for s in slots):
        raise PlannerInputError(
            "--host",
            f"{host} cannot be every host's address: several hosts take part (node0, node1, ...); "
            "leave --host out or give 0.0.0.0",
        )
    return tuple(s.model_copy(update={"host": host}) for s in slots)


def _number(tree: object, key: str) -> float | None:
    value = tree.get(key) if isinstance(tree, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


def _rank_kv_tokens(memory: object) -> float | None:
    """Tokens of context one attention-DP rank holds, from a plan's ``predicted.memory`` entry
    (``planner.perf.memory_plan.MemoryPlan``: capacity of all ranks of the worker)."""
    total = _number(memory, "kv_capacity_tokens")
    parallel = memory.get("parallel") if isinstance(memory, Mapping) else None
    dp = _number(parallel, "dp") or 1.0
    return None if total is None else total / dp


def one_request_problem(
    memory_by_role: Mapping[str, object], max_isl: int, max_osl: int
) -> str | None:
    """Why a deployment cannot hold one request of ``max_isl`` + ``max_osl`` tokens (a prefill
    worker: ``max_isl``), or None; roles without a memory record are not checked."""
    for role, memory in sorted(memory_by_role.items()):
        need = max_isl if role == "prefill" else max_isl + max_osl
        held = _rank_kv_tokens(memory)
        if held is not None and held < need:
            what = "max ISL" if role == "prefill" else "max ISL + max OSL"
            return (
                f"the KV cache of one attention-DP rank of the {role} worker holds {held:,.0f} "
                f"tokens, less than one request of {what} = {need:,} tokens "
                f"(max ISL {max_isl:,}, max OSL {max_osl:,}); use GPUs with more memory, more "
                "tensor or pipeline parallelism, an fp8 KV cache, or shorter --max-isl/--max-osl"
            )
    return None


def check_fits_one_request(plan: PlanFile, ctx: EmitContext) -> None:
    """Refuse a plan whose predicted KV cache cannot hold one request of the workload's longest
    prompt and answer (plans without a memory prediction are not checked)."""
    memory = plan.best.predicted.get("memory")
    if not isinstance(memory, Mapping):
        return
    wl = ctx.workload
    max_isl, max_osl = wl.max_isl or wl.isl, wl.max_osl or wl.osl
    problem = one_request_problem(memory, max_isl, max_osl)
    if problem is not None:
        raise PlannerInputError("plan.best.deployment", problem)
