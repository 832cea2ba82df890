"""The leaderboard site in a real browser: Debian's chromium and chromium-driver, driven headless by
Selenium, opening the site from disk (file://). The store holds real CPU runs of the example
submissions on the small task copies, the H200 example runs (results/h200_runs/*.json, which carry
speed-of-light figures) and a copy of a real run under a name with HTML in it.

Checks: the ranked rows and their order, that every plot drew one SVG mark per submission and shape
(and per stored run in the history), a link to a run page and back, that the HTML name stayed text,
and that no request left the machine (DevTools network log and the Performance API).
Screenshots go to $HARNESS_SITE_SCREENSHOTS (a folder, e.g. /tmp/site-shots) when set, else to a temp folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="the site needs plotly (the test extra installs it)")

from harness.api import load_board
from harness.report.site import build_site
from harness.report.site.browser import (
    browser_problem,
    chromium_path,
    headless_chromium,
    requests_made,
    screenshot,
    wait_for_plots,
)
from harness.results import RunResult
from harness.store.database import open_store
from tests.site_store import HTML_NAME, MX, TRITON, best_run_of, fill_real_store, record_copy

ROOT = Path(__file__).resolve().parents[1]
NO_CHROMIUM = chromium_path() is None or not Path("/usr/bin/chromedriver").is_file()
pytestmark = pytest.mark.skipif(NO_CHROMIUM, reason=f"no system browser: {browser_problem()}")

MARKS_JS = """
return Array.from(document.querySelectorAll('.plotly-graph-div')).map(g => ({
  id: g.id,
  svg: !!g.querySelector('svg.main-svg'),
  traces: Array.from(g.querySelectorAll('.scatterlayer .trace')).map(t => ({
    points: t.querySelectorAll('.points path.point').length,
    lines: t.querySelectorAll('path.js-line').length})),
  legend: Array.from(g.querySelectorAll('.legendtext')).map(e => e.textContent)}));
"""
ROWS_JS = """
return Array.from(document.querySelectorAll('section.board')).map(s => ({
  anchor: s.id,
  rows: Array.from(s.querySelectorAll('table.ranked tbody tr')).map(tr =>
    [tr.cells[0].textContent.trim(), tr.cells[1].textContent.trim(), tr.id])}));
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    store = str(tmp_path_factory.mktemp("browser-store"))
    fill_real_store(store)
    with open_store(store) as st:
        for f in sorted((ROOT / "results" / "h200_runs").glob("*.json")):
            result = RunResult.from_json(f.read_text())
            st.record(result, display_name=result.submission.name)
    html_run = record_copy(store, best_run_of(store, MX, TRITON), HTML_NAME)
    build = build_site(tmp_path_factory.mktemp("site") / "site", None, results_dir=store)
    return build, store, html_run


@pytest.fixture(scope="module")
def browser():
    with headless_chromium(width=1400, height=1000) as driver:
        yield driver


def open_page(driver, path: Path):
    driver.get(path.resolve().as_uri())
    wait_for_plots(driver)


def expected_marks(build) -> dict[str, list[int]]:
    """Plot div id -> the number of marks each of its traces must draw, from the page model."""
    out = {}
    for t in build.model.tasks:
        for s in t.sections:
            if s.series:
                out[f"plot-shapes-{s.anchor}"] = [len(x.points) for x in s.series] + (
                    [len(s.sol_floor_us)] if s.sol_floor_us else []
                )
            if s.sol_floor_us:
                out[f"plot-sol-{s.anchor}"] = [sum(p.sol_percent is not None for p in x.points) for x in s.series]
            if s.history:
                names = list(dict.fromkeys(p.name for p in s.history))
                out[f"plot-history-{s.anchor}"] = [sum(p.name == n for p in s.history) for n in names] + [0]
    return out


