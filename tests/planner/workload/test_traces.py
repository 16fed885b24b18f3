"""Reading timed traces: our layout, BurstGPT's columns as they are, and one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hardware.errors import PlannerInputError
from planner.workload.trace_gen import TraceSpec, generate
from planner.workload.traces import (
    BURSTGPT_ALL,
    MAX_TRACE_BYTES,
    read_trace,
    trace_lengths,
    write_trace,
)


def burstgpt_file(path: Path, rows: int = 300, seed: int = 0) -> Path:
    """A file in BurstGPT's published column layout (Timestamp, Model, Request tokens, Response
    tokens, Total tokens, Log Type), with failed requests (0 response tokens) among the rows."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(2.0, rows)).round().astype(int)
    req = rng.integers(1, 3000, rows)
    resp = rng.integers(0, 800, rows)
    resp[::50] = 0
    lines = [",".join(BURSTGPT_ALL)]
    for i in range(rows):
        model = "ChatGPT" if i % 3 else "GPT-4"
        log = "Conversation log" if i % 2 else "API log"
        lines.append(f"{t[i]},{model},{req[i]},{resp[i]},{req[i] + resp[i]},{log}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_burstgpt_layout_accepted_unchanged(tmp_path: Path) -> None:
    f = burstgpt_file(tmp_path / "BurstGPT_1.csv")
    tr = read_trace(f)
    assert tr.layout == "burstgpt" and len(tr) == 300
    assert tr.zero_token_rows == 6 and tr.osl.min() == 1
    assert np.all(np.diff(tr.arrival_s) >= 0)
    isl, osl = trace_lengths(f)
    assert isl.mean == pytest.approx(float(np.mean(tr.isl)))


def test_ours_roundtrip_and_lengths_only(tmp_path: Path) -> None:
    tr, _ = generate(TraceSpec(hours=0.5, peak_rate=2.0, seed=3))
    f = write_trace(tr, tmp_path / "t.csv")
    back = read_trace(f)
    assert back.layout == "ours" and len(back) == len(tr)
    np.testing.assert_allclose(back.arrival_s, tr.arrival_s, atol=1e-6)
    np.testing.assert_array_equal(back.isl, tr.isl)
    (tmp_path / "lengths.csv").write_text("isl,osl\n100,20\n200,40\n")
    assert trace_lengths(tmp_path / "lengths.csv")[0].mean == 150
    with pytest.raises(PlannerInputError, match="no arrival_s column"):
        read_trace(tmp_path / "lengths.csv")


@pytest.mark.parametrize(
    ("body", "where", "what"),
    [
        ("arrival_s,isl,osl\n0,10,5\n2,10,5\n1,10,5\n", ":4:arrival_s", "before the previous row"),
        ("arrival_s,isl,osl\n0,10,5\n1,-3,5\n", ":3:isl", "must be >= 1"),
        ("arrival_s,isl,osl\n0,10,5\n1,10,x\n", ":3:osl", "is not a number"),
        ("arrival_s,isl,osl\n0,10,5\n1,10.5,5\n", ":3:isl", "whole number"),
        ("arrival_s,isl,osl\n-1,10,5\n", ":2:arrival_s", "negative"),
        ("arrival_s,isl,osl\n0,10,5\nnan,10,5\n", ":3:arrival_s", "finite"),
        ("arrival_s,isl,osl\n0,10\n", ":2", "fields"),
        ("arrival_s,isl,osl\n", "", "no requests"),
        ("", "", "empty file"),
        ("when,what\n1,2\n", ":1", "header"),
        (
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "5,GPT-4,-2,3,1,API log\n",
            ":2:Request tokens",
            "must be >= 0",
        ),
    ],
)
def test_bad_traces_one_line(tmp_path: Path, body: str, where: str, what: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(body)
    with pytest.raises(PlannerInputError) as exc:
        read_trace(f)
    msg = str(exc.value)
    assert "\n" not in msg and what in msg
    assert f"bad.csv{where}" in msg


def test_not_regular_not_utf8_too_big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PlannerInputError, match="not a regular file"):
        read_trace(tmp_path)
    f = tmp_path / "latin.csv"
    f.write_bytes(b"arrival_s,isl,osl\n0,10,5\n1,10,5 \xe9\n")
    with pytest.raises(PlannerInputError, match=r"latin.csv:3.*not UTF-8"):
        read_trace(f)
    with pytest.raises(PlannerInputError, match="cannot read"):
        read_trace(tmp_path / "missing.csv")
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(MAX_TRACE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(PlannerInputError, match="at most"):
        read_trace(big)


def test_write_refuses_overwrite_and_symlink(tmp_path: Path) -> None:
    tr, _ = generate(TraceSpec(hours=0.1, seed=1))
    f = write_trace(tr, tmp_path / "a.csv")
    with pytest.raises(PlannerInputError, match="--force"):
        write_trace(tr, f)
    write_trace(tr, f, force=True)
    link = tmp_path / "link.csv"
    os.symlink(tmp_path / "elsewhere.csv", link)
    with pytest.raises(PlannerInputError, match="symbolic link"):
        write_trace(tr, link, force=True)
    assert not (tmp_path / "elsewhere.csv").exists()


def test_crlf_bom_and_quoted_fields(tmp_path: Path) -> None:
    """Files saved by spreadsheet programs: a byte-order mark, CRLF line ends, quoted text cells."""
    f = tmp_path / "excel.csv"
    body = (
        "\ufeffTimestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n"
        '1,"ChatGPT",10,5,15,"Conversation log"\r\n'
        '1,"GPT-4",20,0,20,"API log"\r\n'
        "\r\n"
        '3,"ChatGPT",30,7,37,"API log"\r\n'
    )
    f.write_bytes(body.encode("utf-8"))
    tr = read_trace(f)
    assert tr.isl.tolist() == [10, 20, 30] and tr.osl.tolist() == [5, 1, 7]
    assert tr.arrival_s.tolist() == [1.0, 1.0, 3.0] and tr.zero_token_rows == 1
    f.write_bytes(body.replace("30,7", "30,-7").encode("utf-8"))
    with pytest.raises(PlannerInputError, match=r"excel.csv:5:Response tokens"):
        read_trace(f)
