"""Emitted prefix caching, host-memory KV tier and router policy: every command still parses
against the engine's own argument lists (the recipe contract), the tier size read back through
``per_rank.yaml`` is the plan's GiB per GPU, and what no engine list can express is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planner.emitters.bundle import engine_build
from planner.emitters.per_rank import per_rank_table, tier_gib_per_gpu
from planner.emitters.plan_file import parse_plan
from planner.emitters.writer import argv
from planner.errors import PlannerInputError
from planner.model.bundled import load_model
from tests.planner.emitters.test_recipe_contract import ENGINES, _config, _plan, check_recipe

HOST_GIB = 128.0
GB_PER_GIB = 2**30 / 1e9


def _prefix_plan(mode: str, **prefix: Any) -> dict[str, Any]:
    plan = _plan(load_model("llama-3.1-70b"), mode, "h200_sxm", False)
    plan["prefix_cache"] = {
        "enabled": True,
        "routing": "prefix",
        "host_kv_gib_per_gpu": HOST_GIB,
        "ssd_kv_gib_per_gpu": 0.0,
        "prefix_hit": 0.3,
        **prefix,
    }
    return plan


def _value(words: list[str], flag: str) -> str:
    return words[words.index(flag) + 1]


@pytest.mark.parametrize("backend", ENGINES)
def test_prefix_cache_host_tier_and_cache_aware_router(backend: str) -> None:
    ctx, _, build = engine_build(parse_plan(_prefix_plan("agg")), backend)
    check_recipe(ctx, build, backend)  # every flag against the engine's own lists
    assert build.router is not None, "three replicas: a router in front"
    router = argv(build.router)
    slot, cmd = build.servers[0]
    words = argv(cmd)
    par = slot.worker.parallel
    if backend == "vllm":
        assert "--enable-prefix-caching" in words
        entry = per_rank_table("vllm").tier("kv_offload_size")
        size = float(_value(words, "--kv-offloading-size"))
        assert tier_gib_per_gpu(entry, size, par.tp * par.pp) == pytest.approx(HOST_GIB)
        assert _value(words, "--kv-offloading-backend") == "native"
        assert _value(router, "--policy") == "cache_aware"
        assert float(_value(router, "--cache-threshold")) == 0.3
    elif backend == "sglang":
        assert _value(words, "--radix-eviction-policy") == "lru"
        assert "--enable-hierarchical-cache" in words
        assert _value(words, "--hicache-write-policy") == "write_through"
        gb = int(_value(words, "--hicache-size"))
        assert gb == int(HOST_GIB * GB_PER_GIB)  # per rank, rounded down
        entry = per_rank_table("sglang").tier("hicache_size")
        assert HOST_GIB - 1 < tier_gib_per_gpu(entry, gb, par.tp) <= HOST_GIB
        assert _value(router, "--policy") == "cache_aware"
        assert int(_value(router, "--balance-abs-threshold")) == 64
    else:
        kv = _config(build, slot.role)["kv_cache_config"]
        assert kv["enable_block_reuse"] is True
        entry = per_rank_table("trtllm").tier("kv_host_cache")
        assert tier_gib_per_gpu(entry, kv["host_cache_size"], par.tp) == pytest.approx(HOST_GIB)
        assert _value(router, "--router-mode") == "kv"
        assert "--publish-kv-events" in words  # the KV-aware router reads the workers' events


@pytest.mark.parametrize("backend", ["sglang", "trtllm"])
def test_disaggregated_host_tier_sits_on_prefill_workers(backend: str) -> None:
    ctx, _, build = engine_build(parse_plan(_prefix_plan("disagg")), backend)
    check_recipe(ctx, build, backend)
    for slot, cmd in build.servers:
        if backend == "sglang":
            assert ("--enable-hierarchical-cache" in argv(cmd)) == (slot.role == "prefill")
        else:
            kv = _config(build, slot.role)["kv_cache_config"]
            assert ("host_cache_size" in kv) == (slot.role == "prefill")


@pytest.mark.parametrize("backend", ENGINES)
def test_round_robin_without_tiers_keeps_the_default_router(backend: str) -> None:
    plan = _prefix_plan("agg", routing="round-robin", host_kv_gib_per_gpu=0.0)
    ctx, _, build = engine_build(parse_plan(plan), backend)
    check_recipe(ctx, build, backend)
    assert build.router is not None
    text = " ".join(argv(build.router))
    assert "cache_aware" not in text and " kv" not in text
    words = " ".join(argv(build.servers[0][1]))
    assert "offloading" not in words and "hicache" not in words and "kv-events" not in words


@pytest.mark.parametrize(
    ("backend", "prefix", "mode", "field"),
    [
        ("vllm", {"ssd_kv_gib_per_gpu": 1024.0}, "agg", "ssd_kv_gib_per_gpu"),
        ("sglang", {"ssd_kv_gib_per_gpu": 1024.0}, "agg", "ssd_kv_gib_per_gpu"),
        ("trtllm", {"ssd_kv_gib_per_gpu": 1024.0}, "agg", "ssd_kv_gib_per_gpu"),
        ("vllm", {"routing": "session"}, "agg", "routing"),
        ("vllm", {}, "disagg", "host_kv_gib_per_gpu"),
    ],
)
def test_what_no_argument_list_expresses_is_refused(
    backend: str, prefix: dict[str, Any], mode: str, field: str
) -> None:
    plan = _prefix_plan(mode, **prefix)
    with pytest.raises(PlannerInputError) as err:
        engine_build(parse_plan(copy.deepcopy(plan)), backend)
    assert field in str(err.value)


def test_a_plan_without_a_cache_chosen_emits_no_prefix_flags() -> None:
    plan = _prefix_plan("agg", enabled=False)
    _, _, build = engine_build(parse_plan(plan), "vllm")
    assert "--enable-prefix-caching" not in argv(build.servers[0][1])


@pytest.mark.parametrize("backend", ENGINES)
def test_tier_entries_name_the_flag_table_spelling(backend: str) -> None:
    """Every ``kv_tiers`` entry of per_rank.yaml is the flags.yaml spelling of its parameter, and
    converting GiB per GPU to the flag and back is exact up to the flag's rounding."""
    from planner.emitters.flag_table import Flags
    from planner.emitters.per_rank import tier_flag

    table = per_rank_table(backend)
    assert table.kv_tiers, f"{backend}: no host-memory tier size stated"
    for entry in table.kv_tiers:
        assert Flags(backend).get(entry.param).flag == entry.flag
        value = tier_flag(entry, HOST_GIB, 4)
        assert isinstance(value, int) == entry.integer
        back = tier_gib_per_gpu(entry, float(value), 4)
        assert HOST_GIB - 1 < back <= HOST_GIB + 1e-9
