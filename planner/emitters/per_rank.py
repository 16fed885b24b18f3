"""Per-rank meanings of an engine's flags (each engine's ``per_rank.yaml``).

The plan's running-request slots, prefill chunk and CUDA-graph batch are per attention-DP rank
(``planner.perf.serving``: every rank schedules its own batch). Engines spell them differently:
vLLM's ``--max-num-seqs`` is per data-parallel engine, while SGLang's ``--max-running-requests``
counts the whole server and each rank gets ``value // dp_size``. A table per engine, citing the
engine's source, says which; the emitters convert the plan's per-rank values through it and the
tests read the emitted flags back through it.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hardware.input_files import read_packaged_yaml
from planner.engines import get_engine

_FROZEN = ConfigDict(frozen=True, extra="forbid")
PER_RANK_FILE = "per_rank.yaml"
PER_RANK_PARAMS = ("max_batch", "chunk", "cuda_graph_max")
"""Planner parameters whose value is per attention-DP rank."""


class PerRankEntry(BaseModel):
    """How one flag's value reaches each attention-DP rank."""

    model_config = _FROZEN
    param: str = Field(description="Planner parameter (flags.yaml ``param``).")
    flag: str = Field(description="The engine's spelling (a CLI flag or an LLM-API YAML key).")
    scope: Literal["rank", "server"] = Field(
        description="rank: each rank gets the value as written; server: the flag counts every "
        "attention-DP rank of the server and each gets value // dp."
    )
    unit: Literal["requests", "tokens"] = Field(
        description="What the value counts; a tokens-valued CUDA-graph size holds requests x "
        "(1 + speculative tokens)."
    )
    source: str = Field(description="The engine source (file@release) that sets the meaning.")


TIER_UNIT_BYTES: dict[str, float] = {"GiB": float(2**30), "GB": 1e9, "bytes": 1.0}
"""Bytes per unit of a KV-tier size flag."""


class TierEntry(BaseModel):
    """How a KV offload tier's size flag (host memory, SSD) maps to the plan's GiB per GPU."""

    model_config = _FROZEN
    param: str = Field(description="Planner parameter (flags.yaml ``param``).")
    flag: str = Field(description="The engine's spelling (a CLI flag or an LLM-API YAML key).")
    scope: Literal["rank", "engine"] = Field(
        description="rank: every GPU's process allocates the value as written; engine: the value "
        "is summed over the GPUs of one engine instance (its TP x PP ranks)."
    )
    unit: Literal["GiB", "GB", "bytes"] = Field(description="What the value counts.")
    integer: bool = Field(default=False, description="The flag takes a whole number.")
    source: str = Field(description="The engine source (file@release) that sets the meaning.")


class PerRankTable(BaseModel):
    """Every per-rank flag of one engine."""

    model_config = _FROZEN
    engine: str = Field(description="The engine's --backend name.")
    release: str = Field(description="The release the meanings were read at.")
    entries: tuple[PerRankEntry, ...] = Field(description="One entry per per-rank parameter.")
    kv_tiers: tuple[TierEntry, ...] = Field(
        default=(), description="KV offload tier size flags and what they count."
    )

    def tier(self, param: str) -> TierEntry:
        """The tier entry of ``param`` (an engine without one cannot size that tier)."""
        hits = [e for e in self.kv_tiers if e.param == param]
        assert len(hits) == 1, f"{self.engine} per_rank.yaml: {len(hits)} kv_tiers for {param}"
        return hits[0]

    def entry(self, param: str) -> PerRankEntry:
        """The entry of ``param`` (every engine covers all of ``PER_RANK_PARAMS``)."""
        hits = [e for e in self.entries if e.param == param]
        assert len(hits) == 1, f"{self.engine} per_rank.yaml: {len(hits)} entries for {param}"
        return hits[0]


@cache
def per_rank_table(engine: str) -> PerRankTable:
    """The engine's ``per_rank.yaml``, validated."""
    path = get_engine(engine).file(PER_RANK_FILE)
    return PerRankTable.model_validate(read_packaged_yaml(path))


def _graph_tokens(entry: PerRankEntry, spec_tokens: int) -> int:
    """Tokens per request of a decode step when the entry counts tokens (graph sizes)."""
    return 1 + spec_tokens if entry.unit == "tokens" and entry.param == "cuda_graph_max" else 1


def to_flag(entry: PerRankEntry, per_rank: int, dp: int, spec_tokens: int = 0) -> int:
    """The flag value that gives each of ``dp`` attention-DP ranks ``per_rank`` (requests or
    tokens as the plan counts them; ``spec_tokens`` draft tokens per decode step)."""
    value = per_rank * _graph_tokens(entry, spec_tokens)
    return value * dp if entry.scope == "server" else value


def from_flag(entry: PerRankEntry, value: int, dp: int, spec_tokens: int = 0) -> int:
    """What each of ``dp`` attention-DP ranks ends up with from the flag ``value`` (the inverse
    of :func:`to_flag`, with the engine's floor division)."""
    rank = value // dp if entry.scope == "server" else value
    return rank // _graph_tokens(entry, spec_tokens)


def engine_values(
    engine: str, values: dict[str, object], dp: int, spec_tokens: int = 0
) -> dict[str, object]:
    """``values`` with every per-rank parameter converted to the engine's flag value."""
    table = per_rank_table(engine)
    out = dict(values)
    for param in PER_RANK_PARAMS:
        raw = out.get(param)
        if isinstance(raw, int):
            out[param] = to_flag(table.entry(param), raw, dp, spec_tokens)
    return out


def tier_flag(entry: TierEntry, gib_per_gpu: float, engine_gpus: int) -> int | float:
    """The flag value that gives every GPU ``gib_per_gpu`` GiB of the tier (rounded down: the
    engine never gets more than the plan priced)."""
    gpus = engine_gpus if entry.scope == "engine" else 1
    value = gib_per_gpu * TIER_UNIT_BYTES["GiB"] * gpus / TIER_UNIT_BYTES[entry.unit]
    return int(value) if entry.integer else float(f"{value:.6g}")


def tier_gib_per_gpu(entry: TierEntry, value: float, engine_gpus: int) -> float:
    """GiB per GPU an emitted tier flag ``value`` gives (the inverse of :func:`tier_flag`)."""
    gpus = engine_gpus if entry.scope == "engine" else 1
    return value * TIER_UNIT_BYTES[entry.unit] / TIER_UNIT_BYTES["GiB"] / gpus
