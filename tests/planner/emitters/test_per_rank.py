"""Per-rank flag tables (``planner/engines/<name>/per_rank.yaml``) and the listen address."""

from __future__ import annotations

import pytest

import planner.emitters.engine_args as ea
from planner.emitters.bundle import engine_build
from planner.emitters.flag_table import Flags
from planner.emitters.per_rank import PER_RANK_PARAMS, from_flag, per_rank_table, to_flag
from planner.emitters.plan_file import parse_plan
from planner.emitters.writer import argv
from planner.engines.registry import BUILTIN
from planner.errors import PlannerInputError
from tests.planner.emitters.plans import default_agg_plan, disagg_plan

ENGINES = tuple(BUILTIN)


@pytest.mark.parametrize("engine", ENGINES)
def test_table_covers_every_per_rank_flag_the_emitter_writes(engine: str) -> None:
    """One entry per per-rank parameter, naming the flag the flag table emits at the default
    version, known to the engine's own argument lists, with a source at a cited commit."""
    table = per_rank_table(engine)
    assert {e.param for e in table.entries} == set(PER_RANK_PARAMS)
    flags = Flags(engine)
    for e in table.entries:
        assert flags.get(e.param).flag == e.flag
        assert "@" in e.source, e.source
        if not e.flag.startswith("--"):
            continue  # an LLM-API YAML key: checked by check_llm_api_yaml in the contract tests
        known = {f for a in ea.load(engine)["tools"]["serve"]["arguments"] for f in a["flags"]}
        assert e.flag in known


def test_sglang_counts_the_server_and_divides_by_dp() -> None:
    table = per_rank_table("sglang")
    slots, chunk = table.entry("max_batch"), table.entry("chunk")
    assert (slots.scope, chunk.scope) == ("server", "server")
    assert to_flag(slots, 512, 64) == 32_768 and from_flag(slots, 32_768, 64) == 512
    assert from_flag(slots, 512, 64) == 8  # the old bundle: 8 slots per rank
    assert table.entry("cuda_graph_max").scope == "rank"


def test_vllm_graph_sizes_count_tokens_of_a_speculative_step() -> None:
    graphs = per_rank_table("vllm").entry("cuda_graph_max")
    assert to_flag(graphs, 48, 8, spec_tokens=3) == 192
    assert from_flag(graphs, 192, 8, spec_tokens=3) == 48
    assert to_flag(per_rank_table("vllm").entry("max_batch"), 48, 8) == 48


def _hosts(backend: str, plan: dict[str, object], host: str = "") -> set[str]:
    ctx, _, build = engine_build(parse_plan(plan), backend, host=host)
    cmds = [c for _, c in build.servers] + ([build.router] if build.router else [])
    names = ("--host", "--http-host")
    out = set()
    for cmd in cmds:
        words = argv(cmd)
        out |= {words[i + 1] for i, w in enumerate(words) if w in names}
    return out


@pytest.mark.parametrize("backend", ENGINES)
def test_listen_address_defaults_and_host_flag(backend: str) -> None:
    assert _hosts(backend, default_agg_plan()) == {"127.0.0.1"}  # one host
    assert _hosts(backend, disagg_plan()) == {"0.0.0.0"}  # prefill and decode on two hosts
    assert _hosts(backend, default_agg_plan(), "10.0.0.5") == {"10.0.0.5"}


def test_the_router_reaches_the_servers_at_the_given_address() -> None:
    _, _, build = engine_build(parse_plan(default_agg_plan()), "sglang", host="10.0.0.5")
    assert build.router is not None
    urls = argv(build.router)[argv(build.router).index("--worker-urls") + 1 :][:2]
    assert urls == ["http://10.0.0.5:30000", "http://10.0.0.5:30001"]
    assert build.endpoints == (("10.0.0.5", 8000),)  # the benchmark goes there too
    with pytest.raises(PlannerInputError, match="several hosts take part"):
        engine_build(parse_plan(disagg_plan()), "sglang", host="10.0.0.5")


def test_a_bad_host_is_refused() -> None:
    with pytest.raises(PlannerInputError, match="not an IP address") as exc:
        engine_build(parse_plan(default_agg_plan()), "vllm", host="a b; rm -rf /")
    assert exc.value.field == "--host"
