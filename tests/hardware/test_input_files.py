"""The input boundary: regular files only, size caps, UTF-8, finite numbers, bounded nesting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hardware.errors import PlannerInputError
from hardware.input_files import (
    MAX_NESTING,
    SIZE_CAPS,
    check_number,
    csv_rows,
    parse_json,
    parse_yaml,
    read_csv,
    read_json,
    read_text,
    read_yaml,
)


def _err(fn: object, *args: object) -> str:
    with pytest.raises(PlannerInputError) as exc:
        fn(*args)  # type: ignore[operator]
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"a": Infinity}', "Infinity is not a finite number"),
        ('{"a": -Infinity}', "Infinity is not a finite number"),
        ('{"a": NaN}', "NaN is not a finite number"),
        ('{"a": 1e400}', "1e400 overflows a float"),
        ('{"a": ' + "9" * 400 + "}", "400 digits is too large"),
        ("[" * 100_000 + "]" * 100_000, f"nested more than {MAX_NESTING} levels"),
        (
            "[" * (MAX_NESTING + 2) + "]" * (MAX_NESTING + 2),
            f"nested more than {MAX_NESTING} levels",
        ),
        ('{"a": 1,\n"b": }', "line 2: not valid JSON"),
    ],
)
def test_json_refuses_what_is_not_finite_or_too_deep(text: str, why: str) -> None:
    assert why in _err(parse_json, text, "config.json")


def test_json_keeps_ordinary_numbers() -> None:
    assert parse_json('{"a": [1, 2.5, -3e5], "b": 123456789012345678}', "x") == {
        "a": [1, 2.5, -3e5],
        "b": 123456789012345678,
    }


@pytest.mark.parametrize(
    "text, why",
    [
        ("a: 1\na: 2\n", "line 2: duplicate key 'a'"),
        ("a:\n  b: 1\n  b: 2\n", "line 3: duplicate key 'b'"),
        ("memory_bytes: .inf\n", "'.inf' is not a finite number"),
        ("hbm: -.Inf\n", "is not a finite number"),
        ("x: .nan\n", "is not a finite number"),
        ("x: 1.0e+400\n", "is not a finite number"),
        ("x: " + "9" * 40 + "\n", "too large"),
        ("x: &a [1, 2]\ny: *a\n", "aliases"),
        ("[" * 5000 + "]" * 5000, "nesting depth"),
    ],
)
def test_yaml_refuses_duplicates_aliases_and_non_finite(text: str, why: str) -> None:
    assert why in _err(parse_yaml, text, "spec.yaml")


def test_yaml_keeps_merge_keys_and_numbers() -> None:
    assert parse_yaml("<<: {a: 1}\nb: 2.5e+3\nc: 0x10\n", "x") == {"a": 1, "b": 2500.0, "c": 16}


def test_fifo_device_folder_and_symlink_to_device_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "x.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in _err(read_yaml, fifo, "GPU YAML", "hardware file")
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    assert "not a regular file" in _err(read_text, link, "GPU YAML", "hardware file")
    assert "is a folder" in _err(read_text, tmp_path, "plan.json", "--plan")
    assert "cannot read" in _err(read_text, tmp_path / "absent.json", "plan.json", "--plan")


def test_size_cap_per_kind(tmp_path: Path) -> None:
    big = tmp_path / "config.json"
    with big.open("wb") as fh:
        fh.truncate(SIZE_CAPS["config.json"] + 1)
    assert "may be at most 4 MB" in _err(read_json, big, "config.json", "--model")


def test_non_utf8_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "spec.yaml"
    bad.write_bytes(b"a: 1\nb: \xff\n")
    assert "line 2: not UTF-8" in _err(read_yaml, bad, "GPU YAML", "hardware file")


def test_csv_rows_name_short_rows_and_bad_quotes(tmp_path: Path) -> None:
    short = tmp_path / "t.csv"
    short.write_text("isl,osl\n1,2\n3\n")
    assert "t.csv:3: has 1 cells" in _err(lambda: list(csv_rows(short, "trace CSV", "--trace")))
    quote = tmp_path / "q.csv"
    quote.write_text('isl,osl\n"1,2\n')
    assert "bad CSV" in _err(lambda: list(csv_rows(quote, "trace CSV", "--trace")))
    empty = tmp_path / "e.csv"
    empty.write_text("")
    assert "empty file" in _err(lambda: list(csv_rows(empty, "trace CSV", "--trace")))


@pytest.mark.parametrize(
    "content, why",
    [
        (b"", "empty file"),
        (b'a,b\n"1,2\n', "bad CSV"),
        (b"a,b\n1,\xff\n", "not UTF-8"),
    ],
)
def test_read_csv_errors_are_one_line(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "m.csv"
    path.write_bytes(content)
    assert why in _err(read_csv, path, "measurement CSV", "--data")


@pytest.mark.parametrize(
    "value, why",
    [
        (float("inf"), "got inf"),
        (float("nan"), "got nan"),
        ("abc", "got 'abc'"),
        (True, "got True"),
        (0, "got 0"),
        (1001, "got 1001"),
        (2.5, "got 2.5"),
        (10**400, "got 1000"),
    ],
)
def test_check_number_names_field_and_range(value: object, why: str) -> None:
    text = _err(
        lambda: check_number(value, "config.json: num_hidden_layers", 1, 1000, integer=True)
    )
    assert text.startswith("config.json: num_hidden_layers: must be an integer in [1, 1,000]")
    assert why in text


def test_check_number_accepts_integral_floats() -> None:
    assert check_number(80.0, "x", 1, 1000, integer=True) == 80
    assert check_number(0.5, "x", 0, 1) == 0.5


def test_ten_thousand_gpu_specs_load(tmp_path: Path) -> None:
    """A 10,000-file hardware folder is valid input: every spec loads, once, in seconds."""
    import time

    from hardware.catalog import all_gpus

    text = (
        Path(__file__).resolve().parents[2] / "hardware" / "specs" / "h200_sxm.yaml"
    ).read_text()
    text = text.replace(
        "aliases: [H200, H200-SXM, H200 SXM 141GB, NVIDIA H200, HGX H200]", "aliases: []"
    )
    for i in range(10_000):
        spec = text.replace("key: h200_sxm", f"key: g{i}").replace("name: H200-SXM", f"name: G{i}")
        (tmp_path / f"g{i}.yaml").write_text(spec)
    start = time.perf_counter()
    specs = all_gpus([tmp_path])
    first = time.perf_counter() - start
    start = time.perf_counter()
    assert all_gpus([tmp_path]) is specs  # cached: later commands of the process pay nothing
    again = time.perf_counter() - start
    assert len(specs) >= 10_000 and specs["g9999"].name == "G9999"
    assert first < 60.0 and again < 5.0, (first, again)  # ~4 s on one idle core; generous for CI


def test_numeric_columns_whole_numbers_and_plain_values() -> None:
    """Counts must be whole numbers; the message shows the cell as written (not np.int64(0))."""
    import pandas as pd

    from hardware.input_files import numeric_columns

    df = pd.DataFrame({"tp": [1, 0], "share": [0.5, 0.25]})
    err = _err(numeric_columns, df, {"tp": (1, 8)}, "f.csv", ("tp",))
    assert err.startswith("f.csv:3: tp") and err.endswith("must be a whole number in [1, 8], got 0")
    frac = pd.DataFrame({"tp": [2.0, 1.5]})
    assert "whole number" in _err(numeric_columns, frac, {"tp": (1, 8)}, "f.csv", ("tp",))
    out = numeric_columns(df, {"tp": (0, 8), "share": (0, 1)}, "f.csv", ("tp",))
    assert out["share"].tolist() == [0.5, 0.25]  # fractions stay allowed outside ``integers``
