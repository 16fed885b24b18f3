"""Grid interpolation with holes: exact on nodes, multilinear in complete cells, line rule at holes,
and leave-one-out equal to a lookup in the table less that row."""

from __future__ import annotations

import numpy as np

from kernels_db.interp import Partition, loo_log_ratio, size_coords


def _triangle() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A decode-like sweep: batch x kv_len without the large corner; value linear in log sizes."""
    b, kv = np.meshgrid([1, 8, 32, 128, 512], [128, 1024, 4096, 16384, 65536], indexing="ij")
    keep = (b * kv <= 2**21).ravel()
    keys = {"batch": b.ravel()[keep], "kv_len": kv.ravel()[keep], "heads": np.full(keep.sum(), 32),
            "kv_heads": np.full(keep.sum(), 8), "head_dim": np.full(keep.sum(), 128),
            "kv_dtype": np.full(keep.sum(), "bf16", dtype=object)}
    c = size_coords("attention_decode", keys, int(keep.sum()))
    return keys, 0.3 * c[:, 0] - 0.2 * c[:, 1]


def test_loo_equals_lookup_without_the_row() -> None:
    keys, ratio = _triangle()
    coords = size_coords("attention_decode", keys, ratio.size)
    loo = loo_log_ratio("attention_decode", keys, ratio)
    assert np.isfinite(loo).sum() >= 5
    for i in range(ratio.size):
        keep = np.arange(ratio.size) != i
        r, inside, exact = Partition(coords[keep], ratio[keep]).query(coords[i:i + 1])
        assert not exact[0]
        assert inside[0] == np.isfinite(loo[i])
        if inside[0]:
            assert abs(r[0] - loo[i]) < 1e-12


def test_nodes_cells_and_outside() -> None:
    keys, ratio = _triangle()
    coords = size_coords("attention_decode", keys, ratio.size)
    part = Partition(coords, ratio)
    r, inside, exact = part.query(coords)
    assert inside.all() and exact.all() and np.allclose(r, ratio)
    q = np.log1p(np.array([[4.0, 2000.0], [1000.0, 2000.0], [8.0, 1e6]]))  # cell, beyond batch, beyond kv
    r, inside, exact = part.query(q)
    assert list(inside) == [True, False, False] and not exact.any()
    assert abs(r[0] - (0.3 * q[0, 0] - 0.2 * q[0, 1])) < 0.05  # linear in log1p up to the +1 offset
