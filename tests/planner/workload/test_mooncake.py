"""Traces with prefix reuse: Mooncake JSON lines, hash_ids/session CSV columns, the agentic
generator, and one-line errors naming file:line:field."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hardware.errors import PlannerInputError
from planner.cli.main import main
from planner.workload.mooncake import BLOCK_TOKENS, PrefixBlocks, to_jsonl
from planner.workload.trace_gen import AgenticSpec, generate_agentic
from planner.workload.traces import read_trace

SHARED = Path(__file__).resolve().parents[4] / "shared" / "traces" / "mooncake"
"""../shared/traces/mooncake beside the repository (absent on other checkouts)."""
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/traces/mooncake (the Mooncake traces) is absent"
)


def _line(t: float, isl: float, osl: int, ids: list[int], **extra: object) -> str:
    rec = {"timestamp": t, "input_length": isl, "output_length": osl, "hash_ids": ids, **extra}
    return json.dumps(rec)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_jsonl_read_times_lengths_blocks(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "t.jsonl",
        [_line(0, 600, 10, [0, 1]), "", _line(1500, 512, 5, [0]), _line(1500, 1025, 3, [0, 1, 7])],
    )
    tr = read_trace(f)
    assert tr.layout == "mooncake" and len(tr) == 3 and tr.session is None
    np.testing.assert_allclose(tr.arrival_s, [0.0, 1.5, 1.5])
    np.testing.assert_array_equal(tr.isl, [600, 512, 1025])
    assert tr.blocks is not None
    np.testing.assert_array_equal(tr.blocks.request(2), [0, 1, 7])
    np.testing.assert_array_equal(tr.blocks.counts(), [2, 1, 3])
    kept = tr.take(np.array([True, False, True]))
    assert kept.blocks is not None
    np.testing.assert_array_equal(kept.blocks.ids, [0, 1, 0, 1, 7])
    lengths = read_trace(f, need_times=False)
    assert lengths.layout == "lengths" and lengths.blocks is not None


@pytest.mark.parametrize(
    ("line", "where", "what"),
    [
        (_line(0, 600, 10, [0]), ":2:hash_ids", "1 ids for 600 prompt tokens"),
        (_line(0, 600, 10, [3, 3]), ":2:hash_ids", "occurs twice"),
        (_line(0, 600.5, 10, [0, 1]), ":2:input_length", "whole number"),
        (_line(0, 600, 0, [0, 1]), ":2:output_length", "outside"),
        (_line(-1, 600, 10, [0, 1]), ":2:timestamp", "outside"),
        (_line(0, 600, 10, [0, -1]), ":2:hash_ids", "whole number"),
        (_line(0, 600, 10, [0, True]), ":2:hash_ids", "whole number"),
        (
            '{"timestamp": NaN, "input_length": 1, "output_length": 1, "hash_ids": [0]}',
            ":2",
            "JSON",
        ),
        (
            '{"timestamp": 1e400, "input_length": 1, "output_length": 1, "hash_ids": [0]}',
            ":2:t",
            "",
        ),
        ('{"timestamp": 0, "input_length": 1, "output_length": 1}', ":2:hash_ids", "missing"),
        ("[1, 2]", ":2", "not a JSON object"),
        ("{not json", ":2", "not a JSON object"),
        (_line(0, 600, 10, [0, 1], session="a"), ":1:session", "missing; later lines"),
    ],
)
def test_jsonl_errors_name_file_line_field(
    tmp_path: Path, line: str, where: str, what: str
) -> None:
    f = _write(tmp_path / "bad.jsonl", [_line(0, 100, 1, [9]), line])
    with pytest.raises(PlannerInputError) as err:
        read_trace(f)
    assert f"{f}{where}" in str(err.value) and what in str(err.value)


def test_jsonl_unsorted_and_not_utf8(tmp_path: Path) -> None:
    f = _write(tmp_path / "t.jsonl", [_line(10, 100, 1, [0]), _line(5, 100, 1, [1])])
    with pytest.raises(PlannerInputError, match=r"t.jsonl:2:timestamp.*sort"):
        read_trace(f)
    g = tmp_path / "u.jsonl"
    g.write_bytes(_line(0, 100, 1, [0]).encode() + b"\n\xff\xfe\n")
    with pytest.raises(PlannerInputError, match=r"u.jsonl:2.*UTF-8"):
        read_trace(g)
    with pytest.raises(PlannerInputError, match="trace-where"):
        read_trace(f, where=("a=b",))


def test_csv_hash_ids_and_session_columns(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    head = "arrival_s,isl,osl,session,hash_ids\n"
    f.write_text(head + "0,600,5,alice,0 1\n1,300,5,bob,0\n2,1100,5,alice,0 1 2\n")
    tr = read_trace(f)
    assert tr.layout == "ours" and tr.blocks is not None and tr.session is not None
    np.testing.assert_array_equal(tr.session, [0, 1, 0])
    np.testing.assert_array_equal(tr.blocks.request(2), [0, 1, 2])
    f.write_text("arrival_s,isl,osl,hash_ids\n0,600,5,0 x\n")
    with pytest.raises(PlannerInputError, match=r"t.csv:2:hash_ids"):
        read_trace(f)
    f.write_text("arrival_s,isl,osl,hash_ids\n0,600,5,0 1\n1,600,5,4\n")
    with pytest.raises(PlannerInputError, match=r"t.csv:3:hash_ids.*1 ids for 600"):
        read_trace(f)


def test_prefix_blocks_take_keeps_order() -> None:
    b = PrefixBlocks(np.arange(6, dtype=np.int64), np.array([0, 1, 3, 6]))
    np.testing.assert_array_equal(b.take(np.array([2, 0])).ids, [3, 4, 5, 0])
    np.testing.assert_array_equal(b.take(np.array([False, True, False])).offsets, [0, 2])


@needs_shared
@pytest.mark.parametrize(
    ("name", "requests", "isl_mean"),
    [("conversation_trace.jsonl", 12031, 12035), ("synthetic_trace.jsonl", 3993, 15325)],
)
def test_shared_mooncake_traces_read(name: str, requests: int, isl_mean: float) -> None:
    """The request counts and mean prompts the traces' README states."""
    tr = read_trace(SHARED / name)
    assert len(tr) == requests
    assert float(tr.isl.mean()) == pytest.approx(isl_mean, abs=0.5)
    assert tr.blocks is not None and len(tr.blocks) == requests


