"""Uploaded benchmark results: safe unpacking and the CLI's readers behind the Plan page."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path

import pytest

from app import calibration_upload as cu
from app.calibration_view import comparison_frame, summary_frame
from hardware.errors import PlannerInputError
from planner.calibration.data import load_data
from planner.calibration.profile import calibrate
from planner.cli.main import main
from tests.planner.calibration.fixtures import small_plan, write_results


def _zip(members: dict[str, bytes], links: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


def _unpack(tmp_path: Path, uploads: list[tuple[str, bytes]]) -> cu.Unpacked:
    dest = tmp_path / "dest"
    dest.mkdir()
    return cu.unpack(uploads, dest)


def test_zip_of_a_results_folder_unpacks_data_files_only(tmp_path: Path) -> None:
    blob = _zip(
        {
            "results/run-1/client0.json": b"{}",
            "results/run-1/deployment.json": b"{}",
            "results/run-1/server.log": b"log",
            "__MACOSX/results/._client0.json": b"\x00\xff",
            "results/.DS_Store": b"\x00\xff",
        }
    )
    got = _unpack(tmp_path, [("results.zip", blob)])
    assert sorted(got.files) == ["results/run-1/client0.json", "results/run-1/deployment.json"]
    assert got.skipped == ["results/run-1/server.log"]
    assert (tmp_path / "dest/results/run-1/client0.json").read_bytes() == b"{}"


@pytest.mark.parametrize(
    ("members", "links", "message"),
    [
        ({"../evil.json": b"{}"}, (), "'..'"),
        ({"/etc/evil.json": b"{}"}, (), "not a relative path"),
        ({"run\\evil.json": b"{}"}, (), "not a relative path"),
        ({"C:/evil.json": b"{}"}, (), "not a relative path"),
        ({"run/ev il.json": b"{}"}, (), "names may use"),
        ({"run/a.json": b"\xff\xfe"}, (), "not UTF-8"),
        ({}, ("run/link.json",), "symbolic link"),
    ],
)
def test_bad_zip_members_are_refused(
    tmp_path: Path, members: dict[str, bytes], links: tuple[str, ...], message: str
) -> None:
    with pytest.raises(PlannerInputError) as exc:
        _unpack(tmp_path, [("r.zip", _zip(members, links))])
    assert message in exc.value.message and "r.zip" in exc.value.message
    assert not any((tmp_path / "dest").rglob("*.json"))  # nothing outside, nothing linked


def test_caps_are_counted_while_inflating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cu, "MAX_MEMBER_BYTES", 1000)
    bomb = _zip({"run/a.json": b" " * 100_000})  # compresses to a few hundred bytes
    assert len(bomb) < 1000
    with pytest.raises(PlannerInputError, match="more than 1,000 bytes per file"):
        _unpack(tmp_path, [("r.zip", bomb)])
    monkeypatch.setattr(cu, "MAX_MEMBERS", 2)
    many = _zip({"a.json": b"{}", "b.json": b"{}", "c.json": b"{}"})
    with pytest.raises(PlannerInputError, match="3 entries; at most 2"):
        cu.unpack([("r.zip", many)], tmp_path / "dest")


def test_loose_files_and_their_checks(tmp_path: Path) -> None:
    got = _unpack(tmp_path, [("client0.json", b"{}"), ("deployment.json", b"{}")])
    assert sorted(got.files) == ["client0.json", "deployment.json"]
    for uploads, message in (
        ([("notes.txt", b"x")], "expected .json, .jsonl, .csv or a .zip"),
        ([("a.json", b"{}"), ("a.json", b"{}")], "appears twice"),
        ([("a.zip", b"not a zip")], "not a zip file"),
        ([], "no file uploaded"),
    ):
        dest = tmp_path / f"d{len(list(tmp_path.iterdir()))}"
        dest.mkdir()
        with pytest.raises(PlannerInputError, match=message):
            cu.unpack(uploads, dest)


def test_reader_errors_name_the_uploaded_file_not_the_server_folder(tmp_path: Path) -> None:
    got = _unpack(tmp_path, [("r.zip", _zip({"run-1/client0.json": b"{}"}))])
    with pytest.raises(PlannerInputError) as exc:
        load_data(got.folder)
    text = cu.without_folder(exc.value.message, got.folder)
    assert "run-1" in text and "deployment.json" in text and str(tmp_path) not in text


def test_synthetic_results_fit_and_compare(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(small_plan()))
    bundle = tmp_path / "bundle"
    assert main(["emit", "--plan", str(plan), "--backend", "vllm", "--out", str(bundle)]) == 0
    write_results(bundle, "vllm")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in sorted((bundle / "results").rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(bundle).as_posix())
    got = _unpack(tmp_path, [("results.zip", buf.getvalue())])
    frame = comparison_frame(calibrate(load_data(got.folder), progress=False))
    assert len(frame) == 8
    summary = summary_frame(frame).iloc[0]
    assert summary["TTFT median error after (%)"] < summary["TTFT median error before (%)"]
    assert summary["TPOT median error after (%)"] < 1.0
