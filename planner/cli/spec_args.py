"""The speculative-decoding flags of ``estimate``, ``plan`` and ``capacity``, checked at the input
boundary (exit 2 naming the flag) and turned into :class:`SpecDecode` settings."""

from __future__ import annotations

import argparse

from planner.errors import PlannerInputError
from planner.model.bundled import find_bundled, load_model
from planner.model.spec import ModelSpec
from planner.perf.spec_decode import (
    METHOD_DEFAULTS,
    SPEC_METHODS,
    check_method,
    default_acceptance,
    draft_cost_ratio,
)
from planner.workload.spec import SpecDecode

MAX_DRAFT_LEN = 16


def add_spec_args(p: argparse.ArgumentParser) -> None:
    """``--spec-method``, ``--spec-draft-model``, ``--spec-draft-len``, ``--spec-acceptance``."""
    defaults = "; ".join(
        f"{k}: {d.draft_len} tokens at {d.acceptance[0]} ({d.source})"
        for k, d in METHOD_DEFAULTS.items()
    )
    p.add_argument(
        "--spec-method",
        choices=SPEC_METHODS,
        default="none",
        help="speculative decoding: none, mtp (the checkpoint's MTP head), eagle3 (an EAGLE-3 "
        "head) or draft (a separate model, --spec-draft-model); plan decides between none and "
        "the method's draft lengths (default: %(default)s)",
    )
    p.add_argument(
        "--spec-draft-model",
        default="",
        help="draft model of --spec-method draft: a bundled model sharing the target's vocabulary",
    )
    p.add_argument(
        "--spec-draft-len",
        type=str,
        default="",
        help=f"tokens proposed per step, 1-{MAX_DRAFT_LEN} (default: the method's; plan "
        f"searches the method's lengths). Defaults: {defaults}".replace("%", "%%"),
    )
    p.add_argument(
        "--spec-acceptance",
        type=str,
        default="",
        help="per-position acceptance probabilities, a comma list (one number: every position; "
        "default: the method's on the model family, see docs/speculative.md)",
    )


def _draft_len(text: str) -> int | None:
    if not text:
        return None
    try:
        k = int(text)
    except ValueError:
        raise PlannerInputError("--spec-draft-len", f"{text!r} is not an integer") from None
    if not 1 <= k <= MAX_DRAFT_LEN:
        raise PlannerInputError("--spec-draft-len", f"{k} is outside 1-{MAX_DRAFT_LEN}")
    return k


def _acceptance(text: str) -> tuple[float, ...] | None:
    if not text:
        return None
    out = []
    for part in text.split(","):
        try:
            a = float(part)
        except ValueError:
            raise PlannerInputError("--spec-acceptance", f"{part!r} is not a number") from None
        if not 0.0 <= a <= 1.0:
            raise PlannerInputError("--spec-acceptance", f"{a} is outside 0-1")
        out.append(a)
    if len(out) > MAX_DRAFT_LEN:
        raise PlannerInputError("--spec-acceptance", f"more than {MAX_DRAFT_LEN} positions")
    return tuple(out)


def _draft(ref: str) -> ModelSpec | None:
    if not ref:
        return None
    if find_bundled(ref) is None:
        raise PlannerInputError(
            "--spec-draft-model", f"{ref!r} is not a bundled model (see `planner models`)"
        )
    return load_model(ref)


def spec_options(args: argparse.Namespace, m: ModelSpec) -> tuple[SpecDecode, ...]:
    """The speculative-decoding settings the flags allow on ``m``: one per draft length (the
    given one, else the method's search lengths); empty for ``--spec-method none``."""
    method = args.spec_method
    k, acc = _draft_len(args.spec_draft_len), _acceptance(args.spec_acceptance)
    draft = _draft(args.spec_draft_model)
    if method == "none":
        if k is not None or acc is not None or draft is not None:
            raise PlannerInputError(
                "--spec-method",
                "none; --spec-draft-len/--spec-acceptance/--spec-draft-model need a method",
            )
        return ()
    check_method(m, method, draft, args.spec_draft_model)
    source = "--spec-acceptance"
    if acc is None:
        acc, source = default_acceptance(method, m.family)
    ratio = draft_cost_ratio(m, method, draft)
    lengths = (k,) if k is not None else METHOD_DEFAULTS[method].lengths
    return tuple(
        SpecDecode(
            method=method,
            draft_len=n,
            acceptance=acc,
            draft_cost_ratio=min(ratio, 1.0),
            draft_model=args.spec_draft_model,
            source=source,
        )
        for n in lengths
    )


def spec_decode_of(args: argparse.Namespace, m: ModelSpec) -> SpecDecode | None:
    """The one setting ``estimate`` prices: the given draft length, else the method's default."""
    options = spec_options(args, m)
    if not options:
        return None
    if args.spec_draft_len:
        return options[0]
    k = METHOD_DEFAULTS[args.spec_method].draft_len
    return next(o for o in options if o.draft_len == k)
