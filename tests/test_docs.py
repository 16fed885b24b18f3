"""The docs a newcomer reads: a short README, the docs/ pages it links, links that resolve, and no
citation of a design document that lives outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 150
"""Longest README accepted: a user guide up front, the reference in docs/."""
DOC_PAGES = (
    "architecture",
    "engines",
    "accuracy",
    "bands",
    "calibration",
    "capacity",
    "performance",
    "reference",
)
"""Pages of docs/ that must exist (each `docs/<name>.md`)."""
SCANNED = ("hardware", "kernels_db", "planner", "solvers", "app", "tests", "README.md", "docs")
"""Where no file may cite the out-of-tree design document."""
OUT_OF_TREE_DESIGN = "DESIGN" + ".md"
"""Spelled in two parts so that this file does not match its own scan."""
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
"""A markdown inline link: [text](target)."""


def _markdown_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _anchors(md: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", md.read_text(encoding="utf-8"), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


@pytest.mark.parametrize("name", DOC_PAGES)
def test_doc_page_exists(name: str) -> None:
    page = ROOT / "docs" / f"{name}.md"
    assert page.is_file(), f"docs/{name}.md is missing"
    assert page.read_text(encoding="utf-8").strip(), f"docs/{name}.md is empty"


@pytest.mark.parametrize("md", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(md: Path) -> None:
    """Every relative link names an existing file and, with an anchor, one of its headings."""
    broken = []
    for target in LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor on the same page
        path, _, anchor = target.partition("#")
        dest = md.parent / path
        if not dest.exists() or (anchor and dest.is_file() and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{md.relative_to(ROOT)} links to missing files: {broken}"


def test_readme_names_the_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make run" in text
    assert "make test" in text


def _scanned_files() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        top = ROOT / name
        if top.is_file():
            files.append(top)
        else:
            files.extend(p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files


def test_no_file_cites_the_out_of_tree_design_document() -> None:
    me = Path(__file__).resolve()
    citing = [
        str(p.relative_to(ROOT))
        for p in _scanned_files()
        if p.resolve() != me and OUT_OF_TREE_DESIGN in p.read_bytes().decode("utf-8", "replace")
    ]
    assert not citing, f"cite docs/ instead of {OUT_OF_TREE_DESIGN}: {citing}"
