"""Arguments shared by several commands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from hardware.catalog import get_gpu
from hardware.spec import GpuSpec
from planner.model.bundled import load_model
from planner.model.spec import ModelSpec

EXIT_OK = 0
EXIT_BAD_INPUT = 2
"""Bad input or an infeasible request: one line on stderr naming the flag or file:line: field."""
EXIT_SATURATED = 3
"""``estimate``: the offered load exceeds the deployment's capacity (the answer says how much)."""


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer in ``[lo, hi]`` (argparse prefixes the flag to the message)."""

    def parse(text: str) -> int:
        try:
            val = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer in [{lo:,}, {hi:,}], got '{text[:40]}'"
            ) from None
        if not lo <= val <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo:,}, {hi:,}], got {val:,}")
        return val

    parse.__name__ = "integer"
    return parse


def float_in(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """argparse type: a finite number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    allowed = f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]"

    def parse(text: str) -> float:
        try:
            val = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {allowed}, got '{text[:40]}'") from None
        low_ok = val > lo if lo_open else val >= lo
        if not (math.isfinite(val) and low_ok and val <= hi):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {val:g}")
        return val

    parse.__name__ = "number"
    return parse


# Ranges of the numbers the CLI accepts (README, "Bad input"); each message names the flag.
MAX_GPUS = 100_000
"""GPU budgets, worker and replica counts, DP and EP sizes."""
MAX_SHARD = 1_024
"""TP and PP sizes (and GPUs per node)."""
MAX_TOKENS = 10_000_000
"""Prompt and output lengths, tokens per step."""
MAX_CLIENTS = 10_000_000
"""Concurrent clients, requests in a benchmark run, sequences per worker."""
MAX_RATE = 1e9
"""Requests/s (anything above capacity is answered as saturated)."""
MAX_MS = 1e9
"""SLO limits, ms."""
positive_int = int_in(1, 1_000_000_000)
positive_float = float_in(0, 1e15, lo_open=True)
gpu_count = int_in(1, MAX_GPUS)
shard_size = int_in(1, MAX_SHARD)
token_count = int_in(1, MAX_TOKENS)
chunk_tokens = int_in(16, MAX_TOKENS)
client_count = int_in(1, MAX_CLIENTS)
request_rate = float_in(0, MAX_RATE, lo_open=True)
slo_ms = float_in(0, MAX_MS, lo_open=True)
fraction = float_in(0, 1)
memory_fraction = float_in(0, 1, lo_open=True)


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")


def add_hardware_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hardware-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="extra folder of GPU YAML specs (may repeat)",
    )


def add_model_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    """``--model`` and ``--model-id`` (the identity of the weights of a local config.json)."""
    p.add_argument(
        "--model",
        required=required,
        help="bundled checkpoint (name or HF id, see `planner models`) or a path to a "
        "config.json (ModelOpt's hf_quant_config.json next to it is read too)",
    )
    p.add_argument(
        "--model-id",
        default=None,
        metavar="HF_ID_OR_PATH",
        help="for a local config.json: the HF id or local path of its weights, used "
        "in emitted configs (without it a plan cannot be emitted)",
    )


def add_model_gpu(p: argparse.ArgumentParser) -> None:
    add_model_arg(p)
    p.add_argument("--gpu", required=True, help="GPU name or alias (see `planner gpus`)")
    add_hardware_dir(p)


def model_of(args: argparse.Namespace) -> ModelSpec:
    """The model named by ``--model`` / ``--model-id``."""
    return load_model(args.model, getattr(args, "model_id", None) or "")


def resolve_model_gpu(args: argparse.Namespace) -> tuple[ModelSpec, GpuSpec]:
    return model_of(args), get_gpu(args.gpu, args.hardware_dir)


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` that states every flag's default: ``(default: X)`` after the help text unless the
    text names its default already; flags without one (required, off switches, optional values
    the answer derives) say nothing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        d = action.default
        quiet = d is None or d is False or d == [] or d == () or d == argparse.SUPPRESS
        if quiet or action.required or "default" in text or not action.option_strings:
            return text
        shown = ",".join(map(str, d)) if isinstance(d, list | tuple) else str(d)
        shown = shown or "none"  # an empty string: the flag is off unless given
        return f"{text} (default: {shown.replace('%', '%%')})"
