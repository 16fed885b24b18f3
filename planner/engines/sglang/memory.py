"""SGLang's KV pool and chunk defaults (``python/sglang/srt/server_args.py``), for replaying
measured launches at their defaults (``planner.engines.kv_pool``) and for the chunk a
measured row ran at."""

from __future__ import annotations

import math

import numpy as np

from planner.perf.memory import MIB, Num

SIZES: tuple[tuple[float, int, int, int], ...] = (
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 2048, 24, 80),
    (60 * 1024, 4096, 32, 160),
    (160 * 1024, 8192, 256, 512),
    (math.inf, 16384, 512, 512),
)
"""SGLang (>= 0.5.3) defaults by GPU memory: (below this many MiB, ``chunked_prefill_size``,
``cuda_graph_max_bs`` at tp_size < 4, at tp_size >= 4); ``_handle_gpu_memory_settings`` of
python/sglang/srt/server_args.py (CUDA GPUs; the NPU rows left out)."""
RESERVE_GIB_052: tuple[tuple[float, float, float], ...] = (
    (35 * 1024, 2.8, 0.1),
    (90 * 1024, 9.5, 0.5),
    (160 * 1024, 12.0, 0.5),
    (math.inf, 32.0, 0.0),
)
"""SGLang <= 0.5.2's reserve by GPU memory: (below this many MiB, GiB, GiB per GPU of
tp_size x pp); ``__post_init__`` of python/sglang/srt/server_args.py."""
CHUNKS_052: tuple[tuple[float, int], ...] = (
    (35 * 1024, 2048),
    (160 * 1024, 8192),
    (math.inf, 16384),
)
"""SGLang <= 0.5.2's ``chunked_prefill_size`` default by GPU memory: (below this many MiB,
tokens); ``ServerArgs.__post_init__`` of python/sglang/srt/server_args.py in the 0.5.0rc0,
0.5.1.post1 and 0.5.2 wheels ("A10, L40, 4090" / "H100, H200, A100, H20" / "B200, MI300")."""


def _by_memory(table: tuple[tuple[float, ...], ...], mib: float) -> tuple[float, ...]:
    """The first row of a by-memory ``table`` whose limit (its first value, MiB) lies above
    ``mib``."""
    return next(row for row in table if mib < row[0])


def chunked_prefill(memory_bytes: float, before_053: bool = False) -> int:
    """SGLang's default ``--chunked-prefill-size`` (tokens a prefill step takes, whole worker) on
    a GPU of ``memory_bytes`` (as nvidia-smi reports it: ``get_device_memory_capacity`` reads
    ``memory.total``, the smallest GPU), from python/sglang/srt/server_args.py of the PyPI wheels:
    0.5.3, 0.5.5.post2, 0.5.6.post2, 0.5.8, 0.5.8.post1, 0.5.9 ``_handle_gpu_memory_settings``
    (``SIZES``: 2048 below 35 GiB, 4096 below 60 GiB, 8192 below 160 GiB, else 16384;
    0.5.23 keeps the rule from 35 GiB up, ``srt/arg_groups/memory_hook.py``); with
    ``before_053`` (0.5.0rc0 to 0.5.2, ``__post_init__``) ``CHUNKS_052``, which has no
    60 GiB step. Neither depends on TP or the model. With DP attention SGLang divides it by the
    DP size per rank (``chunked_prefill_size // dp_size``), so the worker's step still takes
    this many tokens."""
    mib = memory_bytes / MIB
    return int(_by_memory(CHUNKS_052 if before_053 else SIZES, mib)[1])


def mem_fraction(memory_bytes: float, tp: Num, pp: Num, dp: Num) -> np.ndarray:
    """SGLang's default ``mem_fraction_static`` ((weights + KV pool) / device memory), versions
    0.5.3 to 0.5.9 (python/sglang/srt/server_args.py ``_handle_gpu_memory_settings`` of the
    0.5.3, 0.5.4, 0.5.5.post2 and 0.5.9 wheels, identical here). Reserve, MiB: 512
    + 1.5 x max(chunked prefill, 2048) + 2 x ``cuda_graph_max_bs`` + 1024 x tp_size x pp / 8,
    + 3 x graph bs x dp (+ 1.5 x graph bs x dp above 300) with DP attention, at least 10 GiB on
    GPUs over 60 GiB; fraction = round((memory - reserve) / memory, 3). SGLang's ``tp_size`` is
    every GPU of a worker's stage (attention TP x attention DP); speculative decoding and
    piecewise CUDA graphs are off by default. Memory as nvidia-smi reports it, MiB."""
    mib = memory_bytes / MIB
    sgl_tp = np.asarray(tp) * dp
    _, chunk, small_bs, big_bs = _by_memory(SIZES, mib)
    graph_bs = np.where(sgl_tp >= 4, big_bs, small_bs)
    reserve = 512 + 1.5 * max(chunk, 2048) + 2 * graph_bs + 1024 * sgl_tp * pp / 8
    dp_attention = np.asarray(dp) > 1
    reserve = reserve + dp_attention * graph_bs * dp * (3 + 1.5 * (graph_bs > 300))
    if mib > 60 * 1024:
        reserve = np.maximum(reserve, 10 * 1024)
    return np.asarray(np.round((mib - reserve) / mib, 3))


def mem_fraction_052(memory_bytes: float, tp: Num, pp: Num, dp: Num) -> np.ndarray:
    """SGLang <= 0.5.2's default ``mem_fraction_static`` (python/sglang/srt/server_args.py
    ``__post_init__`` of the 0.5.1.post1 and 0.5.2 wheels): a reserve by GPU memory
    (``RESERVE_GIB_052``) + 4 GiB with DP attention."""
    mib = memory_bytes / MIB
    gpus = np.asarray(tp) * dp * pp
    _, base, per_gpu = _by_memory(RESERVE_GIB_052, mib)
    reserve = (base + per_gpu * gpus + 4 * (np.asarray(dp) > 1)) * 1024
    return np.asarray(np.round((mib - reserve) / mib, 3))
