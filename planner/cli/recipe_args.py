"""Flags shared by the commands whose answer becomes a deployment: the longest prompt and answer
it must accept (``estimate``, ``plan``, ``capacity``) and the address its servers listen on
(``emit``, ``plan --out``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from planner.cli.common import token_count
from planner.errors import PlannerInputError

if TYPE_CHECKING:
    from planner.perf.estimate import Estimate
    from planner.workload.traces import Trace


def add_max_lengths(
    p: argparse.ArgumentParser, default: str, described: tuple[str, str] | None = None
) -> None:
    """``--max-isl`` / ``--max-osl``: the longest prompt and answer the deployment must accept
    (``described``: the request fields' descriptions, where the flags set one)."""
    isl, osl = described or (
        "longest prompt the deployment must accept",
        "longest answer the deployment must accept",
    )
    for flag, text in (("--max-isl", isl), ("--max-osl", osl)):
        p.add_argument(
            flag,
            type=token_count,
            default=None,
            metavar="TOKENS",
            help=f"{text} (default on the command line: {default})",
        )


def add_listen_host(p: argparse.ArgumentParser) -> None:
    """``--host``: the address the emitted servers and router listen on."""
    p.add_argument(
        "--host",
        default="",
        metavar="ADDR",
        help="address the emitted servers and router listen on (default: 127.0.0.1 for a "
        "single-host bundle, 0.0.0.0 when several hosts take part)",
    )


def trace_within(
    trace: Trace, limit: int, max_isl: int | None, max_osl: int | None, model: str
) -> tuple[Trace, int, int, int]:
    """The trace without requests longer than the model's ``limit`` positions (prompt plus
    answer), how many were left out, and the longest prompt and answer the deployment must accept:
    ``--max-isl`` / ``--max-osl`` where given (refused above ``limit``), else the kept trace's
    longest."""
    for flag, given in (("--max-isl", max_isl), ("--max-osl", max_osl)):
        if given is not None and given > limit:
            raise PlannerInputError(
                flag, f"{given:,} tokens is above {model}'s maximum positions ({limit:,} tokens)"
            )
    keep = (trace.isl + trace.osl) <= limit
    if not keep.any():
        raise PlannerInputError(
            "--trace", f"every request is longer than {model}'s maximum positions ({limit:,})"
        )
    kept = trace.take(keep)
    dropped = int((~keep).sum())
    return kept, dropped, max_isl or int(kept.isl.max()), max_osl or int(kept.osl.max())


def check_one_request(predicted: Mapping[str, Any], workload: Mapping[str, Any]) -> None:
    """Refuse a deployment whose KV cache cannot hold one request of the longest prompt and
    answer (``workload`` ``max_isl``/``max_osl``; ``predicted`` holds ``memory`` per role, as a
    plan's ``predicted`` does)."""
    from planner.emitters.context import one_request_problem

    memory = predicted.get("memory")
    problem = one_request_problem(
        memory if isinstance(memory, Mapping) else {},
        int(workload["max_isl"]),
        int(workload["max_osl"]),
    )
    if problem is not None:
        raise PlannerInputError("--max-isl/--max-osl", problem)


def estimate_memory(est: Estimate) -> dict[str, Any]:
    """An estimate's memory plans in a plan's ``predicted`` shape (``{"memory": {role: ...}}``)."""
    memory = {("decode" if est.mode == "disagg" else "agg"): est.memory.model_dump(mode="json")}
    if est.prefill_memory is not None:
        memory["prefill"] = est.prefill_memory.model_dump(mode="json")
    return {"memory": memory}
