"""Every example of bad input from issue 19: exit 2 with one line naming the flag or file and
field (3 for saturation), no traceback, no hang, no multi-GB allocation."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from planner.cli.main import main

REPO = Path(__file__).resolve().parents[3]
BUNDLED = REPO / "planner" / "model" / "configs"
H200_YAML = REPO / "hardware" / "specs" / "h200_sxm.yaml"
HANG_S = 120.0
"""A case that has not returned by then is a hang (generous: the machine may be loaded)."""


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``main(argv)`` in a thread, failing on a hang; (exit code, stdout, stderr)."""
    box: dict[str, int] = {}
    worker = threading.Thread(target=lambda: box.setdefault("rc", main(list(argv))), daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), f"planner {' '.join(argv)} hung"
    out, err = capsys.readouterr()
    return box["rc"], out, err


def bad(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of a command that must exit 2."""
    rc, _, err = call(capsys, *argv)
    assert rc == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def config(
    tmp_path: Path, name: str, edit: Callable[[dict], None], base: str = "llama-3.1-8b"
) -> str:
    data = json.loads((BUNDLED / f"{base}.json").read_text())
    data.pop("_bundled", None)
    edit(data)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return str(path)


def raw_config(tmp_path: Path, name: str, value: str) -> str:
    text = json.dumps(
        {
            k: v
            for k, v in json.loads((BUNDLED / "llama-3.1-8b.json").read_text()).items()
            if k != "_bundled"
        }
    )
    path = tmp_path / f"{name}.json"
    path.write_text(text.replace('"hidden_size": 4096', f'"hidden_size": {value}'))
    return str(path)


def memory(model: str, *extra: str) -> tuple[str, ...]:
    return ("memory", "--model", model, "--gpu", "h200", *extra)


@pytest.mark.parametrize(
    "value, needle",
    [
        ("Infinity", "Infinity is not a finite number"),
        ("NaN", "NaN is not a finite number"),
        ("1e400", "1e400 overflows"),
        ("9" * 400, "400 digits"),
    ],
)
def test_config_json_non_finite_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, needle: str
) -> None:
    err = bad(capsys, *memory(raw_config(tmp_path, "c", value)))
    assert "--model" in err and "line 1" in err and needle in err


@pytest.mark.parametrize(
    "field, value, base",
    [
        ("quantization_config", "fp8", "llama-3.1-8b"),
        ("layer_types", 5, "llama-3.1-8b"),
        ("num_nextn_predict_layers", "x", "deepseek-v3"),
        ("num_hidden_layers", 1e8, "llama-3.1-8b"),
        ("num_hidden_layers", True, "llama-3.1-8b"),
        ("num_attention_heads", -32, "llama-3.1-8b"),
        ("vocab_size", 1e12, "llama-3.1-8b"),
    ],
)
def test_config_json_bad_fields_name_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, base: str
) -> None:
    err = bad(capsys, *memory(config(tmp_path, "c", lambda d: d.update({field: value}), base)))
    assert f"config.json: {field}" in err


def test_config_json_sliding_window_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(
        tmp_path,
        "c",
        lambda d: d.update(model_type="mistral", sliding_window="abc", use_sliding_window=True),
    )
    assert "config.json: sliding_window" in bad(capsys, *memory(path))


def test_config_json_layers_capped_at_1000(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = bad(capsys, *memory(config(tmp_path, "c", lambda d: d.update(num_hidden_layers=1e8))))
    assert "must be an integer in [1, 1,000]" in err


def test_config_json_nested_100000_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert "nested more than" in bad(capsys, *memory(str(path)))


def hw_dir(tmp_path: Path, text: str | bytes | None = None) -> Path:
    folder = tmp_path / "hw"
    folder.mkdir()
    if text is not None:
        path = folder / "x.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def test_hardware_dir_fifo_does_not_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = hw_dir(tmp_path)
    os.mkfifo(folder / "x.yaml")
    assert "not a regular file" in bad(capsys, "gpus", "--hardware-dir", str(folder))


def test_hardware_dir_symlink_to_dev_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = hw_dir(tmp_path)
    (folder / "x.yaml").symlink_to("/dev/zero")
    assert "not a regular file" in bad(capsys, "gpus", "--hardware-dir", str(folder))


def _spec(edit: Callable[[str], str]) -> str:
    text = (
        H200_YAML.read_text()
        .replace("key: h200_sxm", "key: h200_copy")
        .replace("name: H200-SXM", "name: H200-copy")
    )
    return edit(
        text.replace(
            "aliases: [H200, H200-SXM, H200 SXM 141GB, NVIDIA H200, HGX H200]", "aliases: []"
        )
    )


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"name: \xff\xfe\n", "not UTF-8"),
        (
            _spec(lambda t: t.replace("memory_bytes: 151397597184", "memory_bytes: .inf")),
            "not a finite number",
        ),
        (
            _spec(
                lambda t: t.replace(
                    "hbm_bandwidth_bytes_per_s: 4.8e+12", "hbm_bandwidth_bytes_per_s: .inf"
                )
            ),
            "not a finite number",
        ),
        (_spec(lambda t: t + "sm_count: 10\n"), "duplicate key 'sm_count'"),
    ],
)
def test_hardware_yaml_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, needle: str
) -> None:
    err = bad(capsys, "gpus", "--hardware-dir", str(hw_dir(tmp_path, content)))
    assert "x.yaml" in err and needle in err


def test_valid_spec_copy_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = call(capsys, "gpus", "--hardware-dir", str(hw_dir(tmp_path, _spec(lambda t: t))))
    assert rc == 0 and "H200-copy" in out


SIM = ("simulate", "--model", "llama-3.1-8b", "--gpu", "h200", "--concurrency", "4")


@pytest.mark.parametrize(
    "extra, flag",
    [
        (("--requests", "0"), "--requests"),
        (("--requests", "-5"), "--requests"),
        (("--requests", "1e9"), "--requests"),
        (("--seed", "-1"), "--seed"),
        (("--requests", "1000000000"), "--requests"),
    ],
)
def test_simulate_flags_in_range(
    capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], flag: str
) -> None:
    assert f"argument {flag}" in bad(capsys, *SIM, *extra)


def test_simulate_needs_requests_beyond_the_in_flight_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The steady state starts the 4 clients' requests already running and does not measure them:
    2 requests leave nothing (once an IndexError traceback, CLI fuzz at 6,000 cases)."""
    err = bad(capsys, *SIM, "--requests", "2")
    assert "--requests" in err and "none to measure" in err and "4 clients" in err


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"isl,osl\n100,20\ninf,5\n", ":3:isl"),
        (b"isl,osl\n100,20\n7\n", ":3: 1 fields"),
        (b"isl,osl\n100,\xff20\n", "not UTF-8"),
    ],
)
def test_trace_csv_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, needle: str
) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_bytes(content)
    err = bad(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h200",
        "--concurrency",
        "4",
        "--trace",
        str(trace),
    )
    assert "--trace" in err and needle in err


