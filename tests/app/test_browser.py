"""Real-browser runs: Debian's chromium driven by Playwright against ``streamlit run app/main.py``.

One server for the module; each test opens its own page. Set ``PLANNER_SCREENSHOTS=DIR`` to also
save the screenshots committed under ``app/screenshots/``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.app.conftest import start_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 90_000
"""Generous but bounded: the server shares two cores with the other pytest worker."""
NEW_GPU = "B200"
STALE = "inputs changed - press Plan"
PAGES = {
    "plan": "Plan a deployment",
    "compare": "Compare GPUs",
    "fleet": "Fleet",
    "kernels": "Kernels",
    "traffic": "Traffic",
}
VIEW = {"width": 1280, "height": 800}
"""The window every test and screenshot uses: the answer must fit above its fold."""
PLOT = '[data-testid="stPlotlyChart"] .main-svg'

pytestmark = pytest.mark.browser


def _playwright():  # type: ignore[no-untyped-def]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(
            "playwright is not installed (pip install -e '.[browser]'; never `playwright install`)"
        )
    if not Path(CHROMIUM).is_file() or shutil.which(CHROMIUM) is None:
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium; .ci/run does it as root)")
    return sync_playwright


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_server(tmp_path_factory.mktemp("streamlit"))


@pytest.fixture(scope="module")
def browser(server: str) -> Iterator[Any]:
    sync_playwright = _playwright()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport=VIEW, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(WAIT_MS)
    try:
        yield pg
    finally:
        ctx.close()


def _plan_loaded(page: Any, server: str, path: str = "") -> None:
    page.goto(f"{server}/{path}")
    page.locator(f".st-key-pareto_chart {PLOT}").first.wait_for()


def _shot(page: Any, name: str, top: str = "") -> None:
    """Save a 1280 x 800 screenshot, with the element ``top`` at the top of the view where given
    (else as the page opens), when asked for."""
    folder = os.environ.get("PLANNER_SCREENSHOTS")
    if folder:
        if top:
            page.locator(top).first.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(1500)  # let the charts redraw
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)


def test_default_plan_renders_with_chart(page: Any, server: str) -> None:
    _plan_loaded(page, server)
    # the card's binding sentence and headroom lines stream in after the chart on a loaded machine
    # (make test on 2 busy cores read the card before them once): wait for them, bounded by WAIT_MS
    page.wait_for_function(
        "() => { const el = document.querySelector('.st-key-recommendation');"
        " return el !== null && el.innerText.includes('binds')"
        " && el.innerText.includes('headroom'); }"
    )
    card = page.locator(".st-key-recommendation")
    text = card.inner_text()
    assert "H200" in text and "binds" in text and "headroom" in text
    assert "objective: cost" in text and "SLO check" in text and "Binding limit" in text
    box = card.bounding_box()  # the answer, its cost, SLO check and binding limit: no scrolling
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= VIEW["height"]
    legend = page.locator('.st-key-pareto_chart [data-testid="stPlotlyChart"]').text_content()
    assert "H200-SXM" in legend and "TPOT SLO" in legend  # by GPU type and mode; the SLO drawn
    _shot(page, "plan")


def test_changing_an_input_greys_the_result(page: Any, server: str) -> None:
    _plan_loaded(page, server)
    assert page.get_by_text(STALE).count() == 0
    gpus = page.locator(".st-key-in_gpus")
    gpus.get_by_role("combobox").click()  # (in the sidebar)
    page.get_by_role("option", name=NEW_GPU, exact=True).click()
    page.keyboard.press("Escape")
    page.get_by_text(STALE).wait_for()
    # the greying style is its own streamed element: wait for it to apply (bounded by WAIT_MS)
    # rather than sample the opacity once
    page.wait_for_function(
        "() => { const el = document.querySelector('.st-key-plan_results');"
        " return el !== null && parseFloat(getComputedStyle(el).opacity) < 0.6; }"
    )
    page.get_by_role("button", name="Plan", exact=True).click()
    page.get_by_text(STALE).wait_for(state="detached")
    # two GPU types selected: each appears with its best plan or its reason, then the
    # prefill/decode pairs of the two (docs/heterogeneous.md)
    page.wait_for_function(  # the new plan's table, not the one-type table it replaces
        "() => document.querySelectorAll('.st-key-why_not tbody tr').length >= 2"
    )
    rows = page.locator(".st-key-why_not tbody tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert len(texts) >= 2 and sum("recommended" in t for t in texts) == 1
    assert all(t.startswith("prefill ") for t in texts[2:])


def test_bad_upload_keeps_the_plan_button_and_marks_the_field(
    page: Any, server: str, tmp_path: Path
) -> None:
    _plan_loaded(page, server)
    page.locator(".st-key-plan_len_src").get_by_text("CSV trace").click()
    bad = tmp_path / "trace.csv"
    bad.write_text("isl,osl\nabc,12\n")
    page.locator(".st-key-plan_trace input[type=file]").set_input_files(str(bad))
    alert = page.get_by_text("Trace CSV:", exact=False).first
    alert.wait_for()
    text = alert.inner_text()
    assert "trace.csv" in text and "/tmp" not in text and "--trace" not in text
    assert page.get_by_role("button", name="Plan", exact=True).is_visible()
    assert page.get_by_text("TTFT SLO (ms)").first.count() == 1  # the Targets fields stay
    assert page.get_by_text("Concurrent clients").first.count() == 1  # the Workload fields stay
    page.get_by_text(STALE).wait_for()


@pytest.mark.parametrize("path", list(PAGES))
def test_deep_link_loads(page: Any, server: str, path: str) -> None:
    page.goto(f"{server}/{path}")
    page.get_by_role("heading", name=PAGES[path]).first.wait_for()
    assert page.get_by_text("Page not found").count() == 0


def test_compare_lists_every_gpu(page: Any, server: str) -> None:
    page.goto(f"{server}/compare?gpus=h100_sxm,h200_sxm,b200_sxm")
    table = page.locator(".st-key-compare_table")
    table.wait_for()
    page.locator(f"{PLOT}").first.wait_for()
    rows = page.locator(".st-key-compare_table tbody tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert len(texts) == 3
    for gpu, text in zip(("H100", "H200", "B200"), texts, strict=True):
        assert gpu in text
        assert "meets the SLOs" in text or "no plan:" in text  # a number, or the reason
        assert "None" not in text
    _shot(page, "compare")


def test_fleet_and_kernels_pages_render(page: Any, server: str) -> None:
    page.goto(f"{server}/fleet")
    page.locator(".st-key-fleet_answer").wait_for()
    page.get_by_text("Use of each GPU pool").wait_for()  # the elements stream in one by one
    results = page.locator(".st-key-fleet_results").inner_text()
    assert "Latency per class against its SLO" in results and "Use of each GPU pool" in results
    assert "None" not in results and "h200_sxm" not in results
    _shot(page, "fleet")
    max_per = page.locator(".st-key-fleet_max_per_replica input")
    max_per.fill("4")
    max_per.press("Enter")
    page.get_by_text("inputs changed - press Solve fleet").wait_for()  # stale at once
    bad = Path(os.environ.get("TMPDIR", "/tmp")) / "planner-ui-bad-fleet.yaml"
    bad.write_text("classes: [")
    page.locator(".st-key-fleet_yaml input[type=file]").set_input_files(str(bad))
    page.get_by_text("Fleet YAML:", exact=False).first.wait_for()  # under its field
    assert page.get_by_role("button", name="Solve fleet").count() == 1  # the form stays
    assert page.locator(".st-key-fleet_classes").count() == 1
    page.goto(f"{server}/kernels?gpus=mi300x")
    page.locator(PLOT).first.wait_for()
    mark = page.locator(".st-key-kernels_uncalibrated").inner_text()
    assert "†" in mark and "MI300X" in mark and "model's alone" in mark  # the model's curve
    _shot(page, "kernels")


def test_downloads_open(page: Any, server: str) -> None:
    from openpyxl import load_workbook

    _plan_loaded(page, server)
    with page.expect_download() as got:
        page.get_by_role("button", name="Report (xlsx)").click()
    wb = load_workbook(io.BytesIO(Path(got.value.path()).read_bytes()))
    assert wb.sheetnames[0] == "Summary"
    with page.expect_download() as got:
        page.get_by_role("button", name="Engine configs (vllm, zip)").click()
    with zipfile.ZipFile(Path(got.value.path())) as zf:
        assert "vllm/launch.sh" in zf.namelist()


def _results_zip(folder: Path) -> Path:
    """benchmark.sh's results folder for the small vLLM plan, with synthetic runs (the serving
    model's predictions under shifted engine constants, as the round-trip test writes them), as
    the zip a person uploads."""
    from planner.cli.main import main
    from tests.planner.calibration.fixtures import small_plan, write_results

    plan = folder / "plan.json"
    plan.write_text(json.dumps(small_plan()))
    bundle = folder / "bundle"
    assert main(["emit", "--plan", str(plan), "--backend", "vllm", "--out", str(bundle)]) == 0
    write_results(bundle, "vllm")
    out = folder / "results.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted((bundle / "results").rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(bundle).as_posix())
    return out


def test_upload_results_compare_and_plan_with_the_profile(
    page: Any, server: str, tmp_path: Path
) -> None:
    upload = _results_zip(tmp_path)
    _plan_loaded(page, server)
    page.get_by_text("Calibrate to your benchmark results").click()
    page.locator(".st-key-plan_results_upload input[type=file]").set_input_files(str(upload))
    table = page.locator(".st-key-calibration_table")
    table.wait_for()
    page.locator(f".st-key-calibration_chart {PLOT}").first.wait_for()
    rows = page.locator(".st-key-calibration_summary tbody tr")
    rows.first.wait_for()
    summary = page.locator(".st-key-calibration_summary table").inner_text()
    assert "vllm" in rows.first.inner_text()
    for column in ("TTFT median error before (%)", "TPOT median error after (%)"):
        assert column in summary
    assert table.locator('[data-testid="stDataFrame"]').count() == 1  # every row (a canvas)
    assert page.get_by_text("fitted kernel_scale").count() >= 1
    page.get_by_text(STALE).wait_for()  # the profile is an input: the old plan greys out
    page.get_by_role("button", name="Plan", exact=True).click()
    note = page.locator(".st-key-plan_calibration_note")
    note.wait_for()
    assert "calibration profile uploaded in the UI (results.zip" in note.inner_text()
    with page.expect_download() as got:  # the plan's provenance names the profile
        page.get_by_role("button", name="Plan (JSON)").click()
    best = json.loads(Path(got.value.path()).read_text())["best"]["predicted"]["provenance"]
    assert "calibration profile uploaded in the UI" in best["engine_calibration"]
    assert "calibration profile uploaded in the UI" in best["bands"]


def _sidebar_number(page: Any, key: str, value: str) -> None:
    box = page.locator(f".st-key-{key} input")
    box.fill(value)
    box.press("Enter")


def test_a_link_fills_the_form_and_bad_values_are_named_at_once(page: Any, server: str) -> None:
    _plan_loaded(page, server, "?gpus=b200_sxm&tpot=45&objective=gpus")
    card = page.locator(".st-key-recommendation").inner_text()
    assert "B200" in card and "objective: gpus" in card
    assert page.locator(".st-key-in_tpot input").input_value() == "45.00"
    _sidebar_number(page, "in_ttft", "0")
    page.get_by_text("TTFT SLO (ms): must be > 0 ms").wait_for()
    assert page.get_by_role("button", name="Plan", exact=True).is_disabled()  # nothing runs
    page.get_by_text(STALE).wait_for()
    _sidebar_number(page, "in_ttft", "5000")
    _sidebar_number(page, "in_isl", "200000")
    page.get_by_text("maximum positions (131,072 tokens)", exact=False).wait_for()
    _shot(page, "plan_invalid")


def test_inputs_follow_to_other_pages_and_the_plan_links_there(page: Any, server: str) -> None:
    _plan_loaded(page, server)
    _sidebar_number(page, "in_tpot", "45")
    page.get_by_text(STALE).wait_for()  # the rerun that saw the new value has finished
    page.get_by_role("button", name="Plan", exact=True).click()
    page.get_by_text(STALE).wait_for(state="detached")
    # the links are redrawn after the warning goes: wait for the new plan's, bounded by WAIT_MS
    page.wait_for_function(
        "() => { const a = document.querySelector('.st-key-plan_links a');"
        " return a !== null && a.getAttribute('href').includes('tpot=45'); }"
    )
    href = page.locator(".st-key-plan_links a").first.get_attribute("href")
    assert href is not None and "tpot=45" in href and "compare" in href
    page.get_by_role("link", name="Compare GPUs").click()  # the top navigation
    page.locator(".st-key-compare_table").wait_for()
    assert page.locator(".st-key-in_tpot input").input_value() == "45.00"
    page.goto(f"{server}{href}")  # the plan's link: its inputs and the GPUs to compare with
    rows = page.locator(".st-key-compare_table tbody tr")
    rows.first.wait_for()
    assert rows.count() == 3
    assert "objective: cost" in page.locator(".st-key-compare_answer").inner_text()


def test_compare_marks_uncalibrated_gpus(page: Any, server: str) -> None:
    page.goto(f"{server}/compare?gpus=mi300x,h200_sxm")
    page.locator(".st-key-compare_table tbody tr").first.wait_for()
    assert "MI300X †" in page.locator(".st-key-compare_table").inner_text()
    note = page.locator(".st-key-uncalibrated_compare_table").inner_text()
    assert "MI300X has no measured kernel data" in note


def test_traffic_keeps_its_form_and_greys_stale_results(page: Any, server: str) -> None:
    page.goto(f"{server}/traffic")
    page.locator(".st-key-traffic_answer").wait_for()
    text = page.locator(".st-key-traffic_results").inner_text()
    assert "↑" not in text and "None" not in text
    _shot(page, "traffic")
    _sidebar_number(page, "traffic_peak", "0")
    page.get_by_text("must be > 0 and", exact=False).first.wait_for()
    page.get_by_text("inputs changed - press Size the fleet").wait_for()
    assert page.get_by_role("button", name="Size the fleet").is_disabled()
    assert page.locator(".st-key-traffic_source").count() == 1  # the form stays
