"""``planner.perf.step``'s roofline pricer prices collectives with kernels_db's alpha-beta and its
unfitted defaults (``kernels_db.comm.default_params``): one home for the default comm constants."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from kernels_db import comm as cm
from planner.perf.opgraph import Collective, Op
from planner.perf.step import RooflinePricer


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather", "send_recv"])
def test_roofline_comm_is_kernels_dbs_unfitted_alpha_beta(collective: Collective) -> None:
    gpu = get_gpu("h200")
    nbytes = np.array([0.0, 65536.0, 1.28e8, 4096.0, 1e6])
    n = np.array([8.0, 8.0, 8.0, 1.0, 16.0])  # 16 ranks cross the 8-GPU NVLink domain: NIC
    op = Op("x", "comm", "comm", 1.0, np.zeros(5), nbytes, 0.0, 2.0, collective, n)
    t, tag = RooflinePricer(gpu).price(op)
    want = np.zeros(5)
    for i in (1, 2, 4):
        link = "nvlink" if n[i] <= gpu.scale_up.domain_size else "ib"
        prm = cm.default_params(gpu, int(n[i]), link)
        factor = cm.algo_factor(collective, np.array([n[i]]))
        want[i] = 2.0 * cm.params_time(nbytes[i] / 2.0, factor, prm)[0]
    np.testing.assert_allclose(t, want, rtol=1e-12, atol=0.0)
    assert tag == "alpha-beta (uncalibrated)" and t[1] > 0 and t[0] == t[3] == 0.0


def _a(*v: float) -> np.ndarray:
    return np.array([float(x) for x in v])


@pytest.mark.parametrize(
    ("model", "gpu", "quants"),
    [
        # the fp4 GEMMs of b200 and the fp8 KV decode of a100 have no fit: their steps' tags
        # are weaker than the other steps', so a shared tag would show
        ("llama-3.1-8b", "b200", [(0, 0), (2, 0), (0, 0)]),
        ("llama-3.1-8b", "a100", [(0, 1), (0, 0), (1, 0)]),
        ("qwen3-30b-a3b", "h100", [(1, 0), (1, 0), (0, 1)]),
        ("deepseek-r1", "h200", [(1, 1), (1, 1), (1, 1)]),
    ],
)
def test_price_steps_equals_price_step_of_each_step(
    model: str, gpu: str, quants: list[tuple[int, int]]
) -> None:
    """Steps priced together (rows end to end, one pricer call) equal each priced alone, bit for
    bit, provenance of each step included: a decode-only step, a mixed one, a prefill-only one
    (two candidates each, one of them pipelined: the pipeline hops are priced too)."""
    from planner.model.bundled import load_model
    from planner.perf.batch import parallel_arrays
    from planner.perf.opgraph import StepMix
    from planner.perf.pricer import default_pricer
    from planner.perf.step import price_step, price_steps

    m, g = load_model(model), get_gpu(gpu)
    moe = m.moe is not None
    tp, ep = (_a(8, 4), _a(8, 4)) if moe else (_a(1, 2), _a(1, 1))
    pars = [
        parallel_arrays(g, tp, _a(1, 2), _a(1, 1), ep, _a(wq, wq), _a(kv, kv)) for wq, kv in quants
    ]
    mixes = [
        StepMix(_a(32, 1), _a(1500, 300), _a(0, 0), _a(0, 0), _a(0, 0)),
        StepMix(_a(32, 4), _a(1500, 300), _a(2048, 100), _a(1000, 100), _a(500, 0)),
        StepMix(_a(0, 0), _a(0, 0), _a(8192, 1), _a(8192, 1), _a(0, 0)),
    ]
    pricer = default_pricer(g)
    kw = {"kernel_scale": 1.1, "overhead_s": 2e-3, "seq_overhead_s": 1e-5}
    alone = [price_step(m, p, s, pricer, **kw) for p, s in zip(pars, mixes, strict=True)]
    together = price_steps(m, list(zip(pars, mixes, strict=True)), pricer, **kw)
    for a, b in zip(alone, together, strict=True):
        assert np.array_equal(a.time_s, b.time_s)
        assert np.array_equal(a.by_kind_s, b.by_kind_s)
        assert a.provenance == b.provenance
        assert [t for t, _ in a.by_source_s] == [t for t, _ in b.by_source_s]
        for (_, x), (_, y) in zip(a.by_source_s, b.by_source_s, strict=True):
            assert np.array_equal(x, y)
    if gpu in ("b200", "a100"):
        assert len({c.provenance for c in alone}) > 1


def test_price_ops_blocks_must_split_every_op_evenly() -> None:
    from planner.perf.opgraph import Op
    from planner.perf.pricer import default_pricer

    op = Op("x", "comm", "comm", 1.0, np.zeros(3), np.ones(3), 0.0, 1.0, "all_reduce", 2.0)
    pricer = default_pricer(get_gpu("h200"))
    assert len(pricer.price_ops([op, op], blocks=3)) == 6
    with pytest.raises(ValueError, match="equal blocks"):
        pricer.price_ops([op], blocks=2)


def test_price_steps_of_different_candidate_counts_are_priced_one_by_one() -> None:
    from planner.model.bundled import load_model
    from planner.perf.batch import parallel_arrays
    from planner.perf.opgraph import StepMix
    from planner.perf.pricer import default_pricer
    from planner.perf.step import price_step, price_steps

    m, g = load_model("llama-3.1-8b"), get_gpu("h100")
    one = parallel_arrays(g, _a(2), _a(1), _a(1), _a(1), _a(0), _a(0))
    three = parallel_arrays(
        g, _a(1, 2, 4), _a(1, 1, 1), _a(1, 1, 1), _a(1, 1, 1), *[_a(0, 1, 0)] * 2
    )
    steps = [
        (one, StepMix(_a(8), _a(900), _a(0), _a(0), _a(0))),
        (three, StepMix(_a(0, 0, 0), _a(0, 0, 0), _a(512, 64, 8), _a(512, 64, 8), _a(0, 0, 0))),
    ]
    pricer = default_pricer(g)
    for (p, s), got in zip(steps, price_steps(m, steps, pricer), strict=True):
        want = price_step(m, p, s, pricer)
        assert np.array_equal(got.time_s, want.time_s) and got.provenance == want.provenance
