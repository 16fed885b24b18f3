"""Model parsing, catalog resolution and parameter counts against published figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hardware.errors import PlannerInputError
from planner.model.bundled import bundled_models, find_bundled, load_model
from planner.model.params import active_params, total_params
from planner.model.parser import parse_config

SHARED_CONFIGS = Path(__file__).resolve().parents[3] / ".." / "shared" / "model_configs"

# (model, total, active): model cards / papers; tolerance 1% unless noted.
PUBLISHED = [
    ("llama-3.1-8b", 8.03e9, None),
    ("llama-3.1-70b", 70.6e9, None),
    ("mixtral-8x7b", 46.7e9, None),
    ("deepseek-v3", 671e9, None),
    ("qwen3-235b-a22b", 235e9, 22e9),
    ("llama-3.1-405b", 405e9, None),
    ("gpt-oss-120b", 117e9, None),
]


@pytest.mark.parametrize(("name", "total", "active"), PUBLISHED)
def test_parameter_counts_match_published(name: str, total: float, active: float | None) -> None:
    m = load_model(name)
    assert total_params(m) == pytest.approx(total, rel=0.01)
    if active is not None:
        assert active_params(m) == pytest.approx(active, rel=0.01)


def test_deepseek_active_params() -> None:
    # DeepSeek-V3 reports "37B activated"; counting both embedding tables gives 37.55e9 and
    # leaving out the input embedding gives 36.6e9: the published figure is rounded.
    a = active_params(load_model("deepseek-v3"))
    assert a == pytest.approx(37e9, rel=0.015)


def test_reference_shapes() -> None:
    m = load_model("llama-3.1-70b")
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim) == (
        80,
        8192,
        64,
        8,
        128,
    )
    ds = load_model("deepseek-r1")
    assert ds.family == "mla_moe" and ds.mla is not None and ds.moe is not None
    assert ds.mla.kv_lora_rank == 512 and ds.moe.num_experts == 256 and ds.moe.top_k == 8
    assert sum(1 for layer in ds.layers if not layer.moe) == 3
    oss = load_model("gpt-oss-120b")
    assert {layer.window for layer in oss.layers} == {0, 128}
    q35 = load_model("qwen3.5-397b-a17b")
    assert q35.family == "hybrid_moe" and sum(1 for x in q35.layers if x.attention == "gqa") == 15


@pytest.mark.parametrize(
    "ref", ["meta-llama/Llama-3.1-70B", "Llama-3.1-70B", "LLAMA-3.1-70B", "llama-3.3-70b"]
)
def test_names_resolve(ref: str) -> None:
    assert load_model(ref).num_layers == 80


@pytest.mark.parametrize("ref", ["deepseek-r1", "deepseek-ai/DeepSeek-R1", "DeepSeek-R1"])
def test_deepseek_r1_is_its_own_model(ref: str) -> None:
    """Same architecture as DeepSeek-V3, other weights: never resolved to V3."""
    m = load_model(ref)
    assert (m.name, m.hf_id) == ("DeepSeek-R1", "deepseek-ai/DeepSeek-R1")
    v3 = load_model("deepseek-v3")
    assert v3.hf_id == "deepseek-ai/DeepSeek-V3"
    assert m.layers == v3.layers and m.moe == v3.moe


@pytest.mark.parametrize(
    ("ref", "hf_id", "fmt"),
    [
        ("nvidia/Llama-3.1-70B-Instruct-FP8", "nvidia/Llama-3.1-70B-Instruct-FP8", "fp8"),
        ("nvidia/DeepSeek-R1-NVFP4", "nvidia/DeepSeek-R1-NVFP4", "nvfp4"),
        ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B-FP8", "fp8"),
        ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B", "bf16"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "bf16"),
        ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B", "bf16"),
        ("openai/gpt-oss-120b", "openai/gpt-oss-120b", "mxfp4"),
        ("moonshotai/Kimi-K2.5", "moonshotai/Kimi-K2.5", "int4"),
    ],
)
def test_exact_hf_id_first_with_the_checkpoints_own_quantization(
    ref: str, hf_id: str, fmt: str
) -> None:
    m = load_model(ref)
    assert m.hf_id == hf_id
    assert m.quant.weight_format == fmt


def test_every_name_belongs_to_one_checkpoint() -> None:
    """No alias, key, display or repository name of one bundled checkpoint names another."""
    owner: dict[str, str] = {}
    for key, b in bundled_models().items():
        for name in {b.key, b.name, b.hf_id, b.hf_id.split("/")[-1], *b.aliases}:
            assert find_bundled(name) is not None and find_bundled(name).key == key, name  # type: ignore[union-attr]
            assert owner.setdefault(name.lower(), key) == key, name


def test_local_config_has_no_identity_without_model_id(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(bundled_models()["qwen3-32b"].path.read_text())
    assert load_model(str(cfg)).hf_id == ""
    m = load_model(str(cfg), "Qwen/Qwen3-32B")
    assert (m.hf_id, m.name) == ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B")
    for bad in ("Qwen/Qwen3-32B\nrm -rf /", "$(reboot)", "a`b`/c", "../x", "no-slash"):
        with pytest.raises(PlannerInputError, match="--model-id"):
            load_model(str(cfg), bad)


def test_bundled_model_refuses_another_model_id() -> None:
    with pytest.raises(PlannerInputError, match="other weights"):
        load_model("deepseek-r1", "deepseek-ai/DeepSeek-V3")


def test_local_modelopt_checkpoint_reads_hf_quant_config(tmp_path: Path) -> None:
    shared = Path(__file__).parents[4] / "shared" / "model_configs"
    if not shared.is_dir():
        pytest.skip(f"needs the public configs in {shared}")
    (tmp_path / "config.json").write_text(
        (shared / "nvidia--Llama-3.1-70B-Instruct-FP8_config.json").read_text()
    )
    (tmp_path / "hf_quant_config.json").write_text(
        (shared / "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json").read_text()
    )
    m = load_model(str(tmp_path), "nvidia/Llama-3.1-70B-Instruct-FP8")
    assert m.quant.weight_format == "fp8" and m.quant.kv_cache == "fp8"
    assert m.weight_dtype == "fp8"


def test_every_bundled_model_parses_with_source() -> None:
    models = bundled_models()
    required = {
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "llama-3.3-70b",
        "qwen3-8b",
        "qwen3-32b",
        "qwen3-30b-a3b",
        "qwen3-235b-a22b",
        "mixtral-8x7b",
        "deepseek-v3",
        "gpt-oss-20b",
        "gpt-oss-120b",
        "minimax-m2.5",
        "kimi-k2.5",
        "glm-5",
        "qwen3.5-397b-a17b",
        "llama-4-scout",
        "llama-4-maverick",
    }
    assert required <= set(models)
    for key, b in models.items():
        assert b.source.strip(), key
        m = load_model(key)
        assert 1e9 < total_params(m) < 2e12
        assert 0 < active_params(m) <= total_params(m)


def test_local_path(tmp_path: Path) -> None:
    cfg = json.loads(
        (
            Path(__file__).resolve().parents[3] / "planner" / "model" / "configs" / "qwen3-8b.json"
        ).read_text()
    )
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert load_model(str(path)).hidden_size == 4096
    assert load_model(str(tmp_path)).hidden_size == 4096


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('{"model_type": "llama", "num_hidden_layers": 2', "--model"),  # truncated
        ("[1, 2]", "--model"),
        ('{"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"]}', "model_type"),
        ('{"model_type": "llama", "hidden_size": 64}', "num_hidden_layers"),
        (
            '{"model_type": "llama", "num_hidden_layers": -2, "hidden_size": 64}',
            "num_hidden_layers",
        ),
    ],
)
def test_bad_configs(tmp_path: Path, content: str, field: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PlannerInputError) as err:
        load_model(str(path))
    assert field in str(err.value)


def test_unknown_model_did_you_mean() -> None:
    with pytest.raises(PlannerInputError, match="did you mean 'llama-3.1-70b'"):
        load_model("llama-3.1-7b")


def _shared_configs() -> list[Path]:
    if not SHARED_CONFIGS.is_dir():
        return []
    return sorted(p for p in SHARED_CONFIGS.glob("*_config.json") if "hf_quant" not in p.name)


@pytest.mark.skipif(not SHARED_CONFIGS.is_dir(), reason="../shared/model_configs not present")
@pytest.mark.parametrize("path", _shared_configs(), ids=lambda p: p.name)
def test_shared_configs_parse_or_refuse(path: Path) -> None:
    """Every public config either parses to a sane spec or is refused by name,
    never mis-modelled."""
    raw = json.loads(path.read_text())
    try:
        m = parse_config(raw, name=path.stem)
    except PlannerInputError as exc:
        assert "not supported yet" in str(exc)
        return
    assert 1e8 < total_params(m) < 3e12
    assert len(m.layers) == m.num_layers
