"""A comparison in JupyterLab 4: four columns stream side by side without blocking the page, then the
static comparison takes the live one's place (headless Debian chromium, Playwright)."""

# ruff: noqa: F811  (the fixtures of tests/test_browser.py, imported by name, are the tests' arguments)
from __future__ import annotations

import pytest
from browser_utils import long_task_budget
from test_browser import (  # noqa: F401  (fixtures of the browser tests: one JupyterLab, reset per module)
    LONGTASK_OBSERVER,
    browser,
    cells,
    open_lab,
    page,
    run_cell,
    server,
    sync_playwright_mod,
    wait_cell_done,
)

MODELS = "demo+tps=150,demo+tps=250,demo+tps=400+nothink,demo+tps=200"


@pytest.mark.browser
def test_lab_four_columns_stream_at_once_without_a_long_task(page, server):
    name = server.write_notebook("lab_compare.ipynb", "%load_ext mmsp_notebook",
                                 f"%%mmsp -m {MODELS}\nTell me about rivers")
    open_lab(page, server, name, "compare")
    run_cell(page, 0)
    wait_cell_done(page, 0)
    page.wait_for_timeout(500)
    page.evaluate("window.__recorderOff = true")
    assert page.evaluate(LONGTASK_OBSERVER), "this Chromium reports no longtask entries"
    page.evaluate("""() => { window.__seen = 0; new MutationObserver(() => {
      const live = document.querySelectorAll('.mmsp-compare:not(.mmsp-static) .mmsp-column .mmsp-text');
      window.__seen = Math.max(window.__seen, live.length);
    }).observe(document.body, {subtree: true, childList: true, characterData: true}); }""")
    run_cell(page, 1)
    cell = cells(page).nth(1)
    # live: one column per model, their texts growing at once
    live = cell.locator(".mmsp-compare:not(.mmsp-static) .mmsp-column")
    live.nth(3).wait_for(timeout=60_000)
    assert live.count() == 4
    assert [live.nth(i).get_attribute("aria-label") for i in range(4)] == MODELS.split(",")
    cell.locator(".mmsp-compare.mmsp-static").wait_for(timeout=120_000)
    wait_cell_done(page, 1)
    page.wait_for_timeout(500)
    tasks = page.evaluate(
        "window.__longtaskObserver.takeRecords().forEach((e) => window.__longtasks.push({start: Math.round(e.startTime),"
        " duration: Math.round(e.duration)})); window.__longtasks")
    static = cell.locator(".mmsp-compare.mmsp-static")
    assert static.locator(".mmsp-column").count() == 4
    heads = static.locator(".mmsp-column-head").all_text_contents()
    assert heads == MODELS.split(",")
    for name in MODELS.split(","):  # each saved column, as each live one, is a region named for its model
        assert static.get_by_role("region", name=name, exact=True).count() == 1
    assert static.locator(".mmsp-compare-figures td.mmsp-best").count() >= 3
    assert page.evaluate("window.__seen") == 4  # all four texts were streaming in the live view
    worst = max(tasks, key=lambda t: t["duration"], default=None)
    assert not page.errors, page.errors
    budget = long_task_budget(page)
    assert worst is None or worst["duration"] <= budget, f"the main thread was blocked for {worst['duration']} ms: {worst}"
