"""`plan --backend B` searches only worker shapes engine B can launch."""

from __future__ import annotations

import pytest

from planner.emitters.capabilities import shape_rules
from planner.model.bundled import load_model
from solvers.space import SearchSpace, legal_splits


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_search_space_follows_the_engine(engine: str) -> None:
    rules = shape_rules(engine)
    space = SearchSpace(gpus=("h200_sxm",), max_gpus=16, shape_rules=rules)
    splits = legal_splits(load_model("deepseek-r1"), space, domain_size=8)
    assert splits and all(rules.problem(p) is None for p in splits)
    if engine == "vllm":
        assert all(p.ep in (1, p.tp * p.dp) for p in splits)
    if engine == "trtllm":
        assert not any(p.dp > 1 and p.tp > 1 for p in splits)
    if engine == "sglang":  # SGLang's --ep-size may be a proper divisor of tp*dp
        assert any(1 < p.ep < p.tp * p.dp for p in splits)
