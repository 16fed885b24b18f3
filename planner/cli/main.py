"""``planner`` command line: parses arguments, turns input errors into one line and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from pydantic import ValidationError

from planner.cli import (
    cmd_calibrate_e2e,
    cmd_catalog,
    cmd_emit,
    cmd_estimate,
    cmd_kernels,
    cmd_memory,
    cmd_plan,
    cmd_report,
    cmd_ui,
)
from planner.errors import PlannerInputError

EXIT_BAD_INPUT = 2

# Each command module defines ``register(sub, groups)``; ``groups`` holds the nested sub-parsers
# of commands with verbs (``planner validate kernels``, ``planner calibrate fit``...).
COMMAND_MODULES: tuple[ModuleType, ...] = (
    cmd_catalog, cmd_memory, cmd_kernels, cmd_estimate, cmd_plan, cmd_emit, cmd_report, cmd_ui,
    cmd_calibrate_e2e,
)
GROUPS: dict[str, str] = {
    "validate": "compare predictions with measurements",
    "calibrate": "measure kernel tables and fit efficiency parameters",
    "kernels": "manage kernel latency tables",
}


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="planner", description="LLM serving capacity planner")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    groups = {}
    for name, help_text in GROUPS.items():
        gp = sub.add_parser(name, help=help_text)
        groups[name] = gp.add_subparsers(dest=f"{name}_verb", required=True, parser_class=OneLineParser)
    for module in COMMAND_MODULES:
        module.register(sub, groups)
    return parser


def _validation_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    raised = err.get("ctx", {}).get("error")
    if isinstance(raised, PlannerInputError):  # a model validator's own message names the flag already
        return str(raised)
    loc = ".".join(str(p) for p in err["loc"]) or exc.title
    return f"{loc}: {err['msg']}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())
