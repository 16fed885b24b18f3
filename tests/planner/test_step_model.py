"""``planner.step_model``'s roofline pricer prices collectives with kernels_db's alpha-beta and its
unfitted defaults (``kernels_db.comm.default_params``): one home for the default comm constants."""

from __future__ import annotations

import numpy as np
import pytest

from hardware.catalog import get_gpu
from kernels_db import comm as cm
from planner.opgraph import Collective, Op
from planner.step_model import RooflinePricer


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
