"""Arguments shared by several commands."""

from __future__ import annotations

import argparse

from hardware.catalog import get_gpu
from hardware.spec import GpuSpec
from planner.model_spec import ModelSpec
from planner.models import load_model


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        val = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if val <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {val}")
    return val


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        val = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'") from None
    if not val > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {val}")
    return val


def add_format(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("table", "json"), default="table", help="output format")


def add_hardware_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hardware-dir", action="append", default=[], metavar="DIR",
                   help="extra folder of GPU YAML specs (may repeat)")


def add_model_arg(p: argparse.ArgumentParser) -> None:
    """``--model`` and ``--model-id`` (the identity of the weights of a local config.json)."""
    p.add_argument("--model", required=True,
                   help="bundled checkpoint (name or HF id, see `planner models`) or a path to a "
                   "config.json (ModelOpt's hf_quant_config.json next to it is read too)")
    p.add_argument("--model-id", default=None, metavar="HF_ID_OR_PATH",
                   help="for a local config.json: the HF id or local path of its weights, used "
                   "in emitted configs (without it a plan cannot be emitted)")


def add_model_gpu(p: argparse.ArgumentParser) -> None:
    add_model_arg(p)
    p.add_argument("--gpu", required=True, help="GPU name or alias (see `planner gpus`)")
    add_hardware_dir(p)


def model_of(args: argparse.Namespace) -> ModelSpec:
    """The model named by ``--model`` / ``--model-id``."""
    return load_model(args.model, getattr(args, "model_id", None) or "")


def resolve_model_gpu(args: argparse.Namespace) -> tuple[ModelSpec, GpuSpec]:
    return model_of(args), get_gpu(args.gpu, args.hardware_dir)
