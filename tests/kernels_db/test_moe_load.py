"""``kernels_db.moe_load``: the busiest EP rank's load under skewed routing, and the check of the
two ways to price it against fused-MoE tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.catalog import get_gpu
from hardware.errors import PlannerInputError
from kernels_db.lookup import KernelDB
from kernels_db.moe_load import SKEWED, compare, power_law_load, read_pairs, summary
from kernels_db.tools.moe_load_check import main


def test_one_rank_carries_the_mean_and_more_ranks_a_heavier_busiest_one() -> None:
    assert power_law_load(4096, 256, 8, 1) == 1.0
    loads = [power_law_load(4096, 256, 8, ep) for ep in (2, 4, 8, 16)]
    assert all(1.0 < a < b for a, b in zip(loads, loads[1:], strict=False))
    assert all(f <= ep for f, ep in zip(loads, (2, 4, 8, 16), strict=True))


def test_the_draw_is_seeded() -> None:
    assert power_law_load(1024, 128, 8, 8, seed=3) == power_law_load(1024, 128, 8, 8, seed=3)


def test_an_expert_takes_a_token_at_most_once() -> None:
    """With 8 tokens of top-8 over 16 experts the cap binds hard: no rank can hold more than its
    experts x tokens pairs, so the factor stays below that bound."""
    f = power_law_load(8, 16, 8, 2)
    assert 1.0 <= f <= (8 * 8) / (8 * 8 / 2)  # rank cap 8 experts x 8 tokens over mean 32


@pytest.mark.parametrize(("experts", "ep"), [(256, 3), (0, 1)])
def test_layouts_that_do_not_split_are_input_errors(experts: int, ep: int) -> None:
    with pytest.raises(PlannerInputError):
        power_law_load(64, experts, 8, ep)


def _write_tables(root: Path, db: KernelDB) -> None:
    """One table whose skewed rows take exactly the balanced layer's price at the busiest rank's
    tokens: ``T(f x n)`` recovers it, ``f x T(n)`` does not at weight-bound sizes."""
    rows = []
    for n in (1.0, 8.0, 64.0, 512.0, 4096.0):
        for ep in (2, 8):
            f = power_law_load(n, 128, 8, ep)
            t_n = float(
                db.moe(np.array([n]), 4096.0, 1536.0, 8.0, 128.0, float(ep), "bf16").seconds[0]
            )
            t_fn = float(
                db.moe(np.array([n * f]), 4096.0, 1536.0, 8.0, 128.0, float(ep), "bf16").seconds[0]
            )
            for dist, t in (("balanced", t_n), (SKEWED, t_fn)):
                rows.append(
                    {
                        "moe_dtype": "bfloat16",
                        "num_tokens": n,
                        "hidden_size": 4096,
                        "inter_size": 1536,
                        "topk": 8,
                        "num_experts": 128,
                        "moe_tp_size": 1,
                        "moe_ep_size": ep,
                        "distribution": dist,
                        "latency": t * 1e3,
                    }
                )
    folder = root / "h200_sxm" / "moe" / "sglang" / "0.0.0"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "moe_perf.parquet")


def test_pricing_the_busiest_rank_as_tokens_recovers_tables_made_that_way(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    db = KernelDB.for_gpu(get_gpu("h200"))
    _write_tables(tmp_path, db)
    pairs = read_pairs(tmp_path, "h200_sxm", per_table=100)
    assert len(pairs) == 10 and set(pairs["engine"]) == {"sglang/0.0.0"}
    out = summary(compare(pairs, db))
    overall = out[(out["engine"] == "all") & (out["tokens_range"] == "all")].iloc[0]
    assert overall["err_t_of_fn"] < 1e-9 < overall["err_time_x_f"]
    assert int(overall["n"]) == 10


def test_a_missing_folder_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--aic-data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --aic-data:") and len(err.strip().splitlines()) == 1
