"""Worker shapes an engine is reported to crash on are refused by its capability table, each
with its upstream citation (issue 47, item 9)."""

from __future__ import annotations

import re

import pytest

from planner.emitters.capabilities import check_shape, failure_of, known_failures
from planner.engines import engine_names
from planner.errors import PlannerInputError
from planner.model.bundled import load_model
from planner.perf.deployment import Parallelism
from solvers.space import SearchSpace, legal_splits

PP_DP_EP = Parallelism(tp=1, pp=2, dp=8, ep=8)


@pytest.mark.parametrize("engine", engine_names())
def test_every_known_failure_cites_an_upstream_issue(engine: str) -> None:
    for f in known_failures(engine):
        assert re.search(r"github:[\w.-]+/[\w.-]+ issue #\d+", f.source), f.source
        assert f.what.strip()


def test_sglang_refuses_pp_with_attention_dp_and_ep() -> None:
    f = failure_of("sglang", PP_DP_EP)
    assert f is not None and "sgl-project/sglang issue #9805" in f.source
    # each part alone, or two of the three, is not the reported failure
    for p in (
        Parallelism(tp=1, pp=1, dp=8, ep=8),
        Parallelism(tp=8, pp=2, dp=1, ep=8),
        Parallelism(tp=1, pp=2, dp=8, ep=1),
    ):
        assert failure_of("sglang", p) is None
    with pytest.raises(PlannerInputError, match="9805"):
        check_shape("sglang", "agg", PP_DP_EP)


def test_the_search_leaves_known_failures_out() -> None:
    m = load_model("deepseek-r1")
    space = SearchSpace(gpus=("h200_sxm",), max_gpus=64, pp=(1, 2, 4))
    every = legal_splits(m, space, domain_size=8, node_gpus=8)
    assert any(failure_of("sglang", p) for p in every)  # the generic space holds such shapes
    refused = space.model_copy(update={"known_failures": known_failures("sglang")})
    kept = legal_splits(m, refused, domain_size=8, node_gpus=8)
    assert kept and not any(failure_of("sglang", p) for p in kept)
    assert {(p.tp, p.pp, p.dp, p.ep) for p in kept} == {
        (p.tp, p.pp, p.dp, p.ep) for p in every if failure_of("sglang", p) is None
    }
