"""The flag table itself: sources, version ranges, and coverage of every planner parameter."""

from __future__ import annotations

import pytest

from planner.emitters.flag_table import Flags, engine_table, parse_version, resolve_version
from planner.engines.registry import BUILTIN
from planner.errors import PlannerInputError

ENGINES = tuple(BUILTIN)

CORE = (
    "tp",
    "pp",
    "dp",
    "ep",
    "max_batch",
    "chunk",
    "mem_fraction",
    "kv_dtype",
    "max_len",
    "cuda_graph_max",
    "host",
    "port",
    "serve_program",
    "bench_program",
)


@pytest.mark.parametrize("engine", ENGINES)
def test_rows_have_sources_and_sane_ranges(engine: str) -> None:
    for row in engine_table(engine).rows:
        assert row.doc.strip(), row
        if row.until is not None:
            assert parse_version(row.since) < parse_version(row.until), row


@pytest.mark.parametrize("engine", ENGINES)
def test_no_overlap_and_full_coverage_at_every_boundary(engine: str) -> None:
    table = engine_table(engine)
    bounds = {table.min_version, table.default_version, table.max_version}
    bounds |= {r.since for r in table.rows} | {r.until for r in table.rows if r.until}
    for version in sorted(bounds, key=parse_version):
        flags = Flags(engine, version)  # asserts when two rows overlap
        for param in CORE:
            found = [flags.find(param, tool) for tool in ("serve", "bench")]
            if engine == "trtllm" and param == "dp":
                continue  # TRT-LLM folds DP into tensor_parallel_size + enable_attention_dp
            assert any(found), (engine, version, param)


def test_version_parsing_and_range() -> None:
    assert parse_version("v0.33.1rc2") == (0, 33, 1)
    assert resolve_version("vllm", None) == (0, 33, 0)
    assert resolve_version("vllm", "0.33.7") == (0, 33, 7)
    assert resolve_version("trtllm", "1.2.0rc3") == (1, 2, 0)
    with pytest.raises(PlannerInputError, match="outside"):
        resolve_version("sglang", "0.4.9")
    with pytest.raises(PlannerInputError, match="parse"):
        resolve_version("sglang", "nightly")
    with pytest.raises(PlannerInputError, match="unknown engine"):
        resolve_version("tgi", None)
