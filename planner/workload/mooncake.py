"""Traces with prefix reuse: Mooncake's JSON lines, and the block-hash and session columns of ours.

Mooncake (Qin et al., "Mooncake: Trading More Storage for Less Computation", FAST'25;
github.com/kvcache-ai/Mooncake ``FAST25-release/traces/``) writes one JSON object per line::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, ...]}

``timestamp`` is milliseconds since the trace's start, the lengths are tokens and ``hash_ids``
name the prompt's KV blocks of ``BLOCK_TOKENS`` tokens in order: block ``k``'s id stands for the
whole prefix up to the end of that block, so two requests share a prefix exactly as long as their
leading runs of equal ids. An optional ``session`` (a string or an integer) names the
conversation a request belongs to (``planner gen-trace --agentic`` writes it; Mooncake's own
traces have none).

Our CSV may carry the same facts in two optional columns: ``hash_ids`` (the block ids separated
by spaces) and ``session``.

This module parses and checks; :mod:`planner.workload.traces` reads the file (size cap, UTF-8)
and builds the :class:`~planner.workload.traces.Trace`. Checks: every line one JSON object with
the four fields, times finite and sorted, lengths whole, ``hash_ids`` whole numbers >= 0, as many
as the prompt has blocks (``ceil(input_length / BLOCK_TOKENS)``), none repeated within a request
(an id names a prefix, so it can occur once per prompt). A problem is one
:class:`PlannerInputError` naming ``file:line:field``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hardware.errors import PlannerInputError

BLOCK_TOKENS = 512
"""Tokens per block named by one hash id (Mooncake FAST'25 trace release README: "hash_ids ...
each block of 512 tokens"; ../shared/traces/README.md)."""
MAX_BLOCK_ID = 2**62
"""Largest block id accepted (ids are stored as int64)."""
MAX_TOKENS = 10**7
"""Largest prompt or answer length accepted, tokens (as for CSV traces)."""
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
"""The fields every Mooncake line has."""
MS_PER_S = 1000.0
MAX_TIMESTAMP_MS = 1e13
"""Latest timestamp accepted, ms (about 300 years)."""


@dataclass(frozen=True)
class PrefixBlocks:
    """Every request's KV block ids, concatenated (CSR layout: fast to replay)."""

    ids: np.ndarray
    """Block ids of all requests in order (int64)."""
    offsets: np.ndarray
    """Request ``i``'s ids are ``ids[offsets[i]:offsets[i + 1]]`` (int64, length requests + 1)."""
    block_tokens: int = BLOCK_TOKENS
    """Tokens per block."""

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def counts(self) -> np.ndarray:
        """Blocks per request (int64)."""
        return np.diff(self.offsets)

    def request(self, i: int) -> np.ndarray:
        """Request ``i``'s block ids."""
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def take(self, keep: np.ndarray) -> PrefixBlocks:
        """The blocks of the requests selected by ``keep`` (boolean mask or indices), in order."""
        idx = np.flatnonzero(keep) if np.asarray(keep).dtype == bool else np.asarray(keep)
        counts = self.counts()[idx]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        owner = np.repeat(np.arange(idx.size), counts)
        within = np.arange(int(offsets[-1])) - offsets[owner]
        return PrefixBlocks(self.ids[self.offsets[idx][owner] + within], offsets, self.block_tokens)


@dataclass(frozen=True)
class Rows:
    """A parsed Mooncake file: arrays the Trace is built from."""

    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    blocks: PrefixBlocks
    session: np.ndarray | None


def is_jsonl(text: str) -> bool:
    """True when the first non-blank character opens a JSON object (a CSV header cannot)."""
    return text.lstrip()[:1] == "{"


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


def _number(rec: dict[str, Any], key: str, where: str, high: float) -> float:
    """A finite number in [0, high] (a timestamp) or a whole one in [1, high] (a length)."""
    v = rec.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise PlannerInputError(f"{where}:{key}", f"{str(v)[:40]!r} is not a finite number")
    whole = key != "timestamp"
    if whole and v != int(v):
        raise PlannerInputError(f"{where}:{key}", f"{v:g} must be a whole number of tokens")
    low = 1 if whole else 0
    if not low <= v <= high:
        raise PlannerInputError(f"{where}:{key}", f"{v:g} is outside [{low}, {high:g}]")
    return float(v)


def _ids(rec: dict[str, Any], where: str) -> list[int]:
    ids = rec.get("hash_ids")
    if not isinstance(ids, list):
        raise PlannerInputError(f"{where}:hash_ids", "must be a list of block ids")
    for v in ids:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_BLOCK_ID:
            raise PlannerInputError(
                f"{where}:hash_ids", f"{str(v)[:40]!r} is not a whole number in [0, 2**62]"
            )
    return ids


def _session(rec: dict[str, Any], where: str) -> str:
    s = rec["session"]
    if isinstance(s, bool) or not isinstance(s, (str, int)) or len(str(s)) > 200:
        raise PlannerInputError(f"{where}:session", "must be a string or an integer (<= 200 chars)")
    return str(s)


def _record(line: str, where: str) -> dict[str, Any]:
    try:
        rec = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise PlannerInputError(where, f"not a JSON object: {str(exc)[:80]}") from None
    if not isinstance(rec, dict):
        raise PlannerInputError(where, "not a JSON object")
    missing = [k for k in FIELDS if k not in rec]
    if missing:
        raise PlannerInputError(
            f"{where}:{missing[0]}", f"missing; every line needs {', '.join(FIELDS)}"
        )
    return rec


def parse_jsonl(text: str, path: Path) -> Rows:
    """Mooncake JSON lines (blank lines skipped) as arrays; times in seconds."""
    t: list[float] = []
    isl: list[float] = []
    osl: list[float] = []
    ids: list[int] = []
    counts: list[int] = []
    sessions: list[str] = []
    lines: list[int] = []
    for k, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{k}"
        rec = _record(line, where)
        t.append(_number(rec, "timestamp", where, MAX_TIMESTAMP_MS) / MS_PER_S)
        isl.append(_number(rec, "input_length", where, MAX_TOKENS))
        osl.append(_number(rec, "output_length", where, MAX_TOKENS))
        got = _ids(rec, where)
        ids.extend(got)
        counts.append(len(got))
        if "session" in rec:
            sessions.append(_session(rec, where))
        elif sessions:
            raise PlannerInputError(f"{where}:session", "missing; earlier lines have a session")
        lines.append(k)
    if not lines:
        raise PlannerInputError(str(path), "no requests: the file has no JSON lines")
    if sessions and len(sessions) != len(lines):
        raise PlannerInputError(f"{path}:{lines[0]}:session", "missing; later lines have one")
    nums = np.array(lines)
    arrival = np.array(t)
    _check_sorted(arrival, nums, path, "timestamp")
    blocks = PrefixBlocks(
        np.array(ids, dtype=np.int64),
        np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
    )
    isl_a = np.array(isl).astype(np.int64)
    check_blocks(blocks, isl_a, nums, path)
    return Rows(
        arrival,
        isl_a,
        np.array(osl).astype(np.int64),
        blocks,
        session_codes(sessions) if sessions else None,
    )


def _check_sorted(t: np.ndarray, nums: np.ndarray, path: Path, name: str) -> None:
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = back[0] + 1
        raise PlannerInputError(
            f"{path}:{nums[i]}:{name}",
            f"{t[i]:g} s is before the previous line's {t[i - 1]:g} s; sort the trace by {name}",
        )


def check_blocks(blocks: PrefixBlocks, isl: np.ndarray, nums: np.ndarray, path: Path) -> None:
    """Every request has ``ceil(isl / block_tokens)`` ids, none repeated within it."""
    need = -(-isl // blocks.block_tokens)
    bad = np.flatnonzero(blocks.counts() != need)
    if bad.size:
        i = bad[0]
        raise PlannerInputError(
            f"{path}:{nums[i]}:hash_ids",
            f"{blocks.counts()[i]} ids for {isl[i]:,} prompt tokens; blocks of "
            f"{blocks.block_tokens} tokens need {need[i]}",
        )
    owner = np.repeat(np.arange(len(blocks)), blocks.counts())
    order = np.lexsort((blocks.ids, owner))
    same = (np.diff(owner[order]) == 0) & (np.diff(blocks.ids[order]) == 0)
    if same.any():
        j = order[np.flatnonzero(same)[0]]
        raise PlannerInputError(
            f"{path}:{nums[owner[j]]}:hash_ids",
            f"id {blocks.ids[j]} occurs twice in one prompt; an id names a prefix, once per prompt",
        )


def parse_hash_cells(
    cells: list[str], isl: np.ndarray, nums: np.ndarray, path: Path
) -> PrefixBlocks:
    """Our CSV's ``hash_ids`` column: block ids separated by spaces, checked as above."""
    ids: list[int] = []
    counts: list[int] = []
    for k, cell in enumerate(cells):
        parts = cell.split()
        try:
            got = [int(p) for p in parts]
        except ValueError:
            raise PlannerInputError(
                f"{path}:{nums[k]}:hash_ids",
                f"{cell.strip()[:40]!r}: expected block ids (whole numbers) separated by spaces",
            ) from None
        if any(not 0 <= v <= MAX_BLOCK_ID for v in got):
            raise PlannerInputError(f"{path}:{nums[k]}:hash_ids", "ids must be in [0, 2**62]")
        ids.extend(got)
        counts.append(len(got))
    blocks = PrefixBlocks(
        np.array(ids, dtype=np.int64), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    )
    check_blocks(blocks, isl, nums, path)
    return blocks


def session_codes(cells: list[str]) -> np.ndarray:
    """One integer per distinct session name, in order of first appearance (int64)."""
    names = [c.strip() for c in cells]
    _, first, inverse = np.unique(np.array(names), return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse].astype(np.int64)


def to_jsonl(
    arrival_s: np.ndarray,
    isl: np.ndarray,
    osl: np.ndarray,
    blocks: PrefixBlocks,
    session: np.ndarray | None,
) -> bytes:
    """Mooncake JSON lines (timestamps in whole milliseconds; ``session`` where given)."""
    out = []
    for i in range(isl.shape[0]):
        rec: dict[str, Any] = {
            "timestamp": int(round(float(arrival_s[i]) * MS_PER_S)),
            "input_length": int(isl[i]),
            "output_length": int(osl[i]),
            "hash_ids": [int(v) for v in blocks.request(i)],
        }
        if session is not None:
            rec["session"] = int(session[i])
        out.append(json.dumps(rec, separators=(", ", ": ")))
    return ("\n".join(out) + "\n").encode("utf-8")