def plan_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    rc, out, _ = call(
        capsys,
        "plan",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h200",
        "--max-gpus",
        "2",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--ttft-ms",
        "3000",
        "--tpot-ms",
        "60",
        "--concurrency",
        "8",
        "--format",
        "json",
    )
    assert rc == 0
    return json.loads(out)


def test_plan_json_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = plan_file(tmp_path, capsys)
    mode = good["best"]["deployment"]["mode"]
    nonutf = tmp_path / "nonutf.json"
    nonutf.write_bytes(b'{"model": "\xff"}')
    workers = tmp_path / "workers.json"
    good["best"]["deployment"][mode]["workers"] = 1e5
    workers.write_text(json.dumps(good))
    rate = tmp_path / "rate.json"
    good["best"]["deployment"][mode]["workers"] = 1
    rate.write_text(json.dumps(good).replace('"rate": ', '"rate": Infinity, "x": '))
    out = tmp_path / "out"
    for path, needle in (
        (nonutf, "not UTF-8"),
        (Path("/dev/zero"), "not a regular file"),
        (workers, "workers"),
        (rate, "Infinity is not a finite number"),
    ):
        assert needle in bad(
            capsys, "emit", "--plan", str(path), "--backend", "vllm", "--out", str(out)
        )
        assert not out.exists()
    assert "Infinity" in bad(
        capsys, "report", "--plan", str(rate), "--csv", str(tmp_path / "r.csv")
    )


def aic_gemm(rows: str) -> bytes:
    return ("source_path,gemm_dtype,m,n,k,latency\n" + rows).encode()


