"""``planner gen-trace --agentic``: multi-turn agent sessions written as Mooncake JSON lines."""

from __future__ import annotations

import argparse
from typing import Any

from hardware.errors import PlannerInputError
from planner.cli.common import positive_float, positive_int
from planner.cli.output import print_json, render_kv

_AGENTIC_FLAGS: tuple[tuple[str, Any, str], ...] = (
    ("sessions", positive_int, "sessions generated"),
    ("session-rate", positive_float, "session starts per second, Poisson"),
    ("turns-mean", positive_float, "mean turns per session, geometric"),
    ("think-s", float, "mean seconds from one turn's arrival to the next, exponential"),
    ("system-tokens", int, "tokens of the system prompt and tool definitions shared by sessions"),
    ("system-prompts", positive_int, "distinct system prompts, one per session"),
    ("user-tokens", positive_float, "mean tokens of a user message, lognormal"),
    ("tool-tokens", positive_float, "mean tokens of a tool output, lognormal"),
    ("tool-share", float, "share of later turns that add a tool output (the rest: a user message)"),
    ("length-cv", float, "CV of message, tool-output and answer lengths"),
    ("max-context-tokens", positive_int, "a session ends before its context would exceed this"),
)
"""Flags of ``--agentic`` (AgenticSpec fields); ``--osl-mean`` and ``--seed`` are shared."""
_CYCLE_ONLY = (
    "hours",
    "peak_rate",
    "daily_ratio",
    "bursts_per_day",
    "burst_minutes",
    "burst_factor",
    "arrival_cv",
    "isl_mean",
    "isl_cv",
    "osl_cv",
    "length_daily_swing",
)
"""gen-trace flags of the daily-cycle generator that --agentic does not take."""


def add_agentic_args(g: argparse.ArgumentParser) -> None:
    """The ``--agentic`` flags of ``planner gen-trace`` (defaults: AgenticSpec's)."""
    from planner.workload.trace_gen import AgenticSpec

    g.add_argument(
        "--agentic",
        action="store_true",
        help="write multi-turn agent sessions as Mooncake JSON lines (timestamp ms, "
        "input_length, output_length, hash_ids of 512-token blocks, session) instead of a CSV; "
        "--osl-mean sets the mean answer",
    )
    for name, kind, text in _AGENTIC_FLAGS:
        default = AgenticSpec.model_fields[name.replace("-", "_")].default
        g.add_argument(
            f"--{name}", type=kind, default=None, help=f"with --agentic: {text} (default {default})"
        )


def cmd_gen_agentic(args: argparse.Namespace) -> int:
    """Generate, check the output path, write whole, report."""
    from pydantic import ValidationError

    from planner.workload.mooncake import to_jsonl
    from planner.workload.trace_gen import AgenticSpec, generate_agentic
    from planner.workload.traces import check_out, write_bytes

    for k in _CYCLE_ONLY:
        if getattr(args, k, None) is not None:
            raise PlannerInputError(f"--{k.replace('_', '-')}", "not used with --agentic")
    given = {n.replace("-", "_"): getattr(args, n.replace("-", "_")) for n, _, _ in _AGENTIC_FLAGS}
    given["osl_mean"] = args.osl_mean
    try:
        spec = AgenticSpec(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        flag = "--" + str(err["loc"][0]).replace("_", "-")
        raise PlannerInputError(flag, str(err["msg"])) from None
    check_out(args.out, args.force)
    try:
        trace = generate_agentic(spec)
    except ValueError as exc:
        raise PlannerInputError("--max-context-tokens", str(exc)) from None
    assert trace.blocks is not None
    write_bytes(
        args.out,
        to_jsonl(trace.arrival_s, trace.isl, trace.osl, trace.blocks, trace.session),
        force=args.force,
    )
    info = {
        "out": str(args.out),
        "requests": len(trace),
        "sessions": spec.sessions,
        "duration_h": trace.duration_s / 3600.0,
        "isl_mean_tokens": float(trace.isl.mean()),
        "osl_mean_tokens": float(trace.osl.mean()),
        "spec": spec.model_dump(),
    }
    if args.format == "json":
        print_json(info)
    else:
        print(
            render_kv(
                {
                    "wrote": info["out"],
                    "requests": info["requests"],
                    "sessions": info["sessions"],
                    "hours": info["duration_h"],
                    "mean prompt (tokens)": info["isl_mean_tokens"],
                    "mean answer (tokens)": info["osl_mean_tokens"],
                }
            )
        )
    return 0
