"""Every model id in the shared data sets resolves to a bundled checkpoint of its own identity and
quantization, or is refused by name with a reason (``planner/model/configs/refused.yaml``)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from hardware.errors import PlannerInputError
from planner.model.bundled import bundled_models, find_bundled, load_model, refusal, refused_models
from planner.replay_e2e.mlperf import DATASETS, _benchmark_model
from planner.replay_e2e.rows import resolve_model, unresolved_model_reason

E2E = Path(__file__).resolve().parents[3].parent / "shared/validation/e2e"
MODEL_COLUMNS = {
    "trtllm_perf_overview.csv": "model",
    "blog_reports.csv": "model",
    "splitwise_perf_model.csv": "model",
    "silicon_measured.csv": "model_path",
    "silicon_measured_b200.csv": "model_path",
    "silicon_reference_subset.csv": "model_path",
}


def _ids() -> set[tuple[str, str]]:
    if not E2E.is_dir():
        pytest.skip(f"shared validation data not found at {E2E}")
    out: set[tuple[str, str]] = set()
    for name in sorted(p.name for p in E2E.glob("*.csv")):
        with (E2E / name).open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        if name.startswith("mlperf_"):  # benchmark names: the checkpoint each benchmark runs
            bench = {_benchmark_model(r["benchmark"]) for r in rows}
            out |= {(name, DATASETS[b].checkpoint) for b in bench}
            continue
        col = MODEL_COLUMNS[name]  # a new file must say where its model ids are
        out |= {(name, r[col].strip()) for r in rows if r[col].strip()}
    return out


def _quant_word(text: str) -> str | None:
    low = text.lower()
    if re.search(r"nvfp4|mxfp4|\bfp4\b", low):
        return "fp4"
    return "fp8" if re.search(r"fp8", low) else None


@pytest.mark.validation
def test_every_model_id_of_the_shared_data_resolves_or_is_refused_by_name() -> None:
    resolved, refused, unknown = {}, {}, []
    for name, ident in sorted(_ids()):
        found = resolve_model(ident)
        if found is not None:
            resolved[ident] = found
        elif refusal(ident) is not None:
            refused[ident] = refusal(ident)
            assert unresolved_model_reason(ident) == "refused_model"
        else:
            unknown.append(f"{name}: {ident!r}")
    assert not unknown, unknown
    assert {"bloom-176b", "Falcon 180B"} <= set(refused)
    for ident, bundled in resolved.items():
        spec = load_model(bundled.key)
        assert spec.hf_id == bundled.hf_id  # its own identity
        want = _quant_word(ident)
        if want is not None:  # a quantized checkpoint resolves to that quantization
            assert want in spec.quant.weight_format.lower(), (ident, spec.quant.weight_format)
        else:
            assert _quant_word(bundled.hf_id) is None, (ident, bundled.hf_id)


def test_refused_names_are_refused_by_the_cli_loader_with_their_reason() -> None:
    for key, (reason, names) in refused_models().items():
        assert reason.strip() and names, key
        for name in names:
            assert find_bundled(name) is None, name  # never also a bundled checkpoint
            with pytest.raises(PlannerInputError, match="is refused"):
                load_model(name)


def test_refusals_do_not_shadow_bundled_names() -> None:
    for m in bundled_models().values():
        for name in (m.key, m.name, m.hf_id, *m.aliases):
            assert refusal(name) is None, name