def test_agentic_generator_grows_context_and_shares_prefixes() -> None:
    spec = AgenticSpec(sessions=40, seed=2)
    tr = generate_agentic(spec)
    assert tr.session is not None and tr.blocks is not None
    assert np.all(np.diff(tr.arrival_s) >= 0)
    again = generate_agentic(spec)
    np.testing.assert_array_equal(tr.blocks.ids, again.blocks.ids if again.blocks else [])
    np.testing.assert_array_equal(tr.blocks.counts(), -(-tr.isl // BLOCK_TOKENS))
    for s in np.unique(tr.session)[:10]:
        idx = np.flatnonzero(tr.session == s)
        assert np.all(np.diff(tr.isl[idx]) > 0), "a session's context grows turn by turn"
        for a, b in zip(idx[:-1], idx[1:], strict=True):
            full = int(tr.isl[a]) // BLOCK_TOKENS
            prev, nxt = tr.blocks.request(int(a)), tr.blocks.request(int(b))
            np.testing.assert_array_equal(nxt[:full], prev[:full])
    firsts = [tr.blocks.request(int(np.flatnonzero(tr.session == s)[0]))[0] for s in range(40)]
    assert len(set(firsts)) <= spec.system_prompts, "sessions share the system prompts' blocks"


def test_gen_trace_agentic_writes_readable_jsonl(tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    assert (
        main(["gen-trace", "--agentic", "--out", str(out), "--sessions", "20", "--seed", "1"]) == 0
    )
    tr = read_trace(out)
    gen = generate_agentic(AgenticSpec(sessions=20, seed=1))
    assert tr.layout == "mooncake" and len(tr) == len(gen)
    np.testing.assert_array_equal(tr.isl, gen.isl)
    assert tr.session is not None and gen.blocks is not None and tr.blocks is not None
    np.testing.assert_array_equal(tr.blocks.ids, gen.blocks.ids)
    assert main(["gen-trace", "--agentic", "--out", str(out), "--sessions", "2"]) == 2
    assert main(["gen-trace", "--agentic", "--out", str(tmp_path / "b"), "--hours", "2"]) == 2
    text = to_jsonl(tr.arrival_s, tr.isl, tr.osl, tr.blocks, tr.session).decode()
    assert text == out.read_text()
