"""`planner gpus --format json`: every GPU of the issue, with its sources."""

from __future__ import annotations

import json

import pytest

from planner.cli.main import main

ISSUE_GPUS = {"b300_sxm", "gb300", "gh200", "h20", "h800", "rtx_pro_6000", "mi355x", "l40"}


def test_gpus_json_lists_new_gpus_with_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "--format", "json"]) == 0
    rows = {r["key"]: r for r in json.loads(capsys.readouterr().out)["gpus"]}
    assert ISSUE_GPUS <= set(rows)
    for key in ISSUE_GPUS:
        r = rows[key]
        assert r["sources"]["peak_flops_per_s"] and r["sources"]["scale_out_bandwidth_bytes_per_s"]
        assert r["scale_out_gb_s"] > 0 and r["domain_size"] >= 1
    assert rows["gb300"]["domain_size"] == 72 and rows["gb300"]["fp4_tflops"] == 15000
    assert rows["mi355x"]["fp6_tflops"] == pytest.approx(10100)
