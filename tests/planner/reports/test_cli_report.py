"""`planner report`: writes the files, or nothing at all with one error line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from planner.cli.main import main
from planner.reports import SHEETS


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _plan_file(tmp_path: Path, plan: Any) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return str(path)


def test_writes_all_three(
    tmp_path: Path, plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _run(
        capsys,
        "report",
        "--plan",
        _plan_file(tmp_path, plan),
        "--xlsx",
        str(tmp_path / "r.xlsx"),
        "--html",
        str(tmp_path / "r.html"),
        "--csv",
        str(tmp_path / "r.csv"),
    )
    assert rc == 0, err
    assert out.count("wrote ") == 3
    assert tuple(openpyxl.load_workbook(tmp_path / "r.xlsx").sheetnames) == SHEETS
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "r.csv").read_text().startswith("rank,")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "r.csv", "r.html", "r.xlsx"]


def test_json_output(
    tmp_path: Path, plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = _run(
        capsys,
        "report",
        "--plan",
        _plan_file(tmp_path, plan),
        "--csv",
        str(tmp_path / "r.csv"),
        "--format",
        "json",
    )
    assert rc == 0
    assert json.loads(out)["written"][0]["kind"] == "csv"


def test_not_a_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(
        capsys,
        "report",
        "--plan",
        _plan_file(tmp_path, {"model": "x", "gpu": "y"}),
        "--csv",
        str(tmp_path / "r.csv"),
    )
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "missing field 'workload'" in err
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2]"])
def test_not_json(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(text)
    rc, _, err = _run(capsys, "report", "--plan", str(path), "--csv", str(tmp_path / "r.csv"))
    assert rc == 2 and err.count("\n") == 1


def test_missing_folder_writes_nothing(
    tmp_path: Path, plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _run(
        capsys,
        "report",
        "--plan",
        _plan_file(tmp_path, plan),
        "--csv",
        str(tmp_path / "r.csv"),
        "--xlsx",
        str(tmp_path / "nope" / "r.xlsx"),
    )
    assert rc == 2
    assert err.count("\n") == 1 and "--xlsx" in err and "does not exist" in err
    assert not (tmp_path / "r.csv").exists()


def test_needs_an_output(
    tmp_path: Path, plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _run(capsys, "report", "--plan", _plan_file(tmp_path, plan))
    assert rc == 2 and err.count("\n") == 1


def test_missing_plan_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(
        capsys, "report", "--plan", str(tmp_path / "none.json"), "--csv", str(tmp_path / "r.csv")
    )
    assert rc == 2 and "cannot read" in err


def test_output_is_a_folder(
    tmp_path: Path, plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = _run(
        capsys, "report", "--plan", _plan_file(tmp_path, plan), "--html", str(tmp_path)
    )
    assert rc == 2 and "is a folder" in err


def test_same_path_twice(
    tmp_path: Path, plan: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "r")
    rc, _, err = _run(
        capsys, "report", "--plan", _plan_file(tmp_path, plan), "--html", out, "--csv", out
    )
    assert rc == 2 and "different files" in err
