"""Contract every bundled GPU spec must satisfy (like scikit-learn's ``check_estimator``).

Parametrized over every YAML file in ``hardware/specs``: a new file is checked by adding it.
Reference values: docs/architecture.md "Reference figures" and, if ``../shared/validation`` exists,
from ``specs/hardware_specs.csv`` (the two sources it cites).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from hardware.catalog import SPECS_DIR, load_spec_file, normalize
from hardware.spec import GpuSpec, ScaleUpLink
from tests.hardware.test_catalog import BUNDLED

SPEC_FILES = sorted(SPECS_DIR.glob("*.yaml")) + sorted(SPECS_DIR.glob("*.yml"))
CPU_KEYS = {"cpu"}  # the CPU calibration host: lower bandwidth and FLOP/s ranges apply
NVLS_KEYS = {"h100_sxm", "h200_sxm", "b200_sxm", "gb200", "b300_sxm", "gb300", "h20", "h800"}
"""NVLink SHARP (NVSwitch gen 3+)."""
SMALL_DOMAIN_KEYS = {"jetson_agx_orin": 1, "h100_nvl": 2}  # one module; NVLink-bridged pairs

NUMERIC_FIELDS = [
    name
    for name in GpuSpec.model_fields
    if name not in {"name", "key", "aliases", "vendor", "architecture", "sources", "notes"}
]
SCALE_UP_STATED = ("name", "bandwidth_bytes_per_s", "domain_size", "nvls")  # latency_s may default

TB, GB = 1e12, 1e9
GIB = 2**30
TFLOPS = 1e12


def _ids(paths: list[Path]) -> list[str]:
    return [p.stem for p in paths]


@pytest.fixture(params=SPEC_FILES, ids=_ids(SPEC_FILES))
def spec_file(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture
def spec(spec_file: Path) -> GpuSpec:
    return load_spec_file(spec_file)


@pytest.fixture
def raw(spec_file: Path) -> dict:
    return yaml.safe_load(spec_file.read_text())


def test_catalog_has_the_planned_gpus() -> None:
    keys = {p.stem for p in SPEC_FILES}
    assert BUNDLED <= keys


def test_file_name_is_the_key(spec_file: Path, spec: GpuSpec) -> None:
    assert spec_file.stem == spec.key


def test_every_field_is_stated_in_the_file(raw: dict) -> None:
    """No field silently takes a model default in a bundled spec."""
    assert set(GpuSpec.model_fields) <= set(raw), set(GpuSpec.model_fields) - set(raw)
    assert set(SCALE_UP_STATED) <= set(raw["scale_up"])
    assert set(raw["scale_up"]) <= set(ScaleUpLink.model_fields)


def test_every_number_has_a_nonempty_source(spec: GpuSpec) -> None:
    for field in NUMERIC_FIELDS:
        assert spec.sources.get(field, "").strip(), f"{spec.key}: no source for {field}"
    for key, text in spec.sources.items():
        assert isinstance(text, str) and len(text.strip()) >= 10, (
            f"{spec.key}: thin source for {key}"
        )


def test_price_is_marked_as_an_assumption(spec: GpuSpec) -> None:
    assert spec.sources["price_per_gpu_hour_usd"].startswith("assumption: editable default")
    assert 0 < spec.price_per_gpu_hour_usd < 100


def test_units_are_plausible(spec: GpuSpec) -> None:
    is_cpu = spec.key in CPU_KEYS
    assert 8 * GB <= spec.memory_bytes <= 1e12  # 8 GB .. 1 TB
    bf16 = spec.peak_flops("bf16")
    if is_cpu:
        assert 1e9 <= spec.hbm_bandwidth_bytes_per_s <= 1e12
        assert 1e9 <= bf16 <= 10 * TFLOPS
    else:
        assert 50 * GB <= spec.hbm_bandwidth_bytes_per_s <= 20 * TB
        assert 1 * TFLOPS <= bf16 <= 20_000 * TFLOPS  # 1 TFLOP/s .. 20 PFLOP/s
    ridge = bf16 / spec.hbm_bandwidth_bytes_per_s  # FLOP per byte at the roofline knee
    assert 1 <= ridge <= 1000
    assert 1 <= spec.sm_count <= 1000
    assert 1 <= spec.power_watts <= 2000
    assert 1e9 <= spec.pcie_bandwidth_bytes_per_s <= 1e12
    assert 1e8 <= spec.scale_out_bandwidth_bytes_per_s <= spec.scale_up.bandwidth_bytes_per_s
    assert spec.scale_up.bandwidth_bytes_per_s <= 2e12  # per direction; NVLink5 is 0.9e12
    assert spec.scale_up.domain_size >= 1
    expected_domain = (1, 8) if is_cpu else (8, 72)  # cores of one host; HGX/PCIe box .. NVL72
    if spec.key in SMALL_DOMAIN_KEYS:
        expected_domain = (SMALL_DOMAIN_KEYS[spec.key],) * 2
    assert expected_domain[0] <= spec.scale_up.domain_size <= expected_domain[1]


def test_narrower_dtypes_are_never_slower(spec: GpuSpec) -> None:
    f = spec.peak_flops_per_s
    chain = [d for d in ("fp32", "tf32", "bf16", "fp8", "fp6", "fp4") if d in f]
    for wide, narrow in zip(chain, chain[1:], strict=False):
        assert f[narrow] >= f[wide], f"{spec.key}: {narrow} < {wide}"
    if "fp8" in f:
        assert f["fp8"] >= f["bf16"]
    if "int8" in f:
        assert f["int8"] >= f["bf16"]
    if "fp16" in f and "bf16" in f:
        assert f["fp16"] == f["bf16"]


def test_only_native_low_precision_is_listed(spec: GpuSpec) -> None:
    f = spec.peak_flops_per_s
    assert ("fp4" in f) == (spec.architecture in {"blackwell", "cdna4"})
    assert ("fp6" in f) <= ("fp4" in f)  # fp6 tensor cores came with fp4 (Blackwell, CDNA 4)
    has_fp8 = spec.architecture in {"hopper", "ada", "blackwell", "cdna3", "cdna4"}
    assert ("fp8" in f) == has_fp8
    if spec.key not in CPU_KEYS:
        assert "int8" in f


def test_nvls_only_on_nvlink_sharp_parts(spec: GpuSpec) -> None:
    assert spec.scale_up.nvls == (spec.key in NVLS_KEYS)


def test_names_are_unique_across_the_catalog() -> None:
    owner: dict[str, str] = {}
    for path in SPEC_FILES:
        spec = load_spec_file(path)
        for n in {normalize(x) for x in (spec.key, spec.name, *spec.aliases)}:
            assert n not in owner, f"'{n}' names both {owner[n]} and {spec.key}"
            owner[n] = spec.key


# ---- docs/architecture.md reference figures --------------------------------------------------
# Tolerances: capacity "GB" is ambiguous between 1e9 and 2**30 bytes, so anything between the two
# (with 1% slack) passes; bandwidths 5% (B200 "~8 TB/s": sources say 7.7 or 8.0); FLOP/s 1%
# (MI300X "~1307" vs AMD's 1307.4); scale-up is the bidirectional figure halved, 1%.
DESIGN_TABLE = {
    # key: (memory GB, HBM TB/s, bf16 TF, fp8 TF or None, scale-up bidirectional GB/s or None)
    "a100_sxm": (80, 2.039, 312, None, 600),
    "h100_sxm": (80, 3.35, 989, 1979, 900),
    "h200_sxm": (141, 4.8, 989, 1979, 900),
    "b200_sxm": (180, 8.0, 2250, 4500, 1800),
    "mi300x": (192, 5.3, 1307, 2615, None),
}


def _memory_matches(actual_bytes: float, nominal_gb: float) -> bool:
    return nominal_gb * GB * 0.99 <= actual_bytes <= nominal_gb * GIB * 1.01


@pytest.mark.parametrize("key", sorted(DESIGN_TABLE))
def test_design_reference_values(key: str) -> None:
    mem_gb, hbm_tb, bf16_tf, fp8_tf, bidir_gb = DESIGN_TABLE[key]
    spec = load_spec_file(SPECS_DIR / f"{key}.yaml")
    assert _memory_matches(spec.memory_bytes, mem_gb)
    assert spec.hbm_bandwidth_bytes_per_s == pytest.approx(hbm_tb * TB, rel=0.05)
    assert spec.peak_flops_per_s["bf16"] == pytest.approx(bf16_tf * TFLOPS, rel=0.01)
    if fp8_tf is None:
        assert not spec.supports("fp8")
    else:
        assert spec.peak_flops_per_s["fp8"] == pytest.approx(fp8_tf * TFLOPS, rel=0.01)
    if bidir_gb is not None:
        assert spec.scale_up.bandwidth_bytes_per_s == pytest.approx(bidir_gb * GB / 2, rel=0.01)


def test_b200_fp4_and_gb200_domain() -> None:
    b200 = load_spec_file(SPECS_DIR / "b200_sxm.yaml")
    gb200 = load_spec_file(SPECS_DIR / "gb200.yaml")
    assert b200.peak_flops_per_s["fp4"] == pytest.approx(9000 * TFLOPS, rel=0.01)
    assert gb200.scale_up.domain_size == 72
    assert b200.scale_up.domain_size == 8


# ---- the shared spec CSV (two sources that sometimes disagree) --------------------------------
SHARED_CSV = (
    Path(__file__).resolve().parents[2].parent / "shared/validation/specs/hardware_specs.csv"
)
CSV_GPUS = {
    "A100 SXM (80GB)": "a100_sxm",
    "H100 SXM": "h100_sxm",
    "H200 SXM": "h200_sxm",
    "B200 SXM": "b200_sxm",
    "GB200 (per Blackwell GPU)": "gb200",
    "L40S": "l40s",
    "L4": "l4",
    "MI300X": "mi300x",
    "MI325X": "mi325x",
}
_UNIT = {"TFLOPS": TFLOPS, "TB/s": TB, "GB/s": GB, "W": 1.0}
_CAPACITY_UNIT = {"GB": GB, "GiB": GIB, "MiB": 2**20}


def _csv_rows() -> list[dict[str, str]]:
    if not SHARED_CSV.is_file():
        pytest.skip(f"shared validation data not found at {SHARED_CSV}")
    with SHARED_CSV.open(newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["gpu"] in CSV_GPUS]


def _our_value(spec: GpuSpec, name: str) -> float | None:
    m = re.fullmatch(r"peak_dense_(\w+?)_tensor", name)
    if m:
        return spec.peak_flops_per_s.get(m.group(1))  # type: ignore[arg-type]
    return {
        "memory_bandwidth_peak": spec.hbm_bandwidth_bytes_per_s,
        "power_tdp": spec.power_watts,
        "intra_node_bw_unidirectional": spec.scale_up.bandwidth_bytes_per_s,
        "intra_node_interconnect_bw_unidirectional": spec.scale_up.bandwidth_bytes_per_s,
    }.get(name)


def _first_number(text: str) -> float:
    return float(re.match(r"\s*([0-9.]+)", text).group(1))  # type: ignore[union-attr]


@pytest.mark.validation
def test_agrees_with_at_least_one_source_of_the_shared_csv() -> None:
    """Where the two sources disagree, our value must match one of them (FLOP/s within 1%).

    Capacities labelled GB or GiB are checked with the GB/GiB ambiguity above (aiconfigurator writes
    "24 GiB" for the L4 that NVIDIA sells as 24 GB); driver-reported MiB figures within 1%.
    """
    claims: dict[tuple[str, str], list[bool]] = {}
    for row in _csv_rows():
        key, name = CSV_GPUS[row["gpu"]], row["spec"]
        spec = load_spec_file(SPECS_DIR / f"{key}.yaml")
        if name == "memory_capacity":
            text = row["value"] if row["unit"] == "as noted" else f"{row['value']} {row['unit']}"
            number, unit = re.match(r"\s*([0-9.]+)\s*(GiB|MiB|GB)", text).groups()  # type: ignore[union-attr]
            if unit == "MiB":
                ok = spec.memory_bytes == pytest.approx(float(number) * 2**20, rel=0.01)
            else:
                ok = _memory_matches(spec.memory_bytes, float(number))
            claims.setdefault((key, name), []).append(ok)
            continue
        mine = _our_value(spec, name)
        if mine is None:
            continue  # fp6 / nvfp4 rows, or a dtype the spec does not list
        theirs = _first_number(row["value"]) * _UNIT[row["unit"].split(" ")[0]]
        claims.setdefault((key, name), []).append(abs(mine - theirs) <= 0.01 * theirs)
    assert len(claims) >= 50, (
        f"only {len(claims)} (gpu, spec) pairs of the shared CSV matched the catalog"
    )
    bad = [k for k, ok in claims.items() if not any(ok)]
    assert not bad, f"disagrees with every source: {bad}"


# ---- on-chip cache (kernel model's L2 term) ---------------------------------------------------
# Datasheet / whitepaper values in MiB; the kernel model reads them as a working-set threshold.
L2_MIB = {
    "a100_sxm": 40,
    "h100_sxm": 50,
    "h200_sxm": 50,
    "b200_sxm": 126,
    "gb200": 126,
    "l40s": 96,
    "l4": 48,
    "mi300x": 256,
    "mi325x": 256,
}


def test_last_level_cache_is_stated_and_plausible(spec: GpuSpec) -> None:
    assert spec.l2_cache_bytes is not None, f"{spec.key}: no l2_cache_bytes"
    assert 1 * 2**20 <= spec.l2_cache_bytes <= 1 * GIB
    assert spec.l2_cache_bytes < spec.memory_bytes / 100
    if spec.key in L2_MIB:
        assert spec.l2_cache_bytes == L2_MIB[spec.key] * 2**20


def test_a_stated_cache_needs_a_source(raw: dict) -> None:
    bad = {**raw, "sources": {k: v for k, v in raw["sources"].items() if k != "l2_cache_bytes"}}
    with pytest.raises(ValueError, match="l2_cache_bytes"):
        GpuSpec.model_validate(bad)
    assert GpuSpec.model_validate({**bad, "l2_cache_bytes": None}).l2_cache_bytes is None