def test_index_in_a_browser(site, browser, tmp_path):
    build, store, html_run = site
    browser.get("about:blank")
    requests_made(browser)  # forget the browser's own start-up pages
    open_page(browser, build.index)

    # ranked rows, in the order of the shared ranking
    shown = {s["anchor"]: s["rows"] for s in browser.execute_script(ROWS_JS)}
    tasks = {t.name for t in build.model.tasks}
    assert tasks == {"mxfp4_small", "nvfp4_small", "mxfp4_mm", "nvfp4_gemm"}
    for t in build.model.tasks:
        board, _ = load_board(t.name, results_dir=store)
        for s, b in zip(t.sections, board.boards):
            assert shown[s.anchor] == [[e.rank_label, e.name, f"run-{e.run_id}"] for e in b.ranked]
    # the H200 runs: one mode ranked per board (leaderboard mode: each example's ranked run)
    assert len(shown["mxfp4-mm--nvidia-h200"]) >= 2 and len(shown["nvfp4-gemm--nvidia-h200"]) >= 2

    # every plot drew its SVG with one mark per submission and shape (and per run in the history)
    plots = browser.execute_script(MARKS_JS)
    expected = expected_marks(build)
    assert sorted(p["id"] for p in plots) == sorted(expected) and len(plots) == build.plots
    assert any(k.startswith("plot-sol-") for k in expected)  # the H200 runs have a % of SOL view
    for p in plots:
        assert p["svg"], p["id"]
        assert [tr["points"] for tr in p["traces"]] == expected[p["id"]], p["id"]
        if p["id"].startswith("plot-history-"):
            assert p["traces"][-1]["lines"] == 1 and p["legend"][-1] == "best so far (board)"
    h200 = next(p for p in plots if p["id"] == "plot-shapes-mxfp4-mm--nvidia-h200")
    assert h200["traces"][-1]["points"] == 6 and h200["legend"][-1] == "speed of light (floor)"

    # the name with HTML in it is text everywhere: table, legend, title
    assert browser.execute_script("return document.getElementById('injected')") is None
    assert browser.title == "Leaderboard"
    cell = browser.execute_script(f"return document.querySelector('#run-{html_run} td.name').textContent")
    assert cell == HTML_NAME
    legend = next(p["legend"] for p in plots if p["id"] == "plot-shapes-mxfp4-small--cpu-x86-64")
    assert HTML_NAME in legend

    # a link to a run page and back
    leader = build.model.tasks[0].sections[0].ranked[0]
    link = browser.find_element("css selector", f"#run-{leader.run_id} td.name a")
    link.click()
    assert browser.current_url.endswith(f"/runs/run-{leader.run_id}.html")
    assert leader.name in browser.find_element("css selector", "h1").text
    page = next(p for p in build.model.runs if p.run_id == leader.run_id)
    assert len(browser.find_elements("css selector", "table.cases tbody tr")) == len(page.cases)
    browser.find_element("id", "back-to-board").click()
    assert browser.current_url.endswith(f"/index.html#run-{leader.run_id}")
    assert browser.find_element("id", f"run-{leader.run_id}").is_displayed()

    # nothing left the machine: every request was for a file of the site
    urls = requests_made(browser)
    assert any(u.endswith("/assets/plotly.min.js") for u in urls) and any(u.endswith("/assets/site.css") for u in urls)
    assert [u for u in urls if not u.startswith(("file://", "data:"))] == []
    # the Performance API lists http(s) fetches as 'resource' entries (Chromium lists none for file://)
    entries = browser.execute_script(
        "return performance.getEntries().filter(e => ['resource', 'navigation'].includes(e.entryType)).map(e => e.name)"
    )
    assert entries and all(u.startswith("file://") for u in entries), entries

    # screenshots: the index and the run page of the CPU leader on mxfp4_small (figures missing on a CPU)
    out = Path(os.environ.get("HARNESS_SITE_SCREENSHOTS") or tmp_path)
    cpu_leader = next(s for t in build.model.tasks for s in t.sections if s.task == "mxfp4_small").ranked[0]
    screenshot(browser, build.index, out / "site_browser_index.png", max_height=4000)
    screenshot(browser, build.out_dir / "runs" / f"run-{cpu_leader.run_id}.html", out / "site_browser_run.png")
    for png in (out / "site_browser_index.png", out / "site_browser_run.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_the_request_log_sees_a_request_for_another_host(browser, tmp_path):
    """The offline check above can fail: a page that asks for an outside address shows up in the log.
    (The address is under .invalid and the browser resolves no host name, so nothing is sent.)"""
    page = tmp_path / "leaky.html"
    page.write_text('<!doctype html><img src="http://site-test.invalid/pixel.png"><p>x</p>')
    browser.get("about:blank")
    requests_made(browser)
    browser.get(page.as_uri())
    urls = requests_made(browser)
    assert "http://site-test.invalid/pixel.png" in urls
