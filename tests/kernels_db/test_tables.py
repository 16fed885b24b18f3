"""Table checks (bad rows rejected with file and row) and the AIConfigurator importer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hardware.errors import PlannerInputError
from kernels_db.folder import read_folder
from kernels_db.tables import read_table

GOOD = "m,n,k,dtype,latency_s\n1,4096,4096,bf16,1.3e-05\n2,4096,4096,bf16,1.31e-05\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("m,n,dtype,latency_s\n1,2,bf16,1e-5\n", r"missing column\(s\) k"),
        (GOOD + "4,4096,4096,bf16,-1e-05\n", "row 4: latency_s must be a positive"),
        (GOOD + "4,4096,4096,bf16,\n", "row 4: column 'latency_s' is empty or NaN"),
        (GOOD + "2,4096,4096,bf16,2e-05\n", "row 4: duplicate key"),
        (GOOD + "2.5,4096,4096,bf16,2e-05\n", r"row 4: 'm' must be an integer in \[1, 2\^53\]"),
        (  # n = 0: once a divide-by-zero in the fit (fuzz, 6,000 cases, warnings as errors)
            GOOD + "4,0,4096,bf16,2e-05\n",
            r"row 4: 'n' must be an integer in \[1, 2\^53\], got 0",
        ),
        (  # a NUL in a dtype cell: once a KeyError traceback (fuzz, 3,000 cases)
            GOOD + "4,4096,4096,\x00bf16,2e-05\n",
            r"row 4: 'dtype' must be one of fp32, .*, got '\\x00bf16'",
        ),
        (GOOD + "4,4096,4096,bf17,2e-05\n", r"row 4: 'dtype' must be one of .*bf16.*'bf17'"),
        (  # past int64: once an OverflowError traceback (fuzz, 1,500 cases)
            GOOD + "999999999999999999999999999999,4096,4096,bf16,2e-05\n",
            r"row 4: 'm' must be an integer in \[1, 2\^53\]",
        ),
    ],
)
def test_bad_tables_are_rejected_naming_file_and_row(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "gemm.csv"
    path.write_text(text)
    with pytest.raises(PlannerInputError, match=expected) as err:
        read_table(path, "h200_sxm")
    assert "gemm.csv" in str(err.value)


def test_good_table_reads(tmp_path: Path) -> None:
    path = tmp_path / "gemm.csv"
    path.write_text(GOOD)
    table = read_table(path, "h200_sxm")
    assert len(table) == 2 and table.latency_s[0] == pytest.approx(1.3e-5)


def _aic_nccl(tmp_path: Path) -> Path:
    src = (
        "github:ai-dynamo/aiconfigurator "
        "aic-core/src/x/systems/data/h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet @abc"
    )
    rows = [
        (src, "all_reduce", "half", 8, 1024, 0.02),
        (src, "all_reduce", "int8", 8, 2048, 0.03),  # same bytes as the half row: dropped
        (src, "all_reduce", "half", 8, 4096, 0.04),
        (src, "alltoall", "half", 4, 1024, 0.05),
    ]
    df = pd.DataFrame(
        rows,
        columns=["source_path", "op_name", "nccl_dtype", "num_gpus", "message_size", "latency"],
    )
    df["kernel_source"] = "NCCL"
    path = tmp_path / "aiconfigurator_nccl.csv"
    df.to_csv(path, index=False)
    return path


def test_aiconfigurator_units_and_duplicates(tmp_path: Path) -> None:
    _aic_nccl(tmp_path)
    ts = read_folder(tmp_path)
    table = ts.tables["h200_sxm"]["comm"]
    assert len(table) == 3
    ar = table.keys["collective"] == "all_reduce"
    assert sorted(table.keys["bytes"][ar].tolist()) == [2048, 8192]  # elements x 2 bytes
    assert np.allclose(sorted(table.latency_s[ar]), [2e-5, 4e-5])  # ms -> s
    assert "all_to_all" in set(table.keys["collective"].tolist())
    assert sum(ts.skipped_rows.values()) == 1


def test_aiconfigurator_bad_latency_names_file_and_row(tmp_path: Path) -> None:
    path = _aic_nccl(tmp_path)
    df = pd.read_csv(path)
    df.loc[2, "latency"] = float("nan")
    df.to_csv(path, index=False)
    with pytest.raises(PlannerInputError, match=r"aiconfigurator_nccl.csv row 4"):
        read_folder(tmp_path)


def test_every_allowed_dtype_reads_and_prices(tmp_path: Path) -> None:
    """A dtype the reader accepts must not crash the fit further on (fp6 once had no bytes per
    element and no math path: KeyError tracebacks in validate kernels)."""
    from hardware.catalog import get_gpu
    from hardware.spec import DTYPES
    from kernels_db.roofline import dtype_bytes

    for d in DTYPES:
        assert float(dtype_bytes(d)) > 0
        assert get_gpu("h100_sxm").peak_flops(d) > 0
