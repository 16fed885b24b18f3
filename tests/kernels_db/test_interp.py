"""Grid interpolation with holes: exact on nodes, multilinear in complete cells, line rule at holes,
and leave-one-out equal to a lookup in the table less that row."""

from __future__ import annotations

import numpy as np

from kernels_db.interp import Partition, interp_space, loo_log_ratio, size_coords


def _triangle() -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A decode-like sweep: batch x kv_len without the large corner; value linear in log sizes."""
    b, kv = np.meshgrid([1, 8, 32, 128, 512], [128, 1024, 4096, 16384, 65536], indexing="ij")
    keep = (b * kv <= 2**21).ravel()
    keys = {
        "batch": b.ravel()[keep],
        "kv_len": kv.ravel()[keep],
        "heads": np.full(keep.sum(), 32),
        "kv_heads": np.full(keep.sum(), 8),
        "head_dim": np.full(keep.sum(), 128),
        "kv_dtype": np.full(keep.sum(), "bf16", dtype=object),
    }
    c = size_coords("attention_decode", keys, int(keep.sum()))
    return keys, 0.3 * c[:, 0] - 0.2 * c[:, 1]


def test_loo_equals_lookup_without_the_row() -> None:
    keys, ratio = _triangle()
    coords = interp_space("attention_decode", keys, ratio.size)[1]
    loo = loo_log_ratio("attention_decode", keys, ratio)
    assert np.isfinite(loo).sum() >= 5
    for i in range(ratio.size):
        keep = np.arange(ratio.size) != i
        r, inside, exact = Partition(coords[keep], ratio[keep]).query(coords[i : i + 1])
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
    q = np.log1p(
        np.array([[4.0, 2000.0], [1000.0, 2000.0], [8.0, 1e6]])
    )  # cell, beyond batch, beyond kv
    r, inside, exact = part.query(q)
    assert list(inside) == [True, False, False] and not exact.any()
    assert abs(r[0] - (0.3 * q[0, 0] - 0.2 * q[0, 1])) < 0.05  # linear in log1p up to the +1 offset


def test_decode_head_configurations_share_one_grid() -> None:
    """GQA decode rows with equal batch x kv_heads and kv_len sit on one node (averaged; leaving one
    out leaves the other), multi-head rows keep their own grid."""
    keys = {
        "batch": np.array([8, 1, 8, 1]),
        "kv_len": np.array([1024] * 4),
        "heads": np.array([8, 32, 8, 32]),
        "kv_heads": np.array([1, 8, 8, 32]),
        "head_dim": np.array([128] * 4),
        "kv_dtype": np.array(["bf16"] * 4, dtype=object),
    }
    labels, coords = interp_space("attention_decode", keys, 4)
    assert labels[0] == labels[1] != labels[2] and np.allclose(coords[0], coords[1])
    ratio = np.array([0.1, 0.3, 0.0, 0.0])
    part = Partition(coords[:2], ratio[:2])
    assert np.allclose(part.loo(), [0.3, 0.1])
    r, inside, exact = part.query(coords[:1])
    assert inside[0] and exact[0] and abs(r[0] - 0.2) < 1e-12


def test_prefill_pools_batch_times_heads_at_one_group_size() -> None:
    """Prefill rows with equal batch x heads, seq and group size share a node;
    other group sizes not."""
    keys = {
        "batch": np.array([4, 1, 4]),
        "seq": np.array([512] * 3),
        "prior": np.array([0] * 3),
        "heads": np.array([8, 32, 16]),
        "kv_heads": np.array([1, 4, 16]),
        "head_dim": np.array([128] * 3),
        "dtype": np.array(["bf16"] * 3, dtype=object),
        "kv_dtype": np.array(["bf16"] * 3, dtype=object),
        "window": np.array([0] * 3),
    }
    labels, coords = interp_space("attention_prefill", keys, 3)
    assert labels[0] == labels[1] != labels[2]
    assert np.allclose(coords[0], coords[1])
