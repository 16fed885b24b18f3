"""Which default KV pool a measured row is replayed at (``planner.validation.e2e.kv_pool``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from planner.memory_batch import KvPool
from planner.validation.e2e import SGLANG_AT_DEFAULT, kv_pool, kv_pools


@pytest.mark.parametrize(
    ("backend", "version", "pool"),
    [
        ("vllm", "0.12.0", KvPool.VLLM),
        ("trtllm", "1.0.0rc3", KvPool.TRTLLM),
        ("trtllm", None, KvPool.TRTLLM),
        ("sglang", "0.5.1.post1", KvPool.SGLANG_052),
        ("sglang", "0.5.1-rc0.pre1", KvPool.SGLANG_052),
        ("sglang", "0.5.2", KvPool.SGLANG_052),
        ("sglang", "0.5.3", KvPool.SGLANG),
        ("sglang", "0.5.5.post2", KvPool.SGLANG),
        ("sglang", "0.5.9", KvPool.SGLANG),
        ("sglang", float("nan"), KvPool.SGLANG),  # no version: the newer rule
        ("sglang", "glm5-hopper", KvPool.SGLANG),  # a build tag, no version number
    ],
)
def test_each_engine_is_replayed_at_its_own_default(
    backend: str, version: object, pool: KvPool
) -> None:
    assert kv_pool(backend, version, sglang_default=True) is pool


def test_sglang_rows_keep_the_device_fraction_unless_asked() -> None:
    """``SGLANG_AT_DEFAULT`` is off (a measured SGLang deployment could not have run at the
    default): SGLang rows keep vLLM's meaning, TensorRT-LLM rows take their engine's default."""
    assert not SGLANG_AT_DEFAULT
    rows = pd.DataFrame({"backend": ["vllm", "sglang", "trtllm"], "backend_version": ["0.5.9"] * 3})
    assert np.array_equal(kv_pools(rows), [KvPool.VLLM, KvPool.VLLM, KvPool.TRTLLM])


def test_rows_without_a_version_column_are_read() -> None:
    rows = pd.DataFrame({"backend": ["vllm", "sglang", "trtllm"]})
    assert np.array_equal(kv_pools(rows), [KvPool.VLLM, KvPool.VLLM, KvPool.TRTLLM])
