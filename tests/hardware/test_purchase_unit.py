"""Every GPU spec states how many GPUs are bought together, with its source (issue 47, item 6)."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from hardware.catalog import SPECS_DIR, get_gpu
from hardware.spec import GpuSpec


@pytest.mark.parametrize("path", sorted(SPECS_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_purchase_unit_is_stated_with_a_source(path: object) -> None:
    raw = yaml.safe_load(path.read_text())  # type: ignore[attr-defined]
    assert isinstance(raw["purchase_unit_gpus"], int) and raw["purchase_unit_gpus"] >= 1
    assert raw["sources"]["purchase_unit_gpus"].strip()
    spec = GpuSpec.model_validate(raw)
    # a unit never exceeds the scale-up domain it is cut from
    assert spec.purchase_unit_gpus <= spec.scale_up.domain_size


def test_nvl72_is_bought_by_the_tray() -> None:
    for key in ("gb200", "gb300"):
        g = get_gpu(key)
        assert g.purchase_unit_gpus == 4 == g.node_gpus  # one compute tray, one host
        assert "tray" in g.sources["purchase_unit_gpus"]


def test_a_unit_other_than_one_needs_a_source() -> None:
    raw = yaml.safe_load((SPECS_DIR / "h100_sxm.yaml").read_text())
    del raw["sources"]["purchase_unit_gpus"]
    assert GpuSpec.model_validate(raw).purchase_unit_gpus == 1  # rented singly needs no citation
    with pytest.raises(ValidationError, match="purchase_unit_gpus"):
        GpuSpec.model_validate(raw | {"purchase_unit_gpus": 8})
