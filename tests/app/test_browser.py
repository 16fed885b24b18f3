"""One real-browser run: Debian's chromium driven by Playwright against ``streamlit run app/main.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 60_000
"""Generous but bounded: the server shares two cores with the other pytest worker."""
NEW_GPU = "B200"

pytestmark = pytest.mark.browser


def _playwright():  # type: ignore[no-untyped-def]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[browser]'; never `playwright install`)")
    if not Path(CHROMIUM).is_file() or shutil.which(CHROMIUM) is None:
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium; .ci/run does it as root)")
    return sync_playwright


def _recommendation(page) -> str:  # type: ignore[no-untyped-def]
    return page.locator(".st-key-recommendation").inner_text(timeout=WAIT_MS)


def test_plan_page_in_chromium(streamlit_server: str, tmp_path: Path) -> None:
    sync_playwright = _playwright()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(WAIT_MS)
            page.goto(streamlit_server)  # the Plan page is the default page
            page.locator('.st-key-pareto_chart [data-testid="stPlotlyChart"] .main-svg').first.wait_for()
            before = _recommendation(page)
            assert "H200" in before

            gpus = page.locator(".st-key-plan_gpus")
            gpus.get_by_role("combobox").click()
            page.get_by_role("option", name=NEW_GPU, exact=True).click()
            page.keyboard.press("Escape")
            gpus.get_by_role("button", name="Remove H200-SXM").click()  # the answer must use the new GPU
            gpus.get_by_text(NEW_GPU, exact=True).wait_for()
            page.get_by_role("button", name="Plan", exact=True).click()
            page.wait_for_function(
                "([sel, old]) => { const el = document.querySelector(sel);"
                " return el && el.innerText !== old && el.innerText.includes('B200'); }",
                arg=[".st-key-recommendation", before], timeout=WAIT_MS)
            after = _recommendation(page)
            assert after != before
            assert NEW_GPU in after
            page.set_viewport_size({"width": 1400, "height": 3400})  # the app scrolls inside its own pane
            page.locator('.st-key-pareto_chart [data-testid="stPlotlyChart"] .main-svg').first.wait_for()
            shot = tmp_path / "plan_page.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
