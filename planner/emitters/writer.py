"""The one writer: commands to argv / shell text, nested mappings to YAML text."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping

import yaml

from planner.emitters.types import Command

_INDENT = "    "


def comment(text: str) -> str:
    """A ``#`` comment line whose text cannot end the comment: control characters (a newline
    would start a command) are written as escapes, so the line stays one comment."""
    safe = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return f"# {safe}"


def argv(cmd: Command) -> list[str]:
    """The exact argument vector (environment excluded)."""
    words = [*cmd.program, *cmd.positional]
    for flag, values in cmd.args:
        words += [flag, *values]
    return words


def shell_line(cmd: Command, background: bool = False) -> str:
    """A paste-ready shell command, one flag per continued line."""
    head = [f"{k}={shlex.quote(v)}" for k, v in cmd.env]
    head += [shlex.quote(w) for w in (*cmd.launcher, *cmd.program, *cmd.positional)]
    lines = [" ".join(head)]
    lines += [_INDENT + " ".join(shlex.quote(w) for w in (flag, *vals)) for flag, vals in cmd.args]
    text = " \\\n".join(lines) + (" &" if background else "")
    return (comment(cmd.comment) + "\n" if cmd.comment else "") + text


def yaml_text(data: Mapping[str, object], header: Iterable[str] = ()) -> str:
    """Block-style YAML in insertion order, with ``#`` header lines."""
    body = yaml.safe_dump(dict(data), sort_keys=False, default_flow_style=False)
    return "".join(comment(line) + "\n" for line in header) + body


def set_dotted(target: dict[str, object], dotted: str, value: object) -> None:
    """``set_dotted(d, 'a.b', 1)`` sets ``d['a']['b'] = 1``, creating levels."""
    *parents, leaf = dotted.split(".")
    node = target
    for key in parents:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ValueError(f"{dotted}: {key} already holds a value, not a mapping")
        node = child
    node[leaf] = value


def script(title: str, blocks: Iterable[str]) -> str:
    """A bash script: shebang, strict mode, a title comment and blank-line separated blocks."""
    head = f"#!/usr/bin/env bash\n{comment(title)}\nset -euo pipefail\n"
    return head + "\n" + "\n\n".join(blocks) + "\n"
