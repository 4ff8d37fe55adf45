"""The trace explorer in JupyterLab 4 (headless Debian Chromium, Playwright): filter for errors, open
one, read its conversation and waterfall, replay a recorded turn, and page without blocking the page.

The JupyterLab server, the browser and the page come from ``tests/test_browser.py`` (its fixtures,
the server reset for this module). The kernel makes a few traces with the demo model (failures, a tool,
hostile payloads) and the test writes a corpus of 1,000 conversations with mmsp's Tracer beside
them, so the table has thousands of rows.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from browser_utils import (
    ARTIFACTS,
    LONGTASK_OBSERVER,
    XSS_TRAP,
    axe_contrast,
    long_task_budget,
    save_screenshot,
    set_theme,
)
from test_browser import browser, open_lab, page, run_all_via_menu, server, sync_playwright_mod, wait_cell_done  # noqa: F401
from test_detail import gen_corpus
from test_explore import corpus
from tools import WEATHER_SOURCE

from mmsp_notebook import traces

MAKE = ("import io, os\nimport mmsp_notebook as mn\nfrom mmsp_notebook import traces\n" + WEATHER_SOURCE
        + "q = {'stream': io.StringIO()}\n"
        "for k in range(3):\n"
        "    mn.ask('Hello there', chat=f'c{k}', trace=f'demo/c{k}', **q)\n"
        "    mn.ask('Again?', model='demo+error', chat=f'c{k}', trace=f'demo/c{k}', **q)\n"
        "mn.ask(\"What's the weather in Paris?\", tools=[get_weather], chat='w', trace='demo/weather', **q)\n"
        "mn.ask('Hello', model='demo+xss', tools=[get_weather], chat='x', trace='demo/xss', **q)\n"
        "print('made')")
EXPLORE = "explorer = traces.explore([os.environ['MMSP_CACHE_DIR'], 'corpus'])\nexplorer"


def rows(pg):
    return pg.locator(".mmsp-explorer .mmsp-x-table tbody tr")


@pytest.mark.browser
def test_lab_explorer_finds_an_error_opens_it_and_replays(page, server):  # noqa: F811
    corpus(server.root / "corpus", 1000)
    name = server.write_notebook("lab_explore.ipynb", MAKE, EXPLORE)
    page.add_init_script(XSS_TRAP)
    open_lab(page, server, name, "explore")
    run_all_via_menu(page)
    wait_cell_done(page, 1, timeout=120_000)
    explorer = page.locator(".mmsp-explorer").first
    explorer.wait_for(timeout=60_000)
    summary = explorer.locator(".mmsp-x-summary")
    summary.filter(has_text=re.compile(r"of 3,\d{3} turns")).wait_for()
    assert rows(page).count() == 25

    # filter for errors, then this kernel's own traces
    explorer.locator(".mmsp-x-chip[data-quick=errors]").click()
    explorer.locator(".mmsp-x-chip[data-quick=errors][aria-pressed=true]").wait_for()
    explorer.locator(".mmsp-x-search").fill("demo/c")
    summary.filter(has_text=re.compile(r"^3 of 3,\d{3} turns")).wait_for()
    assert {r.get_attribute("data-status") for r in rows(page).all()} == {"error"}

    # open one: its conversation with the failed response selected and in view, and its waterfall
    rows(page).first.click()
    detail = explorer.locator(".mmsp-x-detail")
    selected = detail.locator(".mmsp-conv-msg.mmsp-conv-selected")
    selected.wait_for()
    assert "mmsp-conv-failed" in selected.get_attribute("class")
    assert "UpstreamError" in selected.locator(".mmsp-banner").inner_text()
    assert detail.locator(".mmsp-conv-user-text").first.inner_text() == "Hello there"
    assert detail.locator(".mmsp-conv-assistant .mmsp-turn .mmsp-footer").first.is_visible()
    bars = detail.locator(".mmsp-x-waterfall .mmsp-x-wf-bar")
    assert bars.count() >= 2 and "cut off: error" in detail.locator(".mmsp-x-waterfall").inner_text()
    in_view = selected.evaluate("""(el) => { const box = el.closest('.mmsp-x-conversation').getBoundingClientRect();
        const r = el.getBoundingClientRect(); return r.top >= box.top - 1 && r.top < box.bottom; }""")
    assert in_view
    replay = detail.locator(".mmsp-x-replay")
    assert replay.is_disabled()  # a failed response was never recorded

    # a recorded turn replays into the explorer, at once
    explorer.locator(".mmsp-x-chip[data-quick=errors]").click()
    explorer.locator(".mmsp-x-search").fill("demo/weather")
    summary.filter(has_text=re.compile(r"^2 of 3,\d{3} turns")).wait_for()
    rows(page).nth(1).click()
    detail.locator(".mmsp-x-detail-title", has_text="demo/weather · turn 1").wait_for()
    assert detail.locator(".mmsp-conv-selected .mmsp-tool .mmsp-tool-name").first.inner_text() == "get_weather"
    assert "tool runs: get_weather" in detail.locator(".mmsp-x-waterfall").inner_text()
    detail.locator(".mmsp-x-speed").select_option("inf")
    replay.click()
    played = detail.locator(".mmsp-x-replay-area .mmsp-turn[data-status=complete]")
    played.wait_for(timeout=30_000)
    assert "sunny" in played.locator(".mmsp-text").last.inner_text() or played.locator(".mmsp-text").count()
    save_screenshot(page, "lab_explore.png", full_page=False)

    # hostile content stays text
    explorer.locator(".mmsp-x-search").fill("demo/xss")
    explorer.locator(".mmsp-x-table tbody tr:first-child td:first-child", has_text="demo/xss").wait_for()
    rows(page).first.click()
    detail.locator(".mmsp-x-detail-title", has_text="demo/xss").wait_for()
    page.wait_for_timeout(300)
    assert page.evaluate("window.__xss") == [] and page.evaluate("window.__xssNodes") == []

    # paging through thousands of rows: no long task over 100 ms
    explorer.locator(".mmsp-x-search").fill("")
    summary.filter(has_text=re.compile(r"^3,\d{3} of 3,\d{3} turns")).wait_for()
    page.wait_for_timeout(300)
    assert page.evaluate(LONGTASK_OBSERVER), "this Chromium reports no longtask entries"
    label = explorer.locator(".mmsp-x-page")
    for n in range(2, 12):
        explorer.locator(".mmsp-x-next").click()
        label.filter(has_text=f"page {n} of").wait_for()
    explorer.locator(".mmsp-x-sort[data-col=latency]").click()
    explorer.locator(".mmsp-x-sort[data-col=latency]", has_text="▼").wait_for()
    explorer.locator(".mmsp-x-last").click()
    label.filter(has_text=re.compile(r"page (\d+) of \1$")).wait_for()
    explorer.locator(".mmsp-x-size").select_option("100")
    page.wait_for_function("document.querySelectorAll('.mmsp-explorer .mmsp-x-table tbody tr').length === 100")
    page.wait_for_timeout(300)
    tasks = page.evaluate("window.__longtaskObserver.takeRecords().forEach((e) => window.__longtasks.push("
                          "{name: e.name, start: Math.round(e.startTime), duration: Math.round(e.duration)}));"
                          " window.__longtasks")
    worst = max(tasks, key=lambda t: t["duration"], default=None)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "longtasks_explore.json").write_text(json.dumps({"threshold_ms": 100, "paging": tasks}, indent=1))
    print(f"\nexplorer paging: {len(tasks)} long tasks; worst: {worst}")
    assert not page.errors, page.errors
    budget = long_task_budget(page)
    assert worst is None or worst["duration"] <= budget, f"paging blocked the page for {worst['duration']} ms: {worst}"


@pytest.mark.browser
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_explorer_rows_keep_aa_contrast_when_selected_in_either_theme(page, server, theme):  # noqa: F811
    set_theme(server, theme)
    try:
        make = ("import io, os\nimport mmsp_notebook as mn\nfrom mmsp_notebook import traces\n"
                "for k in range(2):\n"
                "    mn.ask('Hello there', chat=f'c{k}', trace=f'theme/c{k}', stream=io.StringIO())\n"
                "explorer = traces.explore(os.environ['MMSP_CACHE_DIR'])\nexplorer")
        name = server.write_notebook(f"explore_{theme}.ipynb", make)
        open_lab(page, server, name, f"explore-{theme}")
        run_all_via_menu(page)
        wait_cell_done(page, 0, timeout=120_000)
        explorer = page.locator(".mmsp-explorer").first
        rows(page).first.wait_for()
        rows(page).first.click()
        explorer.locator(".mmsp-x-table tbody tr[aria-selected=true]").wait_for()
        explorer.locator(".mmsp-x-detail .mmsp-conv-selected").wait_for()
        page.mouse.move(0, 0)  # no row hovered
        result = axe_contrast(page, ".mmsp-explorer")
        assert result["checked"] > 20, result
        assert not result["violations"], json.dumps(result["violations"], indent=1)
    finally:
        set_theme(server, "light")


@pytest.mark.browser
def test_a_long_agent_conversation_opens_at_its_step_and_loads_the_rest_as_it_is_scrolled(page, server):  # noqa: F811
    gen_corpus.generate(server.root / "agent", files=1, seed=5, shape="agent")
    name = server.write_notebook("explore_agent.ipynb", "from mmsp_notebook import traces\n"
                                 "explorer = traces.explore('agent').sort('turn')\nexplorer")
    open_lab(page, server, name, "explore-agent")
    run_all_via_menu(page)
    wait_cell_done(page, 0, timeout=120_000)
    explorer = page.locator(".mmsp-explorer").first
    rows(page).first.wait_for()
    explorer.locator(".mmsp-x-size").select_option("100")
    page.wait_for_function("document.querySelectorAll('.mmsp-explorer .mmsp-x-table tbody tr').length > 40")
    rows(page).nth(30).click()
    detail = explorer.locator(".mmsp-x-detail")
    detail.locator(".mmsp-x-detail-title", has_text="turn 30").wait_for()
    turn = detail.locator(".mmsp-conv-selected")
    turn.locator(".mmsp-x-more-before").wait_for()
    assert "assistant turn (" in detail.locator(".mmsp-x-outline").inner_text()
    drawn = turn.locator(".mmsp-tool").count()
    # the selected step is in view, the steps around it drawn, not the whole turn
    in_view = turn.locator(".mmsp-items").evaluate("""(items) => { const box = items.closest('.mmsp-x-conversation')
        .getBoundingClientRect(); return [...items.children].some((el) => { const r = el.getBoundingClientRect();
        return r.top >= box.top - 1 && r.bottom <= box.bottom + 1; }); }""")
    assert in_view and 0 < drawn < 40
    conv = detail.locator(".mmsp-x-conversation")
    # scrolling to either end draws what is there, window by window, until the whole turn is drawn
    for edge, more in (("0", ".mmsp-x-more-before"), ("el.scrollHeight", ".mmsp-x-more-after")):
        deadline = time.monotonic() + 120
        while detail.locator(more).count() and time.monotonic() < deadline:
            conv.evaluate(f"(el) => {{ el.scrollTop = {edge}; }}")
            page.wait_for_timeout(250)
        assert not detail.locator(more).count(), (more, page.errors, detail.locator(more).evaluate(
            "(b) => [b.textContent, b.disabled, b.parentElement.className, b.getBoundingClientRect().top, "
            "b.closest('.mmsp-x-conversation').getBoundingClientRect().bottom, "
            "b.closest('.mmsp-x-conversation').scrollTop, b.closest('.mmsp-x-conversation').scrollHeight]"),
            turn.locator(".mmsp-tool").count())
    shown = traces.show("shard_00/agent0/conversation_00000", root=server.root / "agent")
    calls = sum(it["kind"] == "tool_call" for e in shown.entries for it in (e.get("vm") or {}).get("items", []))
    assert turn.locator(".mmsp-tool").count() == calls > drawn
    assert not page.errors, page.errors


@pytest.mark.browser
def test_an_explorer_whose_kernel_restarted_says_so_when_clicked(page, server):  # noqa: F811
    from test_browser import run_cell, wait_kernel_idle

    name = server.write_notebook(
        "explore_restart.ipynb",
        "import io, os\nimport mmsp_notebook as mn\nfrom mmsp_notebook import traces\n"
        "mn.ask('Hello there', trace='demo/r', stream=io.StringIO())\n"
        "explorer = traces.explore(os.environ['MMSP_CACHE_DIR'])\nexplorer")
    open_lab(page, server, name, "explore_restart")
    run_cell(page, 0)
    wait_cell_done(page, 0)
    explorer = page.locator(".mmsp-explorer").first
    rows(page).first.wait_for()
    page.locator(".lm-MenuBar-item", has_text="Kernel").first.click()
    page.get_by_role("menuitem", name=re.compile(r"^Restart Kernel…")).first.click()
    page.locator(".jp-Dialog button.jp-mod-accept").click()  # "Restart"
    page.wait_for_timeout(1000)
    wait_kernel_idle(page)
    rows(page).first.click()
    summary = explorer.locator(".mmsp-x-summary")
    summary.filter(has_text="no longer connected to a kernel: run its cell again").wait_for(timeout=5_000)
    assert not page.errors, page.errors
