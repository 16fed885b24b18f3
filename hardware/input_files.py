"""The input boundary: every file the tool reads goes through this module.

A file is read only when it is a regular file (FIFOs, devices and symlinks to them are refused
before anything blocks on them), no larger than the cap of its kind, and UTF-8 text. JSON and YAML
are decoded with finite numbers only (no ``Infinity``/``NaN``/``.inf``, no float that overflows,
no integer longer than ``MAX_INT_DIGITS`` digits), nesting at most ``MAX_NESTING`` levels, and YAML
without duplicate keys or aliases (an alias can multiply a small file into a huge document). Every
problem is a :class:`PlannerInputError` naming the file (and the line where one is known).

Numbers taken from a file or a flag go through :func:`check_number`, whose message names the field
and the allowed range.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
from collections.abc import Hashable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, NoReturn, overload

import yaml

from hardware.errors import PlannerInputError

if TYPE_CHECKING:
    import pandas as pd

MIB: Final[int] = 1024 * 1024
SIZE_CAPS: Final[dict[str, int]] = {
    "config.json": 4 * MIB,
    "GPU YAML": 4 * MIB,
    "calibration YAML": 4 * MIB,
    "plan.json": 16 * MIB,
    "fleet YAML": 16 * MIB,
    "sweep YAML": 16 * MIB,
    "trace CSV": 1024 * MIB,
    "measurement CSV": 1024 * MIB,
    "kernel CSV": 1024 * MIB,
    "results archive": 256 * MIB,
}
"""Largest file accepted per kind, bytes (stated in the README)."""
MAX_NESTING: Final[int] = 64
"""Deepest nesting of lists/objects accepted in JSON or YAML (real configs use fewer than 10)."""
MAX_INT_DIGITS: Final[int] = 24
"""Longest integer literal accepted (10^24 exceeds any count or byte size a config holds)."""


def _cap_text(n: int) -> str:
    return f"{n // MIB} MB" if n >= MIB else f"{n} bytes"


def _open_regular(path: Path, kind: str, field: str) -> tuple[int, int]:
    """An fd open on ``path`` (a regular file within the cap) and its size in bytes."""
    try:
        st = os.stat(path)  # follows symlinks: a link to /dev/zero or a FIFO is judged by it
    except OSError as exc:
        raise PlannerInputError(field, f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        what = (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "not a regular file (FIFO, device or socket)"
        )
        raise PlannerInputError(field, f"{path} is {what}; expected a {kind} file")
    cap = SIZE_CAPS[kind]
    if st.st_size > cap:
        raise PlannerInputError(
            field, f"{path} is {st.st_size:,} bytes; a {kind} file may be at most {_cap_text(cap)}"
        )
    try:
        # O_NONBLOCK: should the file have been swapped for a FIFO since the stat, open returns.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise PlannerInputError(field, f"cannot read {path}: {exc.strerror or exc}") from None
    fst = os.fstat(fd)
    if not stat.S_ISREG(fst.st_mode) or fst.st_size > cap:
        os.close(fd)
        raise PlannerInputError(field, f"{path} changed while being opened; expected a {kind} file")
    return fd, fst.st_size


def checked_file(path: str | Path, kind: str, field: str) -> Path:
    """``path`` as a Path once it is known to be a regular ``kind`` file within its size cap."""
    fd, _ = _open_regular(Path(path), kind, field)
    os.close(fd)
    return Path(path)


def read_bytes(path: str | Path, kind: str, field: str) -> bytes:
    """The bytes of a regular ``kind`` file (at most its cap)."""
    fd, _ = _open_regular(Path(path), kind, field)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(SIZE_CAPS[kind] + 1)
    if len(data) > SIZE_CAPS[kind]:
        cap = _cap_text(SIZE_CAPS[kind])
        raise PlannerInputError(field, f"{path}: a {kind} file may be at most {cap}")
    return data


def decode_utf8(data: bytes, where: str) -> str:
    """``data`` as text; a byte that is not UTF-8 is an error naming its line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PlannerInputError(where, f"line {line}: not UTF-8 text (byte {exc.start})") from None


def read_text(path: str | Path, kind: str, field: str) -> str:
    """A regular ``kind`` file decoded as UTF-8."""
    return decode_utf8(read_bytes(path, kind, field), f"{field}: {path}" if field else str(path))


def line_of(text: str, token: str) -> int:
    """1-based line of the first ``token`` in ``text`` (1 when absent)."""
    pos = text.find(token)
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 1


