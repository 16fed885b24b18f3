"""Free-text accelerator labels of the shared data sets resolve through the catalog's aliases."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hardware.catalog import resolve_label
from hardware.errors import PlannerInputError

E2E = Path(__file__).resolve().parents[2].parent / "shared/validation/e2e"
LABEL_COLUMNS = {
    "trtllm_perf_overview.csv": "gpu",
    "blog_reports.csv": "gpu",
    "mlperf_v4.1_llm.csv": "accelerator",
    "splitwise_perf_model.csv": "hardware",
    "silicon_measured.csv": "system",
    "silicon_reference_subset.csv": "system",
}


def _labels() -> set[str]:
    if not E2E.is_dir():
        pytest.skip(f"shared validation data not found at {E2E}")
    out: set[str] = set()
    for name, col in LABEL_COLUMNS.items():
        with (E2E / name).open(newline="") as fh:
            out |= {r[col] for r in csv.DictReader(fh) if r[col].strip()}
    return out


@pytest.mark.validation
def test_every_accelerator_label_of_the_shared_data_resolves_or_is_refused_by_reason() -> None:
    refused = {}
    for label in _labels():
        try:
            resolve_label(label)
        except PlannerInputError as exc:
            refused[label] = str(exc)
    assert all("variant is not stated" in why for why in refused.values()), refused
    assert len(refused) <= 2


@pytest.mark.parametrize(
    ("label", "key"),
    [
        ("NVIDIA H100-SXM-80GB", "h100_sxm"),
        ("AMD Instinct MI300X-NPS1-SPX-192GB-750W", "mi300x"),
        ("B200-180GB (DGX B200)", "b200_sxm"),
        ("NVIDIA GH200 Grace Hopper Superchip 96GB", "gh200_96gb"),
        ("NVIDIA H200-SXM-141GB-CTS", "h200_sxm"),
        ("GB300 NVL72", "gb300"),
        ("h100-80gb-pcap", "h100_sxm"),
    ],
)
def test_labels_resolve(label: str, key: str) -> None:
    assert resolve_label(label).key == key


@pytest.mark.parametrize(
    ("label", "why"),
    [
        ("A100 (variant not stated in source)", "not stated"),
        ("A100-PCIE-40GB", "40GB"),
        ("Z9000 accelerator", "no GPU of the catalog"),
    ],
)
def test_ambiguous_or_unknown_labels_are_refused(label: str, why: str) -> None:
    with pytest.raises(PlannerInputError, match=why):
        resolve_label(label)