def test_kernels_import_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty, quote, good = tmp_path / "empty.csv", tmp_path / "quote.csv", tmp_path / "good.csv"
    empty.write_bytes(b"")
    quote.write_bytes(b'a,b\n"1,2\n')
    good.write_bytes(aic_gemm("x,bfloat16,64,64,64,0.01\nx,bfloat16,128,64,64,0.02\n"))
    out = tmp_path / "out"
    kimp = ("kernels", "import", "--format", "aiconfigurator")
    assert "empty file" in bad(capsys, *kimp, str(empty), "--gpu", "h100", "--out", str(out))
    assert "bad CSV" in bad(capsys, *kimp, str(quote), "--gpu", "h100", "--out", str(out))
    folder = tmp_path / "folder"
    folder.mkdir()
    for f in (empty, quote, good):
        (folder / f.name).write_bytes(f.read_bytes())
    rc, text, _ = call(
        capsys, *kimp, str(folder), "--gpu", "h100", "--out", str(out), "--output", "json"
    )
    result = json.loads(text)
    assert rc == 0 and [w["from"] for w in result["written"]] == ["good.csv"]
    assert len(result["skipped_files"]) == 2


def test_kernels_import_names_the_input_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dup = tmp_path / "dup.csv"
    dup.write_bytes(aic_gemm("x,bfloat16,8,8,8,1\nx,bfloat16,8,8,8,2\n"))
    out = tmp_path / "out"
    err = bad(
        capsys,
        "kernels",
        "import",
        "--format",
        "aiconfigurator",
        str(dup),
        "--gpu",
        "h100",
        "--out",
        str(out),
    )
    assert f"{dup} row 3: duplicate key (8, 8, 8, 'bf16')" in err and "np." not in err
    assert not out.exists()


def test_kernels_import_gpu_is_a_safe_path_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.csv"
    good.write_bytes(aic_gemm("x,bfloat16,64,64,64,0.01\n"))
    out = tmp_path / "a" / "out"
    err = bad(
        capsys,
        "kernels",
        "import",
        "--format",
        "aiconfigurator",
        str(good),
        "--gpu",
        "../../x",
        "--out",
        str(out),
    )
    assert "--gpu" in err and not (tmp_path / "x").exists() and not out.exists()


def test_kernels_import_defaults_to_the_user_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLANNER_DATA_DIR", str(tmp_path / "user"))
    good = tmp_path / "good.csv"
    good.write_bytes(aic_gemm("x,bfloat16,64,64,64,0.01\nx,bfloat16,128,64,64,0.02\n"))
    rc, _, _ = call(
        capsys, "kernels", "import", "--format", "aiconfigurator", str(good), "--gpu", "h100"
    )
    assert rc == 0 and (tmp_path / "user" / "kernels" / "h100_sxm" / "gemm.csv").is_file()
    assert not (REPO / "kernels_db" / "data" / "h100_sxm" / "good.csv").exists()


def e2e_rows(edit: Callable[[list[list[str]]], None]) -> str:
    header = (
        "id,backend,model_path,system,mode,isl,osl,batch_size,tp_size,pp_size,silicon_ttft_ms,"
        "silicon_tpot_ms"
    ).split(",")
    rows = [
        header,
        ["1", "vllm", "llama-3.1-8b", "h200_sxm", "agg", "1000", "200", "8", "1", "1", "50", "10"],
    ]
    edit(rows)
    return "\n".join(",".join(r) for r in rows) + "\n"


@pytest.mark.parametrize(
    "col, value",
    [
        ("isl", "abc"),
        ("tp_size", "inf"),
        ("silicon_ttft_ms", "-3"),
        ("tp_size", "1.5"),  # a count is a whole number
        ("batch_size", "2.5"),
    ],
)
def test_validate_e2e_garbage_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], col: str, value: str
) -> None:
    path = tmp_path / "e2e.csv"
    path.write_text(e2e_rows(lambda r: r[1].__setitem__(r[0].index(col), value)))
    for verb in ("e2e", "decisions"):
        assert f"e2e.csv:2: {col}" in bad(capsys, "validate", verb, "--data", str(path))


