"""``planner`` command line: parses arguments; exit code 0 (answer), 2 (bad input or infeasible),
3 (saturated)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from pydantic import ValidationError

from planner.cli import (
    cmd_calibrate_e2e,
    cmd_capacity,
    cmd_catalog,
    cmd_emit,
    cmd_estimate,
    cmd_kernels,
    cmd_memory,
    cmd_plan,
    cmd_power,
    cmd_report,
    cmd_sweep,
    cmd_ui,
    cmd_validate_data,
)
from planner.cli.common import EXIT_BAD_INPUT, DefaultsHelpFormatter
from planner.errors import PlannerInputError

# Each command module defines ``register(sub, groups)``; ``groups`` holds the nested sub-parsers
# of commands with verbs (``planner validate kernels``, ``planner calibrate fit``...).
COMMAND_MODULES: tuple[ModuleType, ...] = (
    cmd_catalog,
    cmd_memory,
    cmd_kernels,
    cmd_estimate,
    cmd_plan,
    cmd_emit,
    cmd_report,
    cmd_ui,
    cmd_validate_data,
    cmd_sweep,
    cmd_capacity,
    cmd_calibrate_e2e,
    cmd_power,
)
GROUPS: dict[str, str] = {
    "validate": "compare predictions with measurements",
    "calibrate": "measure kernel tables and fit efficiency parameters",
    "kernels": "manage kernel latency tables",
}


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2, and states every flag's
    default in ``--help``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="planner", description="LLM serving capacity planner")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    groups = {}
    for name, help_text in GROUPS.items():
        gp = sub.add_parser(name, help=help_text)
        groups[name] = gp.add_subparsers(
            dest=f"{name}_verb", required=True, parser_class=OneLineParser
        )
    for module in COMMAND_MODULES:
        module.register(sub, groups)
    return parser


def _validation_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    raised = err.get("ctx", {}).get("error")
    if isinstance(
        raised, PlannerInputError
    ):  # a model validator's own message names the flag already
        return str(raised)
    return f"{_flag_of(err['loc']) or exc.title}: {err['msg']}"


FLAG_OF_FIELD = {
    "rate_per_s": "--rate",
    "gpus": "--gpu",
    "hardware_dirs": "--hardware-dir",
    "weight_quants": "--weight-quant",
}
"""Request fields whose flag is not the field name with dashes."""


def _flag_of(loc: tuple[int | str, ...]) -> str:
    """The flag a request field came from (``isl.mean`` -> ``--isl``, ``rate_per_s`` -> ``--rate``):
    requests built from flags name the flag, never pydantic's internal path."""
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return ""
    field = names[0] if names[0] in ("isl", "osl") else names[-1]
    return FLAG_OF_FIELD.get(field, "--" + field.replace("_", "-"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) and usage errors (2) return their code to the caller
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        rc = args.func(args)
    except PlannerInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    except ValidationError as exc:
        sys.stderr.write(f"error: {_validation_line(exc)}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as exc:  # an output that cannot be written (not a folder, no permission, full)
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"error: {where}{exc.strerror or exc}\n")
        return EXIT_BAD_INPUT
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())
