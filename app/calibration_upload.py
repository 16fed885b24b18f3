"""Benchmark results uploaded on the Plan page: unpacked safely, read by the CLI's readers.

The page takes several result files (vLLM ``--save-result`` JSON, SGLang ``--output-file`` JSONL,
their ``deployment.json``, or a validation-layout CSV) or a results folder as one ``.zip`` (what
``benchmark.sh`` leaves under ``results/``). Everything lands in a fresh private folder and is
then read by ``planner.calibration.data.load_data``, the reader behind ``planner calibrate e2e``,
so a file the CLI refuses is refused here with the same one-line message.

A zip is checked before anything is written: at most ``MAX_ZIP_BYTES`` uploaded, ``MAX_MEMBERS``
entries, ``MAX_MEMBER_BYTES`` per file and ``MAX_TOTAL_BYTES`` in all (counted while inflating,
not taken from the zip's own headers); member names are relative paths of plain characters
(no ``..``, no absolute or drive paths, no backslashes); no links, devices or encrypted members;
every data file is UTF-8 text. Files that are not data (``.json``, ``.jsonl``, ``.csv``) are
skipped and counted, as are macOS ``__MACOSX`` folders and hidden files.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from hardware.errors import PlannerInputError

FIELD = "Benchmark results"
MAX_ZIP_BYTES = 64 * 2**20
MAX_MEMBERS = 2_000
MAX_MEMBER_BYTES = 32 * 2**20
MAX_TOTAL_BYTES = 256 * 2**20
MAX_UPLOADS = 500
DATA_SUFFIXES = (".json", ".jsonl", ".csv")
_NAME = re.compile(r"[A-Za-z0-9._+@=-]{1,128}")
"""One path component of an uploaded or zipped file: plain characters only."""


@dataclass
class Unpacked:
    """Where the uploads were written and what was skipped."""

    folder: Path
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _size(n: int) -> str:
    return f"{n // 2**20} MB" if n >= 2**20 else f"{n:,} bytes"


def _fail(message: str) -> PlannerInputError:
    return PlannerInputError(FIELD, message)


def _safe_parts(name: str, where: str) -> tuple[str, ...]:
    """The components of a member or file name, each checked (relative, plain characters)."""
    if "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise _fail(f"{where}: {name[:80]!r} is not a relative path inside the upload")
    parts = tuple(p for p in PurePosixPath(name).parts if p not in ("", "."))
    if not parts or len(parts) > 16:
        raise _fail(f"{where}: {name[:80]!r} is not a file name")
    for part in parts:
        if part == ".." or not _NAME.fullmatch(part):
            raise _fail(
                f"{where}: {name[:80]!r}: names may use letters, digits and . _ + @ = - "
                "(no '..', spaces or other characters)"
            )
    return parts


def _text(data: bytes, where: str) -> bytes:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(f"{where}: not UTF-8 text (byte {exc.start})") from None
    return data


def _skip(parts: tuple[str, ...]) -> bool:
    return parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts)


def _write(dest: Path, parts: tuple[str, ...], data: bytes, out: Unpacked) -> None:
    target = dest.joinpath(*parts)
    if target.exists():
        raise _fail(f"{'/'.join(parts)} appears twice in the upload")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as fh:  # never replaces or follows an existing entry
        fh.write(data)
    out.files.append("/".join(parts))


def _member_bytes(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, budget: int) -> bytes:
    """The member's bytes, inflated in pieces and stopped at its caps (not its header's size)."""
    cap = min(MAX_MEMBER_BYTES, budget)
    with zf.open(info) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        what = "per file" if cap == MAX_MEMBER_BYTES else "in all"
        limit = MAX_MEMBER_BYTES if cap == MAX_MEMBER_BYTES else MAX_TOTAL_BYTES
        raise _fail(f"{where}: more than {_size(limit)} {what} once unpacked")
    return data


def _check_member(info: zipfile.ZipInfo, where: str) -> None:
    mode = info.external_attr >> 16  # Unix mode; its type bits are 0 when a tool records none
    if info.flag_bits & 0x1:
        raise _fail(f"{where}: encrypted members are not read")
    if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise _fail(f"{where}: {kind}; only regular files are read")


def unpack_zip(name: str, blob: bytes, dest: Path, out: Unpacked) -> None:
    """The data files of one zip into ``dest`` (see the module docstring for the checks)."""
    if len(blob) > MAX_ZIP_BYTES:
        raise _fail(f"{name}: {len(blob):,} bytes; a zip may be at most {_size(MAX_ZIP_BYTES)}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(blob))
        members = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as exc:
        raise _fail(f"{name}: not a zip file ({exc})") from None
    if len(members) > MAX_MEMBERS:
        raise _fail(f"{name}: {len(members):,} entries; at most {MAX_MEMBERS:,}")
    total = 0
    with zf:
        for info in members:
            where = f"{name}: {info.filename[:80]}"
            parts = _safe_parts(info.filename, name)
            _check_member(info, where)
            if info.is_dir() or _skip(parts):
                continue
            if not parts[-1].endswith(DATA_SUFFIXES):
                out.skipped.append("/".join(parts))
                continue
            try:
                data = _member_bytes(zf, info, where, MAX_TOTAL_BYTES - total)
            except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError) as exc:
                raise _fail(f"{where}: cannot be unpacked ({exc})") from None
            total += len(data)
            _write(dest, parts, _text(data, where), out)


def unpack(uploads: list[tuple[str, bytes]], dest: Path) -> Unpacked:
    """Write uploaded files (``(name, bytes)``; zips unpacked) into the empty folder ``dest``."""
    if not uploads:
        raise _fail("no file uploaded")
    if len(uploads) > MAX_UPLOADS:
        raise _fail(f"{len(uploads)} files; upload at most {MAX_UPLOADS} (or one zip)")
    out = Unpacked(dest)
    for name, blob in uploads:
        base = PurePosixPath(name.replace("\\", "/")).name
        if base.lower().endswith(".zip"):
            unpack_zip(base, blob, dest, out)
            continue
        parts = _safe_parts(base, "upload")
        if not base.endswith(DATA_SUFFIXES):
            raise _fail(f"{base}: expected .json, .jsonl, .csv or a .zip of a results folder")
        if len(blob) > MAX_MEMBER_BYTES:
            raise _fail(f"{base}: more than {_size(MAX_MEMBER_BYTES)}")
        _write(dest, parts, _text(blob, base), out)
    if not out.files:
        raise _fail("the upload holds no .json, .jsonl or .csv file")
    return out


def without_folder(message: str, folder: Path) -> str:
    """A reader's message with the private folder's path removed (names as uploaded)."""
    return message.replace(f"{folder}/", "").replace(str(folder), "the upload")