def key_line(text: str, key: str) -> int:
    """1-based line where mapping key ``key`` first appears in YAML or JSON ``text`` (1: absent)."""
    match = re.search(rf"^[ \t{{,\-]*[\"']?{re.escape(key)}[\"']?\s*:", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 1


class _JsonNumberError(ValueError):
    def __init__(self, token: str, why: str) -> None:
        self.token = token
        super().__init__(why)


def _json_constant(token: str) -> NoReturn:
    raise _JsonNumberError(token, f"{token} is not a finite number")


def _json_float(token: str) -> float:
    val = float(token)
    if not math.isfinite(val):
        raise _JsonNumberError(token, f"{token[:40]} overflows a float")
    return val


def _json_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_INT_DIGITS:
        raise _JsonNumberError(
            token,
            f"an integer of {len(token.lstrip('-'))} digits is too large "
            f"(at most {MAX_INT_DIGITS} digits)",
        )
    return int(token)


def parse_json(text: str, where: str) -> object:
    """Decode JSON with finite numbers and bounded nesting; errors name ``where`` and the line."""
    try:
        data = json.loads(
            text, parse_constant=_json_constant, parse_float=_json_float, parse_int=_json_int
        )
    except _JsonNumberError as exc:
        raise PlannerInputError(where, f"line {line_of(text, exc.token)}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise PlannerInputError(where, f"line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise PlannerInputError(where, f"nested more than {MAX_NESTING} levels deep") from None
    check_nesting(data, where)
    return data


def read_json(path: str | Path, kind: str, field: str) -> object:
    """A regular ``kind`` JSON file decoded by :func:`parse_json`."""
    where = f"{field}: {path}" if field else str(path)
    return parse_json(decode_utf8(read_bytes(path, kind, field), where), where)


def check_nesting(data: object, where: str) -> None:
    """Refuse lists/mappings nested deeper than ``MAX_NESTING`` (iterative: no recursion limit)."""
    stack: list[tuple[object, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise PlannerInputError(where, f"nested more than {MAX_NESTING} levels deep")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


if TYPE_CHECKING:
    _LoaderBase = yaml.SafeLoader
else:  # the C loader when PyYAML was built with libyaml (same interface, faster)
    _LoaderBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_LoaderBase):
    """Safe YAML loader: no duplicate keys, finite floats, integers of sane size."""

    def construct_mapping(
        self, node: yaml.MappingNode, deep: bool = False
    ) -> dict[Hashable, object]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key_node.value}'", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        val = float(super().construct_yaml_float(node))
        if not math.isfinite(val):
            raise yaml.constructor.ConstructorError(
                None, None, f"'{node.value}' is not a finite number", node.start_mark
            )
        return val

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(str(node.value).lstrip("+-")) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of more than {MAX_INT_DIGITS} digits is too large",
                node.start_mark,
            )
        return int(super().construct_yaml_int(node))


class _NoAliasLoader(_StrictLoader):
    """:class:`_StrictLoader` that also refuses aliases (used when the text holds a ``*``)."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> object:
        if node in self.constructed_objects or node in self.recursive_objects:
            raise yaml.constructor.ConstructorError(
                None, None, "anchors and aliases (*name) are not accepted", node.start_mark
            )
        return super().construct_object(node, deep=deep)


_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: what is wrong and on which line (PyYAML's own text spans several lines)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = f" at line {mark.line + 1}" if mark is not None else ""
        return f"invalid YAML{line}: {exc.problem or exc.context}"
    return f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"


def parse_yaml(text: str, where: str) -> object:
    """Decode YAML text strictly (see the module docstring); errors name ``where`` and the line."""
    try:
        # An alias needs a '*'; only then pay for the loader that checks every node.
        loader = _NoAliasLoader if "*" in text else _StrictLoader
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise PlannerInputError(where, yaml_problem(exc)) from None
    except RecursionError:
        raise PlannerInputError(where, f"nested more than {MAX_NESTING} levels deep") from None
    check_nesting(data, where)
    return data


def read_packaged_yaml(path: Path) -> object:
    """A YAML data file shipped with the package, decoded as strictly as ``parse_yaml`` (duplicate
    keys and non-finite numbers refused) except that aliases are allowed: the files are ours, and
    some share blocks by anchor. Errors name the file and the line."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)  # noqa: S506
    except yaml.YAMLError as exc:
        raise PlannerInputError(str(path), yaml_problem(exc)) from None


def read_yaml(path: str | Path, kind: str, field: str) -> object:
    """A regular ``kind`` YAML file decoded by :func:`parse_yaml`."""
    where = f"{field}: {path}" if field else str(path)
    return parse_yaml(decode_utf8(read_bytes(path, kind, field), where), where)


def csv_rows(path: str | Path, kind: str, field: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file with a header; short/long rows and bad quotes are errors."""
    text = read_text(path, kind, field)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    where = f"{field}: {path}" if field else str(path)
    try:
        header = next(reader, None)
        if not header:
            raise PlannerInputError(where, "empty file; expected a header row")
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise PlannerInputError(
                    f"{where}:{reader.line_num}",
                    f"has {len(row)} cells, the header has {len(header)}",
                )
            yield reader.line_num, dict(zip(header, row, strict=True))
    except csv.Error as exc:
        raise PlannerInputError(f"{where}:{reader.line_num}", f"bad CSV ({exc})") from None


def read_csv(
    path: str | Path, kind: str, field: str, *, nrows: int | None = None, low_memory: bool = True
) -> pd.DataFrame:
    """A CSV file as a DataFrame; empty, malformed or non-UTF-8 files are one-line errors."""
    import pandas as pd  # heavy (~0.2 s): only the CSV readers need it, not a GPU spec's reader

    where = f"{field}: {path}" if field else str(path)
    fd, _ = _open_regular(Path(path), kind, field)
    try:
        with os.fdopen(fd, "rb") as fh:
            return pd.read_csv(fh, encoding="utf-8", nrows=nrows, low_memory=low_memory)
    except UnicodeDecodeError as exc:
        raise PlannerInputError(where, f"not UTF-8 text (byte {exc.start} of a block)") from None
    except pd.errors.EmptyDataError:
        raise PlannerInputError(where, "empty file; expected a header row and data rows") from None
    except (pd.errors.ParserError, ValueError, OverflowError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PlannerInputError(where, f"bad CSV: {first}") from None


@overload
def check_number(
    value: object, where: str, lo: float, hi: float, *, integer: Literal[True]
) -> int: ...
@overload
def check_number(
    value: object, where: str, lo: float, hi: float, *, integer: Literal[False] = False
) -> float: ...
def check_number(
    value: object, where: str, lo: float, hi: float, *, integer: bool = False
) -> int | float:
    """``value`` as an int (``integer``) or float once it is finite and in ``[lo, hi]``.

    Booleans and strings are refused; the message names ``where`` and the allowed range.
    """
    kind = "an integer" if integer else "a number"
    allowed = f"{kind} in [{_bound(lo)}, {_bound(hi)}]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(where, f"must be {allowed}, got {_short(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise PlannerInputError(where, f"must be {allowed}, got {value}")
    if integer and isinstance(value, float) and not value.is_integer():
        raise PlannerInputError(where, f"must be {allowed}, got {value}")
    if not lo <= value <= hi:
        raise PlannerInputError(where, f"must be {allowed}, got {_short(value)}")
    return int(value) if integer else float(value)


def _bound(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _short(value: object) -> str:
    """``value`` as a person reads it in a message: text quoted, numbers as written (numpy's
    scalars unwrapped: ``0``, not ``np.int64(0)``), at most 40 characters."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str):
        value = item()
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def require_columns(df: pd.DataFrame, cols: Iterable[str], where: str) -> None:
    """Refuse a table (of another layout) that lacks any of ``cols``, naming them."""
    missing = sorted(set(cols) - set(df.columns))
    if missing:
        raise PlannerInputError(
            where, f"lacks column(s) {', '.join(missing)}: not the expected layout"
        )


def numeric_columns(
    df: pd.DataFrame,
    ranges: dict[str, tuple[float, float]],
    where: str,
    integers: Iterable[str] = (),
) -> pd.DataFrame:
    """``df`` with the columns of ``ranges`` as floats; a cell that holds text, a non-finite number
    or a value outside its ``(lo, hi)`` (or, in a column of ``integers``, a fraction) is an error
    naming ``where:line: column``. Empty cells stay NaN (the layouts use them for "not given");
    line numbers count the header as line 1."""
    import numpy as np
    import pandas as pd  # heavy (~0.2 s): only the CSV readers need it, not a GPU spec's reader

    whole = frozenset(integers)
    out = df.copy()
    for col, (lo, hi) in ranges.items():
        if col not in df.columns:
            continue
        raw = df[col]
        num = pd.to_numeric(raw, errors="coerce").astype(float)
        with np.errstate(invalid="ignore"):
            bad = (num.isna() & raw.notna()) | (num.notna() & ~((num >= lo) & (num <= hi)))
            if col in whole:
                bad |= num.notna() & (num % 1 != 0)
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            kind = "a whole number" if col in whole else "a number"
            allowed = f"[{_bound(lo)}, {_bound(hi)}]"
            raise PlannerInputError(
                f"{where}:{i + 2}: {col}",
                f"must be {kind} in {allowed}, got {_short(raw.iloc[i])}",
            )
        out[col] = num
    return out
