"""The flag table (each engine's ``flags.yaml``): typed rows, version parsing and look-up.

Every engine flag spelling the emitters write comes from this table, so checking the
table against the engines' documentation checks every emitted flag.

A file per engine (``planner/engines/<name>/flags.yaml``), the only place engine flag
spellings live.

Each row maps one engine-neutral planner parameter (`param`) for one tool
(`serve`: the engine server, `router`: the router in front of the replicas, `bench`: the load
generator) to the engine's spelling:
  kind: cli     -> `--flag VALUE` on the command line
        switch  -> bare `--flag` when the planner value is true
        yaml    -> dotted key in the engine's YAML config file
        program -> the words that start the tool (e.g. `python -m <engine>.benchmark`)
        env     -> an environment variable set for the tool's process
  since (inclusive) / until (exclusive): engine versions where this spelling is the one
        to emit. `since` is the earliest release we checked, not necessarily the first
        release that had the flag; an old spelling kept as a deprecated alias gets an
        `until` so we stop emitting it.
  doc: the page or argument definition the name was checked against.
  values: planner value -> engine value (missing planner value -> the flag is omitted).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hardware.input_files import read_packaged_yaml
from planner.engines import engine_names, get_engine
from planner.errors import PlannerInputError

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_VERSION_RE = re.compile(r"^v?(\d+(?:\.\d+)*)")

Tool = Literal["serve", "router", "bench"]
Kind = Literal["cli", "switch", "yaml", "program", "env"]
Version = tuple[int, ...]


class FlagRow(BaseModel):
    """One engine spelling of one planner parameter, valid for a version range."""

    model_config = _FROZEN
    param: str = Field(description="Engine-neutral planner parameter name.")
    tool: Tool = Field(
        description="serve: engine server; router: P/D router; bench: load generator."
    )
    kind: Kind = Field(
        description="cli flag with value, bare switch, YAML dotted key, program words, or an "
        "environment variable."
    )
    flag: str = Field(description="The engine's spelling.")
    since: str = Field(description="First engine version (inclusive) to emit this spelling.")
    until: str | None = Field(
        default=None, description="First version (exclusive) to stop emitting it."
    )
    doc: str = Field(description="Page or argument definition the spelling was checked against.")
    values: dict[str, str] = Field(
        default_factory=dict, description="Planner value -> engine value."
    )
    note: str = Field(default="", description="Free text about the flag.")

    def active(self, version: Version) -> bool:
        """True when ``since <= version < until``."""
        if version < parse_version(self.since):
            return False
        return self.until is None or version < parse_version(self.until)


class EngineTable(BaseModel):
    """All rows of one engine plus the versions the table covers."""

    model_config = _FROZEN
    default_version: str = Field(description="Engine version used when none is given.")
    min_version: str = Field(description="Oldest version covered (inclusive).")
    max_version: str = Field(description="Newest version covered; '0.33' covers every 0.33.x.")
    rows: tuple[FlagRow, ...] = Field(description="One row per (parameter, tool) flag.")


class FlagTable(BaseModel):
    """Every known engine's ``flags.yaml``."""

    model_config = _FROZEN
    engines: dict[str, EngineTable] = Field(description="Engine -> its flag table.")


def parse_version(text: str) -> Version:
    """``'v0.33.1rc2'`` -> ``(0, 33, 1)``; unparsable text is a PlannerInputError."""
    match = _VERSION_RE.match(text.strip())
    if match is None:
        raise PlannerInputError("engine_version", f"cannot parse version {text!r}")
    return tuple(int(p) for p in match.group(1).split("."))


def load_table() -> FlagTable:
    """Read and validate every known engine's ``flags.yaml`` (once per set of engines)."""
    return _table(engine_names())


@cache
def _table(names: tuple[str, ...]) -> FlagTable:
    files = {n: get_engine(n).file("flags.yaml") for n in names}
    return FlagTable.model_validate(
        {"engines": {n: read_packaged_yaml(f) for n, f in files.items()}}
    )


def engine_table(engine: str) -> EngineTable:
    """The table of ``engine`` or a PlannerInputError listing the engines."""
    table = load_table().engines
    if engine not in table:
        raise PlannerInputError(
            "backend", f"unknown engine {engine!r}; choose one of {sorted(table)}"
        )
    return table[engine]


def resolve_version(engine: str, version: str | None) -> Version:
    """The version to target: the table default, or ``version`` if the table covers it."""
    table = engine_table(engine)
    wanted = parse_version(version or table.default_version)
    low, high = parse_version(table.min_version), parse_version(table.max_version)
    if wanted < low or wanted[: len(high)] > high:
        raise PlannerInputError(
            "engine_version",
            f"{engine} {version} is outside the flag table "
            f"({table.min_version} .. {table.max_version}.x)",
        )
    return wanted


class Flags:
    """The rows of one engine that are active at one version."""

    def __init__(self, engine: str, version: str | None = None) -> None:
        self.engine = engine
        self.version = resolve_version(engine, version)
        self.version_text = ".".join(str(p) for p in self.version)
        rows = engine_table(engine).rows
        self.rows: tuple[FlagRow, ...] = tuple(r for r in rows if r.active(self.version))

    def find(self, param: str, tool: Tool = "serve") -> FlagRow | None:
        """The active row for ``param``, or None when the engine has no spelling for it."""
        hits = [r for r in self.rows if r.param == param and r.tool == tool]
        assert len(hits) <= 1, f"overlapping rows for {self.engine} {tool} {param}"
        return hits[0] if hits else None

    def get(self, param: str, tool: Tool = "serve") -> FlagRow:
        """The active row for ``param``; a missing row means the table does not cover it."""
        row = self.find(param, tool)
        if row is None:
            raise PlannerInputError(
                "engine_version",
                f"{self.engine} {self.version_text} has no {tool} flag for {param!r} in the flag "
                "table",
            )
        return row

    def words(self, param: str, tool: Tool) -> tuple[str, ...]:
        """The program words of a ``kind: program`` row."""
        return tuple(self.get(param, tool).flag.split())
