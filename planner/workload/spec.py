"""Workload spec: ISL/OSL (fixed, distribution or trace), load (closed or open loop), options.

A workload is what the clients send: prompt (ISL) and answer (OSL) lengths in tokens, either a
closed loop of ``concurrency`` clients (each sends its next request when the last one finished, as
benchmark tools run) or an open loop at ``rate_per_s`` requests/s (Poisson, or gamma-distributed
gaps with coefficient of variation ``arrival_cv`` for bursty traffic). Options that change the
answer: prefix-cache hit fraction (skips that share of prefill compute) and speculative decoding
(tokens accepted per target step = 1 + acceptance·draft_len, Leviathan et al. 2023, eq. 1 with the
linear approximation for small acceptance). A closed-loop benchmark run may name its request count
``bench_requests`` P (``vllm bench serve --num-prompts``): its N clients start together, so the run
is W = P/N waves of which the first arrives in lockstep; without it the serving model uses the
engine's fitted lockstep share (``burst_fraction``, the unrecorded protocol of the calibration data)
when ``startup_wave`` asks for it. Without either, latencies are those of the steady state.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hardware.errors import PlannerInputError
from hardware.input_files import check_number, csv_rows

_FROZEN = ConfigDict(frozen=True, extra="forbid")
LengthDist = Literal["fixed", "uniform", "normal", "lognormal"]
SAMPLE_SEED = 0
"""Fixed seed: sampled lengths are deterministic for a given spec."""
SAMPLE_COUNT = 4096
"""Draws used to summarise a length distribution (mean, second moment, quantiles)."""


class LengthSpec(BaseModel):
    """A token-length distribution (ISL or OSL)."""

    model_config = _FROZEN
    mean: float = Field(gt=0, description="Mean length, tokens.")
    dist: LengthDist = Field(default="fixed", description="Shape of the distribution.")
    cv: float = Field(default=0.0, ge=0, le=4, description="Coefficient of variation (std/mean).")
    min_tokens: int = Field(default=1, ge=1, description="Lengths are clipped to at least this.")
    samples: tuple[int, ...] = Field(
        default=(), description="Explicit lengths (trace); overrides dist."
    )

    def draw(self, n: int = SAMPLE_COUNT, seed: int = SAMPLE_SEED) -> np.ndarray:
        """``n`` lengths (tokens, float array)."""
        rng = np.random.default_rng(seed)
        if self.samples:
            return rng.choice(np.asarray(self.samples, dtype=float), size=n)
        if self.dist == "fixed" or self.cv == 0:
            return np.full(n, float(self.mean))
        if self.dist == "uniform":
            half = self.mean * self.cv * np.sqrt(3.0)
            x = rng.uniform(self.mean - half, self.mean + half, n)
        elif self.dist == "normal":
            x = rng.normal(self.mean, self.mean * self.cv, n)
        else:
            sigma2 = np.log1p(self.cv**2)
            x = rng.lognormal(np.log(self.mean) - sigma2 / 2, np.sqrt(sigma2), n)
        return np.maximum(np.round(x), self.min_tokens)

    @property
    def second_moment(self) -> float:
        """E[L^2], tokens^2."""
        x = self.draw()
        return float(np.mean(x * x))


class SpecDecode(BaseModel):
    """Speculative decoding: a draft (``method``) proposes ``draft_len`` tokens per iteration, the
    target verifies them in one step; position i is kept with probability ``acceptance[i]`` when
    every position before it was (``planner.perf.spec_decode``)."""

    model_config = _FROZEN
    method: Literal["mtp", "eagle3", "draft"] = Field(
        default="mtp", description="Draft: the checkpoint's MTP head, an EAGLE-3 head or a model."
    )
    draft_len: int = Field(ge=1, le=16, description="Tokens proposed per iteration (draft steps).")
    acceptance: tuple[float, ...] = Field(
        min_length=1,
        max_length=16,
        description="Per-position acceptance probabilities; one value means every position.",
    )
    draft_cost_ratio: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="One draft step's time / one target decode step's, from the parameters each "
        "touches per token (``spec_decode.draft_cost_ratio``).",
    )
    draft_model: str = Field(default="", description="Draft checkpoint (method 'draft').")
    source: str = Field(default="", description="Where the acceptance came from.")

    @field_validator("acceptance")
    @classmethod
    def _probabilities(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 <= a <= 1.0 for a in v):
            raise ValueError("acceptance probabilities must lie in [0, 1]")
        return v

    @property
    def tokens_per_step(self) -> float:
        """Expected tokens emitted per iteration: E = 1 + sum_i prod_{j<=i} a_j."""
        a = list(self.acceptance)[: self.draft_len]
        a += [a[-1]] * (self.draft_len - len(a))
        e, keep = 1.0, 1.0
        for x in a:
            keep *= x
            e += keep
        return e

    @property
    def verify_tokens(self) -> int:
        """Tokens per sequence of the verify step (the draft's and the target's own)."""
        return self.draft_len + 1


class Workload(BaseModel):
    """What clients send and how fast."""

    model_config = _FROZEN
    isl: LengthSpec = Field(description="Prompt (input) length per request, tokens.")
    osl: LengthSpec = Field(description="Answer (output) length per request, tokens.")
    concurrency: int | None = Field(
        default=None, ge=1, description="Closed loop: concurrent clients."
    )
    rate_per_s: float | None = Field(
        default=None, gt=0, description="Open loop: mean arrival rate, requests/s."
    )
    arrival: Literal["poisson", "gamma"] = Field(
        default="poisson", description="Open-loop arrival process."
    )
    arrival_cv: float = Field(
        default=1.0,
        gt=0,
        le=10,
        description="Gamma arrivals: CV of inter-arrival gaps (1 = Poisson).",
    )
    prefix_hit: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="Fraction of prompt tokens served from the prefix cache.",
    )
    spec_decode: SpecDecode | None = Field(
        default=None, description="Speculative decoding; None: off."
    )
    max_isl: int | None = Field(
        default=None,
        ge=1,
        description="Longest prompt the deployment must accept, tokens (--max-isl); None: "
        "not stated.",
    )
    max_osl: int | None = Field(
        default=None,
        ge=1,
        description="Longest answer the deployment must accept, tokens (--max-osl); None: "
        "not stated.",
    )
    bench_requests: int | None = Field(
        default=None,
        ge=1,
        description="Closed loop: requests the benchmark run sends in all (its N clients start "
        "together).",
    )
    startup_wave: bool = Field(
        default=False,
        description="Closed loop: price the benchmark run's lockstep start-up wave "
        "with the engine's fitted share (replaying benchmarks of an unrecorded protocol); "
        "default: steady state.",
    )

    @model_validator(mode="after")
    def _one_load(self) -> Workload:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise PlannerInputError(
                "--concurrency/--rate", "give exactly one of --concurrency N or --rate R"
            )
        if self.bench_requests is not None:
            if self.concurrency is None:
                raise PlannerInputError(
                    "--bench-requests",
                    "applies to a closed loop only: give --concurrency N, not --rate",
                )
            if self.bench_requests < self.concurrency:
                raise PlannerInputError(
                    "--bench-requests",
                    f"must be >= --concurrency ({self.concurrency}): every client sends at least "
                    "one request",
                )
        return self

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None

    @property
    def arrival_cv2(self) -> float:
        """Squared CV of inter-arrival times (1 for Poisson)."""
        return 1.0 if self.arrival == "poisson" else self.arrival_cv**2


def fixed(
    isl: int, osl: int, *, concurrency: int | None = None, rate_per_s: float | None = None
) -> Workload:
    """Fixed ISL/OSL workload (the common benchmark case)."""
    return Workload(
        isl=LengthSpec(mean=isl),
        osl=LengthSpec(mean=osl),
        concurrency=concurrency,
        rate_per_s=rate_per_s,
    )


def read_trace(path: Path) -> tuple[LengthSpec, LengthSpec]:
    """ISL/OSL from a CSV trace with columns ``isl`` and ``osl`` (one request per row)."""
    isl: list[int] = []
    osl: list[int] = []
    for line, row in csv_rows(path, "trace CSV", "--trace"):
        if "isl" not in row or "osl" not in row:
            raise PlannerInputError("--trace", f"{path} needs a header with columns isl,osl")
        isl.append(_trace_length(row["isl"], f"--trace {path}:{line}: isl"))
        osl.append(_trace_length(row["osl"], f"--trace {path}:{line}: osl"))
    if not isl:
        raise PlannerInputError(
            "--trace", f"{path} needs a header with columns isl,osl and at least one row"
        )
    return (
        LengthSpec(mean=float(np.mean(isl)), samples=tuple(isl)),
        LengthSpec(mean=float(np.mean(osl)), samples=tuple(osl)),
    )


MAX_TRACE_TOKENS = 10_000_000
"""Longest prompt or answer accepted from a trace, tokens."""


def _trace_length(cell: str, where: str) -> int:
    try:
        val = float(cell)
    except ValueError:
        raise PlannerInputError(where, f"must be a number of tokens, got {cell[:40]!r}") from None
    return round(check_number(val, where, 1, MAX_TRACE_TOKENS))


MAX_LENGTH_FACTOR = 2.0
"""Without --max-isl / --max-osl a deployment must accept prompts and answers up to this many
times the mean (then capped at the model's maximum positions): the emitted maximum model length is
what the engine refuses above, so the mean alone would refuse half of a varied workload."""


def max_lengths(
    isl: float,
    osl: float,
    max_isl: int | None,
    max_osl: int | None,
    limit: int,
    model: str,
) -> tuple[int, int]:
    """The longest prompt and answer a deployment must accept (tokens): ``--max-isl`` /
    ``--max-osl`` where given, else ``MAX_LENGTH_FACTOR`` x the mean ``isl`` / ``osl``, such
    that one request of both fits the model's ``limit`` (its maximum positions). A stated value
    above the limit, below the mean, or a stated pair longer than the limit together is refused
    naming the flag; a default is shortened to the room the limit leaves."""
    for flag, given, mean in (("--max-isl", max_isl, isl), ("--max-osl", max_osl, osl)):
        if given is not None and given > limit:
            raise PlannerInputError(
                flag, f"{given:,} tokens is above {model}'s maximum positions ({limit:,} tokens)"
            )
        if given is not None and given < mean:
            raise PlannerInputError(flag, f"{given:,} tokens is below the mean ({mean:,.0f})")
    if isl + osl > limit:
        raise PlannerInputError(
            "--isl/--osl",
            f"a mean request of {isl + osl:,.0f} tokens is above {model}'s maximum positions "
            f"({limit:,} tokens)",
        )
    long_isl = max_isl or min(math.ceil(MAX_LENGTH_FACTOR * isl), limit)
    long_osl = max_osl or min(math.ceil(MAX_LENGTH_FACTOR * osl), limit)
    if long_isl + long_osl <= limit:
        return long_isl, long_osl
    if max_isl is not None and max_osl is not None:
        raise PlannerInputError(
            "--max-isl/--max-osl",
            f"{max_isl:,} + {max_osl:,} tokens is above {model}'s maximum positions "
            f"({limit:,} tokens)",
        )
    if max_isl is not None or max_osl is not None:  # the stated one stays, the other gets the rest
        stated, mean = (max_isl, osl) if max_isl is not None else (max_osl, isl)
        assert stated is not None
        rest = limit - stated
        if rest < mean:
            flag = "--max-isl" if max_isl is not None else "--max-osl"
            raise PlannerInputError(
                flag,
                f"{stated:,} tokens leaves {rest:,} of {model}'s {limit:,} positions, less "
                f"than the mean {'answer' if max_isl is not None else 'prompt'} ({mean:,.0f})",
            )
        return (stated, rest) if max_isl is not None else (rest, stated)
    share = long_isl / (long_isl + long_osl)  # both defaults: shorten both in proportion
    out_isl = max(math.ceil(isl), math.floor(limit * share))
    return out_isl, limit - out_isl