THROUGHPUT_ROWS = (
    "framework_version,concurrency_or_rate,metric,model,gpu,precision,tp,pp,isl,osl,value\n"
    "0.14.0,max-throughput,output_tok_s_total,LLaMA v3.1 8B,H200-SXM-141GB,FP8,{tp},1,1000,1000,"
    "20000\n"
)


@pytest.mark.parametrize("tp", ["0", "1.5", "2000"])
def test_validate_throughput_bad_parallelism(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tp: str
) -> None:
    """A TP of 0 was priced (dividing by zero) and counted as a row that does not fit; a TP must
    be a whole number in [1, 1,024], named with file and line (found by the CLI fuzz at 6,000
    cases with RuntimeWarnings as errors)."""
    path = tmp_path / "tp.csv"
    path.write_text(THROUGHPUT_ROWS.format(tp=tp))
    err = bad(capsys, "validate", "throughput", "--data", str(path))
    assert "tp.csv:2: tp" in err and "whole number in [1, 1,024]" in err and f"got {tp}" in err


def test_validate_other_layouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    for verb in ("e2e", "throughput", "decisions"):
        assert "lacks column(s)" in bad(capsys, "validate", verb, "--data", str(path))


def test_fleet_spec_non_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_bytes(b"classes: \xff\n")
    assert "--spec" in bad(capsys, "fleet", "--spec", str(path))


def test_validate_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = call(capsys, "validate", "--help")
    assert rc == 0 and "decisions" in out and "within 5%" in out


def test_estimate_above_capacity_is_saturated(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = call(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h200",
        "--rate",
        "1e9",
        "--format",
        "json",
    )
    data = json.loads(out)
    assert rc == 3 and data["saturated"] is True
    cap = data["capacity_requests_per_s"]
    assert 0 < cap < 1e4 and data["requests_per_s"] == pytest.approx(cap)
    assert data["output_tok_s_per_gpu"] < 1e6  # the achievable throughput, not the offered load
    assert data["ttft_ms"]["mean"] is None
    rc, out, _ = call(
        capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h200", "--rate", "1e9"
    )
    assert rc == 3 and out.startswith("saturated:")
    rc, out, _ = call(
        capsys,
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h200",
        "--rate",
        f"{cap * 0.9:.4g}",
        "--format",
        "json",
    )
    assert rc == 0 and json.loads(out)["saturated"] is False


def test_plan_saturated_everywhere_names_compute(capsys: pytest.CaptureFixture[str]) -> None:
    err = bad(
        capsys,
        "plan",
        "--model",
        "llama-3.1-405b",
        "--gpu",
        "h200",
        "--max-gpus",
        "64",
        "--isl",
        "4000",
        "--osl",
        "500",
        "--ttft-ms",
        "1000",
        "--tpot-ms",
        "30",
        "--rate",
        "100",
    )
    assert err.startswith("error: compute:") and "inf" not in err and "unbounded" not in err
    assert "requests/s at full batch" in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            (
                "estimate",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h200",
                "--concurrency",
                "4",
                "--isl",
                "-100",
            ),
            "argument --isl",
        ),
        (
            (
                "kernel",
                "--gpu",
                "h200",
                "--op",
                "gemm",
                "--m",
                "8",
                "--n",
                "8",
                "--k",
                "8",
                "--dtype",
                "bogus",
            ),
            "argument --dtype",
        ),
        (("kernel", "--gpu", "h200", "--op", "gemm", "--m", "8", "--n", "8"), "--k: required"),
        (
            (
                "plan",
                "--model",
                "llama-3.1-8b",
                "--gpu",
                "h200",
                "--max-gpus",
                "100001",
                "--isl",
                "10",
                "--osl",
                "10",
                "--ttft-ms",
                "1",
                "--tpot-ms",
                "1",
            ),
            "argument --max-gpus",
        ),
        (
            ("estimate", "--model", "llama-3.1-8b", "--gpu", "h200", "--rate", "inf"),
            "argument --rate",
        ),
        (
            ("estimate", "--model", "llama-3.1-8b", "--gpu", "h200", "--rate", "nan"),
            "argument --rate",
        ),
        (("memory", "--model", "llama-3.1-8b", "--gpu", "h200", "--tp", "2000"), "argument --tp"),
    ],
)
def test_flags_are_named(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], needle: str
) -> None:
    assert needle in bad(capsys, *argv)
