"""Catalog behaviour: name resolution, did-you-mean, user folders
(--hardware-dir), bad user files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from hardware.catalog import SPECS_DIR, all_gpus, get_gpu
from hardware.errors import PlannerInputError

BUNDLED = {
    "a100_sxm",
    "h100_sxm",
    "h200_sxm",
    "b200_sxm",
    "gb200",
    "l40s",
    "l4",
    "mi300x",
    "mi325x",
    "cpu",
    "b300_sxm",
    "gb300",
    "gh200",
    "gh200_96gb",
    "h20",
    "h800",
    "rtx_pro_6000",
    "mi355x",
    "l40",
    "h100_pcie",
    "h100_nvl",
    "a100_pcie",
    "rtx_4090",
    "jetson_agx_orin",
}


@pytest.mark.parametrize(
    ("names", "key"),
    [
        (["h200", "h200_sxm", "H200-SXM", "h200 sxm", "NVIDIA H200"], "h200_sxm"),
        (["h100", "H100-SXM", "h100_sxm", "NVIDIA H100 80GB HBM3"], "h100_sxm"),
        (["a100", "A100-SXM-80GB", "a100_sxm", "A100-SXM4-80GB"], "a100_sxm"),
        (["b200", "B200", "b200_sxm", "HGX B200"], "b200_sxm"),
        (["gb200", "GB200", "GB200-NVL72", "gb200 nvl72"], "gb200"),
        (["l40s", "L40S"], "l40s"),
        (["l4", "L4", "NVIDIA L4"], "l4"),
        (["mi300x", "MI300X", "AMD Instinct MI300X"], "mi300x"),
        (["mi325x", "MI325X"], "mi325x"),
        (["cpu", "CPU", "x86_64"], "cpu"),
        (["b300", "B300", "HGX B300", "b300_sxm"], "b300_sxm"),
        (["gb300", "GB300 NVL72", "gb300-nvl72"], "gb300"),
        (["gh200", "GH200", "GH200 144GB"], "gh200"),
        (["gh200-96gb", "GH200 96GB"], "gh200_96gb"),
        (["h20", "H20", "HGX H20"], "h20"),
        (["h800", "H800", "H800-SXM"], "h800"),
        (["rtx-pro-6000", "RTX PRO 6000", "RTX PRO 6000 Blackwell Server Edition"], "rtx_pro_6000"),
        (["mi355x", "MI355X", "AMD Instinct MI355X"], "mi355x"),
        (["l40", "L40", "NVIDIA L40"], "l40"),
        (["h100-pcie", "H100 PCIe"], "h100_pcie"),
        (["h100-nvl", "H100 NVL"], "h100_nvl"),
        (["a100-pcie", "A100-PCIE-80GB"], "a100_pcie"),
        (["rtx-4090", "RTX 4090"], "rtx_4090"),
        (["jetson-agx-orin", "Jetson AGX Orin 64G"], "jetson_agx_orin"),
    ],
)
def test_aliases_resolve_to_one_spec(names: list[str], key: str) -> None:
    specs = [get_gpu(n) for n in names]
    assert {s.key for s in specs} == {key}
    assert all(s == specs[0] for s in specs)


def test_all_bundled_gpus_are_listed() -> None:
    assert set(all_gpus()) == BUNDLED


def test_fp8_on_a100_falls_back_to_bf16_math() -> None:
    a100 = get_gpu("a100")
    assert not a100.supports("fp8")
    assert a100.peak_flops("fp8") == a100.peak_flops("bf16") == pytest.approx(312e12)
    h200 = get_gpu("h200")  # Hopper: 4-bit weights run weight-only (W4A16) in bf16 math
    assert h200.math_dtype("fp4") == h200.math_dtype("int4") == "bf16"
    assert h200.peak_flops("fp4") == pytest.approx(989e12)
    assert get_gpu("b200").math_dtype("fp4") == "fp4"


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("h200sxm5", "h200_sxm"), ("h100sxm5", "h100_sxm"), ("mi325xx", "mi325x")],
)
def test_unknown_gpu_names_the_flag_and_suggests(typo: str, suggestion: str) -> None:
    with pytest.raises(PlannerInputError) as err:
        get_gpu(typo)
    assert err.value.field == "--gpu"
    assert str(err.value).startswith("--gpu: ")
    assert f"did you mean '{suggestion}'" in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_gpu_without_a_close_match_lists_the_known_keys() -> None:
    with pytest.raises(PlannerInputError, match="unknown GPU 'zzzz'") as err:
        get_gpu("zzzz")
    assert "did you mean" not in str(err.value)
    assert all(k in str(err.value) for k in BUNDLED)


# ---- user folders -----------------------------------------------------------------------------


def _bundled_raw(key: str = "h200_sxm") -> dict[str, Any]:
    return yaml.safe_load((SPECS_DIR / f"{key}.yaml").read_text())


def _write(folder: Path, raw: Any, name: str = "my_gpu.yaml") -> Path:
    path = folder / name
    path.write_text(raw if isinstance(raw, str) else yaml.safe_dump(raw, sort_keys=False))
    return path


def test_user_spec_in_an_extra_folder_is_found(tmp_path: Path) -> None:
    raw = _bundled_raw() | {"name": "H200-custom", "key": "h200_custom", "aliases": ["my-h200"]}
    raw["price_per_gpu_hour_usd"] = 1.23
    _write(tmp_path, raw)
    spec = get_gpu("My_H200", extra_dirs=[tmp_path])
    assert spec.key == "h200_custom"
    assert spec.price_per_gpu_hour_usd == 1.23
    assert set(all_gpus([tmp_path])) == BUNDLED | {"h200_custom"}
    with pytest.raises(PlannerInputError):
        get_gpu("my-h200")  # not visible without the folder


def test_user_spec_overrides_a_bundled_one(tmp_path: Path) -> None:
    _write(tmp_path, _bundled_raw() | {"price_per_gpu_hour_usd": 9.99})
    assert get_gpu("h200", extra_dirs=[str(tmp_path)]).price_per_gpu_hour_usd == 9.99
    assert get_gpu("h200").price_per_gpu_hour_usd != 9.99


def test_an_edited_user_file_is_read_again(tmp_path: Path) -> None:
    raw = _bundled_raw() | {"key": "edited", "name": "Edited", "aliases": []}
    path = _write(tmp_path, raw | {"price_per_gpu_hour_usd": 1.0})
    assert get_gpu("edited", [tmp_path]).price_per_gpu_hour_usd == 1.0
    _write(tmp_path, raw | {"price_per_gpu_hour_usd": 2.0})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # coarse-mtime file systems
    assert get_gpu("edited", [tmp_path]).price_per_gpu_hour_usd == 2.0


def test_missing_extra_folder_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(PlannerInputError) as err:
        all_gpus([tmp_path / "nope"])
    assert err.value.field == "--hardware-dir"


def _drop(path: str) -> Any:
    def edit(raw: dict[str, Any]) -> dict[str, Any]:
        *parents, leaf = path.split(".")
        node = raw
        for p in parents:
            node = node[p]
        del node[leaf]
        return raw

    return edit


def _set(path: str, value: Any) -> Any:
    def edit(raw: dict[str, Any]) -> dict[str, Any]:
        *parents, leaf = path.split(".")
        node = raw
        for p in parents:
            node = node[p]
        node[leaf] = value
        return raw

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(_drop("memory_bytes"), "memory_bytes", id="missing-field"),
        pytest.param(_set("memory_bytes", -141e9), "memory_bytes", id="negative-memory"),
        pytest.param(
            _set("hbm_bandwidth_bytes_per_s", 0), "hbm_bandwidth_bytes_per_s", id="zero-bandwidth"
        ),
        pytest.param(
            _set("peak_flops_per_s.bf16", -989e12), "peak_flops_per_s.bf16", id="negative-flops"
        ),
        pytest.param(
            _set("peak_flops_per_s.fp2", 1e15), "peak_flops_per_s.fp2", id="unknown-dtype"
        ),
        pytest.param(_set("scale_up.domain_size", 0), "scale_up.domain_size", id="zero-domain"),
        pytest.param(_set("sm_count", "many"), "sm_count", id="not-a-number"),
        pytest.param(_set("memory_byte", 1e9), "memory_byte", id="misspelt-field"),
        pytest.param(_set("vendor", "acme"), "vendor", id="bad-vendor"),
        pytest.param(_drop("sources.memory_bytes"), "memory_bytes", id="missing-source"),
        pytest.param(_set("sources.power_watts", "  "), "power_watts", id="empty-source"),
        pytest.param(
            _set("sources.memroy_bytes", "datasheet"), "memroy_bytes", id="source-for-unknown-field"
        ),
    ],
)
def test_malformed_user_spec_names_file_and_field(tmp_path: Path, edit: Any, expected: str) -> None:
    raw = _bundled_raw() | {"key": "broken", "name": "Broken", "aliases": []}
    _write(tmp_path, edit(raw), name="broken_gpu.yaml")
    with pytest.raises(PlannerInputError) as err:
        get_gpu("broken", extra_dirs=[tmp_path])
    message = str(err.value)
    assert "broken_gpu.yaml" in message
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("name: [unclosed\nkey: x\n", "line", id="bad-yaml"),
        pytest.param("key: a\n  bad: indent\n", "line 2", id="bad-indent"),
        pytest.param("- just\n- a list\n", "mapping", id="not-a-mapping"),
        pytest.param("", "mapping", id="empty-file"),
    ],
)
def test_unparsable_user_file_names_the_file(tmp_path: Path, text: str, expected: str) -> None:
    _write(tmp_path, text, name="bad.yaml")
    with pytest.raises(PlannerInputError) as err:
        all_gpus([tmp_path])
    message = str(err.value)
    assert "bad.yaml" in message
    assert expected in message
    assert "\n" not in message


def test_two_files_with_one_key_in_a_folder_are_refused(tmp_path: Path) -> None:
    raw = _bundled_raw() | {"key": "twin", "name": "Twin", "aliases": []}
    _write(tmp_path, raw, name="a.yaml")
    _write(tmp_path, raw, name="b.yaml")
    with pytest.raises(PlannerInputError, match="'twin' is also defined in .*a.yaml") as err:
        all_gpus([tmp_path])
    assert "b.yaml" in str(err.value)
