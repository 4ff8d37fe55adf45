"""Front-end quality in real browsers: keys, saved chats, themes and contrast, tables, the wire view,
scrolling, copy and insert, and the smaller things a user notices (JupyterLab 4 and Notebook 7).

The same setup as tests/test_browser.py (its fixtures and helpers): one ``jupyter lab`` server,
reset for this module, headless Debian Chromium through Playwright. Contrast is checked with axe-core (npm, injected
into the page) on the magic's outputs and the chat, in JupyterLab's light and dark themes;
screenshots of the chat, a tool turn, an error and the wire view in both themes, at 1400 and 600
pixels, go to ``artifacts/`` for review.
"""
# ruff: noqa: F811  (the fixtures of tests/test_browser.py, imported by name, are the tests' arguments)

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from browser_utils import ARTIFACTS, axe_contrast, save_screenshot, set_theme
from test_browser import (  # noqa: F401  (fixtures)
    SETUP,
    browser,
    cells,
    chat_in,
    last_assistant,
    open_lab,
    page,
    run_all_via_menu,
    run_cell,
    send_chat,
    server,
    static_in,
    sync_playwright_mod,
    wait_cell_done,
    wait_kernel_idle,
    wait_lab_notebook,
    wait_status,
)
from tools import WEATHER_SOURCE, weather_in

CHAT = "from mmsp_notebook import Chat\n" + WEATHER_SOURCE


def open_nb7(page, server, name: str) -> None:
    page.goto(server.page_url(f"/notebooks/{name}"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60_000)
    wait_kernel_idle(page)


def open_in(page, server, name: str, host: str, workspace: str) -> None:
    if host == "lab":
        open_lab(page, server, name, workspace)
    else:
        open_nb7(page, server, name)


def visible_count(locator) -> int:
    return sum(1 for k in range(locator.count()) if locator.nth(k).is_visible())


# --------------------------------------------------------------------------- 1. keys stay in the chat
@pytest.mark.browser
@pytest.mark.parametrize("host", ["lab", "nb7"])
def test_notebook_shortcuts_never_fire_from_the_chats_fields(page, server, host):
    """Shift+Enter is a new line; Ctrl+Enter, Esc and single letters do nothing to the notebook."""
    name = server.write_notebook(f"keys_{host}.ipynb", CHAT + "chat = Chat()\nchat", "x = 1")
    open_in(page, server, name, host, "keys")
    run_cell(page, 0)
    wait_cell_done(page, 0)
    chat = chat_in(page, 0)
    box = chat.locator("textarea.mmsp-input")
    box.wait_for()
    chat.evaluate("(el) => { el.__mark = 'same chat'; }")
    prompt = cells(page).nth(0).locator(".jp-InputPrompt").first.inner_text()
    box.click()
    page.keyboard.type("line one")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("line two")
    for key in ("Control+Enter", "Escape"):
        page.keyboard.press(key)
    page.keyboard.type(" abd")  # command mode would insert above, below, and "d d" delete cells
    page.keyboard.press("d")
    page.wait_for_timeout(800)
    assert cells(page).count() == 2
    assert cells(page).nth(0).locator(".jp-InputPrompt").first.inner_text() == prompt  # not run again
    assert chat.evaluate("(el) => el.__mark") == "same chat"  # the widget was not wiped
    assert box.input_value() == "line one\nline two abdd"
    assert page.evaluate("document.activeElement && document.activeElement.classList.contains('mmsp-input')")
    # Enter still sends
    page.keyboard.press("Enter")
    chat.locator(".mmsp-msg-user .mmsp-user-text").wait_for()
    assert chat.locator(".mmsp-msg-user .mmsp-user-text").inner_text() == "line one\nline two abdd"
    wait_status(last_assistant(chat), "complete")
    # the conversation itself, focused to read or scroll it, and its buttons: letters there are not
    # the notebook's either ("a" would insert a cell, "m" make the chat's cell Markdown, "d d" delete it)
    for target in (".mmsp-chat-log", ".mmsp-msg-assistant .mmsp-copy", ".mmsp-new-chat"):
        chat.locator(target).first.focus()
        for key in ("a", "b", "m", "d", "d", "Shift+Enter"):
            page.keyboard.press(key)
    page.wait_for_timeout(800)
    assert cells(page).count() == 2
    assert chat.evaluate("(el) => el.__mark") == "same chat"
    assert cells(page).nth(0).evaluate("(c) => c.classList.contains('jp-CodeCell')")
    assert not page.errors, page.errors


# A page served over plain http from another host (a JupyterLab on a server) has no Clipboard API
NO_CLIPBOARD = "Object.defineProperty(Navigator.prototype, 'clipboard', {get: () => undefined, configurable: true});"


@pytest.mark.browser
def test_copy_without_the_clipboard_api_leaves_the_focus_on_its_button(page, server):
    """The copy then goes through a hidden textarea, which takes the focus to be selected: the focus
    comes back to Copy, so the next keys are not the notebook's command-mode shortcuts."""
    page.add_init_script(NO_CLIPBOARD)
    name = server.write_notebook("copy_http.ipynb", CHAT + "chat = Chat()\nchat", "x = 1")
    open_lab(page, server, name, "copy_http")
    run_cell(page, 0)
    wait_cell_done(page, 0)
    chat = chat_in(page, 0)
    chat.locator("textarea.mmsp-input").wait_for()
    send_chat(chat, "Show me some code")
    wait_status(last_assistant(chat), "complete")
    assert page.evaluate("navigator.clipboard === undefined")
    for target in (".mmsp-msg-assistant .mmsp-copy", ".mmsp-msg-assistant .mmsp-copy-code"):
        button = chat.locator(target).first
        button.focus()
        page.keyboard.press("Enter")
        assert button.text_content() == "Copied", target
        assert button.evaluate("(b) => b === document.activeElement"), target
        for key in ("d", "d", "a"):  # in command mode: delete the cell, insert one above
            page.keyboard.press(key)
    page.wait_for_timeout(800)
    assert cells(page).count() == 2
    assert not page.errors, page.errors


# --------------------------------------------------------------------------- 2. a saved chat
@pytest.mark.browser
def test_a_saved_chat_shows_its_conversation_in_nbconvert_and_a_reopened_notebook(page, server, tmp_path):
    name = server.write_notebook("saved_chat.ipynb", CHAT + "chat = Chat(tools=[get_weather])\nchat")
    open_lab(page, server, name, "saved")
    run_cell(page, 0)
    chat = chat_in(page, 0)
    chat.locator("textarea.mmsp-input").wait_for()
    for prompt in ("What's the weather in Rome?", "draw a lighthouse"):
        send_chat(chat, prompt)
        chat.locator(".mmsp-msg-user .mmsp-user-text", has_text=prompt).wait_for()
        wait_status(last_assistant(chat), "complete")
    # live: the widget shows, its saved view beside it does not
    saved = cells(page).nth(0).locator(".mmsp-chat-static")
    saved.wait_for(state="attached")
    page.wait_for_function("() => { const s = document.querySelector('.mmsp-chat-static');"
                           " return s && s.querySelectorAll('.mmsp-msg-assistant').length === 2; }", timeout=20_000)
    assert not saved.is_visible()
    page.keyboard.press("Control+s")
    path = server.root / name
    deadline = time.monotonic() + 20
    while "draw a lighthouse" not in path.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    nb = json.loads(path.read_text())
    outputs = nb["cells"][0]["outputs"]
    htmls = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert len(htmls) == 1 and "mmsp-chat-static" in "".join(htmls[0])
    html = "".join(htmls[0])
    for part in ("What&#x27;s the weather in Rome?", "draw a lighthouse", 'class="mmsp-item mmsp-thinking"',
                 'class="mmsp-tool-name"', weather_in("Rome"), '<img class="mmsp-img" src="data:image/png;base64,',
                 'class="mmsp-footer"', "tokens cached "):
        assert part in html, part
    assert not any("object at 0x" in "".join(o.get("data", {}).get("text/plain", "")) for o in outputs)

    # nbconvert's HTML (no widget state): the conversation, as the magic's static output shows a turn
    out = tmp_path / "saved_chat.html"
    subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", "--output", str(out), str(path)],
                   check=True, capture_output=True, timeout=120)
    exported = out.read_text()
    assert "mmsp-chat-static" in exported and weather_in("Rome") in exported and 'class="mmsp-img"' in exported

    # a new kernel, the notebook reopened: the conversation as it stood, no widget error
    page.close()
    server.shutdown_kernels()
    pg = page.context.new_page()
    open_lab(pg, server, name, "reopened")
    pg.wait_for_timeout(3000)  # the widget manager has restored (and found no model)
    assert pg.get_by_text("Error displaying widget").count() == 0 or not pg.get_by_text("Error displaying widget").first.is_visible()
    shown = pg.locator(".jp-OutputArea-output .mmsp-chat-static").first
    assert shown.is_visible()
    assert shown.locator(".mmsp-msg-user .mmsp-user-text").first.inner_text() == "What's the weather in Rome?"
    turn = shown.locator(".mmsp-msg-assistant .mmsp-turn").first
    assert turn.locator(".mmsp-tool .mmsp-tool-output").inner_text() == weather_in("Rome")
    assert shown.locator(".mmsp-img").first.evaluate("(i) => i.complete && i.naturalWidth > 0")
    assert turn.locator(".mmsp-footer").is_visible()
    assert pg.evaluate("getComputedStyle(document.querySelector('.mmsp-chat-static .mmsp-tool-head')).display") == "flex"
    save_screenshot(pg, "chat_reopened.png")


# --------------------------------------------------------------------------- 3 and 4. themes and contrast
THEME_CELLS = (
    SETUP + "from mmsp_notebook import Chat\n",
    "%%mmsp --tools get_weather\nWhat's the weather in Paris?",
    "%%mmsp -m demo+401\nhello",
    "%%mmsp -m demo+cut-text\nhello",
    "%%mmsp --wire\nhello",
    "chat = Chat(tools=[get_weather], thinking='low')\nchat",
    "bad = Chat(model='demo+401')\nbad",
    "slow = Chat(model='demo+tps=4')\nslow",
)


@pytest.mark.browser
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_outputs_follow_the_theme_with_aa_contrast(page, server, theme):
    set_theme(server, theme)
    try:
        name = server.write_notebook(f"theme_{theme}.ipynb", *THEME_CELLS)
        page.emulate_media(color_scheme="dark" if theme == "dark" else "light", reduced_motion="reduce")
        open_lab(page, server, name, f"theme-{theme}")
        assert page.evaluate("document.body.dataset.jpThemeLight") == ("true" if theme == "light" else "false")
        run_all_via_menu(page)
        wait_cell_done(page, 6, timeout=90_000)
        chat, bad = chat_in(page, 5), chat_in(page, 6)
        chat.locator("textarea.mmsp-input").wait_for()
        send_chat(chat, "What's the weather in Oslo?")
        wait_status(last_assistant(chat), "complete")
        send_chat(bad, "hello")
        wait_status(last_assistant(bad), "error")
        page.wait_for_timeout(400)
        # one banner for the failed turn (its own), with a Retry in full view
        assert visible_count(bad.locator(".mmsp-banner")) == 1
        assert bad.locator(".mmsp-retry").evaluate("(b) => getComputedStyle(b).opacity") == "1"
        report = axe_contrast(page, ".jp-OutputArea-output .mmsp-root, .jp-OutputArea-output .mmsp-wire")
        (ARTIFACTS / f"axe_{theme}.json").parent.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"axe_{theme}.json").write_text(json.dumps(report, indent=1))
        assert report["roots"] >= 6 and report["checked"] > 50, report
        assert report["violations"] == [], json.dumps(report["violations"][:8], indent=1)
        # every status colour follows the theme: no light box on a dark page, no dark text on it
        colours = page.evaluate("""() => {
          const lum = (c) => { const m = c.match(/[\\d.]+/g).map(Number);
            const scale = c.startsWith('color(') ? 1 : 255;  // color-mix() computes to color(srgb r g b / a)
            const [r, g, b] = m.slice(0, 3).map((v) => { v /= scale; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
            return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
          const bg = (el) => { for (let e = el; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;
            const a = (c.match(/[\\d.]+/g) || []).map(Number); if (a.length === 3 || (a.length === 4 && a[3] > 0.5)) return c; } return 'rgb(255,255,255)'; };
          const out = {};
          for (const sel of ['.mmsp-banner.mmsp-error', '.mmsp-banner.mmsp-warn', '.mmsp-hint', '.mmsp-footer']) {
            const el = document.querySelector(sel); if (!el) continue;
            out[sel] = {fg: lum(getComputedStyle(el).color), page: lum(bg(el))};
          }
          return out;
        }""")
        for sel, c in colours.items():
            if theme == "dark":
                assert c["page"] < 0.1 and c["fg"] > 0.3, (sel, c)
            else:
                assert c["page"] > 0.6 and c["fg"] < 0.2, (sel, c)
        # the Stop button of a streaming chat, in its colours
        slow = chat_in(page, 7)
        send_chat(slow, "Tell me about lighthouses")
        stop = slow.locator("button.mmsp-stop")
        stop.wait_for(timeout=30_000)
        report = axe_contrast(page, ".mmsp-chat button.mmsp-stop")
        assert report["checked"] >= 1 and report["violations"] == [], report
        rgb = [float(v) for v in re.findall(r"[\d.]+", stop.evaluate("(b) => getComputedStyle(b).backgroundColor"))[:3]]
        assert (sum(rgb) / 3 < 90) == (theme == "dark"), rgb  # a dark button on a dark page, a light one on light
        slow.screenshot(path=str(ARTIFACTS / f"chat_streaming_{theme}.png"))
        stop.click()
        wait_status(last_assistant(slow), "cancelled")
        for width in (1400, 600):
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(300)
            for index, what in ((1, "tool_turn"), (2, "error"), (4, "wire"), (5, "chat")):
                cells(page).nth(index).scroll_into_view_if_needed()
                cells(page).nth(index).screenshot(path=str(ARTIFACTS / f"{what}_{theme}_{width}.png"))
        assert not page.errors, page.errors
    finally:
        set_theme(server, "light")


# --------------------------------------------------------------------------- 5 and 6. tables, the wire view
TABLE_VIEW = '''from IPython.display import HTML, display
from mmsp_notebook import Chat
from mmsp_notebook.views.html import render_html
from mmsp_notebook.views.model import present_view
row = "| " + " | ".join(f"model_identifier_{k}" for k in range(12)) + " |"
text = ("Wide table:\\n\\n" + row + "\\n|" + "---|" * 12 + "\\n" + row + "\\n\\n"
        + "A long link https://example.com/" + "segment/" * 40 + " ends here.")
display(HTML(render_html(None, present_view({"status": "complete", "items": [
    {"i": 0, "kind": "text", "status": "done", "text": text}]}))))
Chat(history=[{"role": "user", "content_items": [{"type": "text.done", "text": "a wide table"}]},
              {"role": "assistant", "content_items": [{"type": "text.done", "text": text}]}])
'''


@pytest.mark.browser
def test_wide_tables_scroll_and_the_wire_view_is_a_compact_table(page, server):
    name = server.write_notebook("tables.ipynb", SETUP, TABLE_VIEW, "%%mmsp --wire -m demo+tps=400\nhello")
    open_lab(page, server, name, "tables")
    page.set_viewport_size({"width": 900, "height": 1000})
    run_all_via_menu(page)
    wait_cell_done(page, 2, timeout=90_000)
    for where in (".mmsp-static", ".mmsp-chat"):  # the static HTML and the live widget
        table = cells(page).nth(1).locator(f"{where} .mmsp-md table").first
        table.wait_for()
        t = table.evaluate("""(t) => {
          const cells = Array.from(t.querySelectorAll('td, th'));
          const lh = parseFloat(getComputedStyle(cells[0]).lineHeight) || 20;
          return {scrolls: t.scrollWidth > t.clientWidth + 1, overflowX: getComputedStyle(t).overflowX,
                  broken: cells.filter((c) => c.getBoundingClientRect().height > 1.8 * lh + 8).map((c) => c.textContent),
                  para: (() => { const p = t.closest('.mmsp-md').querySelector('p:last-child');
                                 return {sw: p.scrollWidth, cw: p.clientWidth}; })()};
        }""")
        assert t["scrolls"] and t["overflowX"] == "auto", (where, t)
        assert t["broken"] == [], (where, t)  # no word broken across lines in a cell ("mo del")
        assert t["para"]["sw"] <= t["para"]["cw"] + 1, (where, t)  # prose still wraps a long URL
    wire = cells(page).nth(2).locator(".mmsp-wire").first
    wire.wait_for(timeout=60_000)
    w = wire.evaluate("""(w) => {
      const table = w.querySelector('table'), box = w.querySelector('.mmsp-wire-scroll');
      const first = table.querySelector('tbody tr');
      const [ms, frame, ev] = Array.from(first.children);
      const out = w.closest('.jp-OutputArea-output');
      return {ms: ms.getBoundingClientRect().width / table.getBoundingClientRect().width,
              msWidth: ms.getBoundingClientRect().width,
              align: getComputedStyle(frame).textAlign, evAlign: getComputedStyle(ev).textAlign,
              pre: getComputedStyle(frame.querySelector('pre')).whiteSpace,
              font: getComputedStyle(frame.querySelector('pre')).fontFamily,
              boxHeight: box.getBoundingClientRect().height, scrolls: box.scrollHeight > box.clientHeight,
              height: w.getBoundingClientRect().height, rows: table.querySelectorAll('tbody tr').length,
              sideways: out.scrollWidth > out.clientWidth + 1};
    }""")
    assert w["rows"] > 50 and w["ms"] < 0.2 and w["msWidth"] < 90, w  # not a third of the table
    assert w["align"] in ("left", "start") and w["evAlign"] in ("left", "start"), w
    assert w["pre"] == "pre" and "mono" in w["font"].lower(), w
    assert w["boxHeight"] <= 430 and w["scrolls"] and w["height"] < 600, w
    assert not w["sideways"], w
    save_screenshot(page, "tables_and_wire.png")
    assert not page.errors, page.errors


# --------------------------------------------------------------------------- 7. chat scrolling
@pytest.mark.browser
def test_the_chat_follows_the_bottom_until_the_reader_scrolls_up(page, server):
    name = server.write_notebook("scroll.ipynb", CHAT + "chat = Chat(model='demo+tps=400', "
                                 "models=['demo+tps=400', 'demo+tps=300+tokens=1500'])\nchat")
    open_lab(page, server, name, "scroll")
    run_cell(page, 0)
    chat = chat_in(page, 0)
    chat.locator("textarea.mmsp-input").wait_for()
    gap = "(l) => l.scrollHeight - l.scrollTop - l.clientHeight"
    log = chat.locator(".mmsp-chat-log")
    send_chat(chat, "draw a lighthouse")
    wait_status(last_assistant(chat), "complete")
    chat.locator(".mmsp-msg-assistant img.mmsp-img").last.evaluate(
        "(i) => i.complete ? 0 : new Promise((r) => i.addEventListener('load', r))")
    page.wait_for_timeout(300)
    assert log.evaluate(gap) < 2  # image and footer in view, not 100 px above the bottom
    assert last_assistant(chat).locator(".mmsp-footer").is_visible()
    assert chat.locator(".mmsp-jump").is_hidden()
    # a long answer: scrolled up while it streams, the log stays where the reader is
    chat.locator(".mmsp-model-select").select_option("demo+tps=300+tokens=1500")
    page.wait_for_timeout(200)
    send_chat(chat, "Tell me about rivers and lighthouses in detail")
    last_assistant(chat).locator(".mmsp-text").first.wait_for()
    page.wait_for_function("(l) => l.scrollHeight > l.clientHeight + 800", arg=log.element_handle(), timeout=30_000)
    log.hover()
    page.mouse.wheel(0, -400)
    page.wait_for_timeout(300)
    top = log.evaluate("(l) => l.scrollTop")
    jump = chat.locator(".mmsp-jump")
    jump.wait_for()
    page.wait_for_timeout(600)
    assert abs(log.evaluate("(l) => l.scrollTop") - top) < 2
    jump.click()
    page.wait_for_timeout(200)
    assert log.evaluate(gap) < 2 and jump.is_hidden()
    wait_status(last_assistant(chat), "complete")
    page.wait_for_timeout(300)
    assert log.evaluate(gap) < 2  # followed to the end again
    assert not page.errors, page.errors


# --------------------------------------------------------------------------- 8. copy and insert
@pytest.mark.browser
def test_code_blocks_copy_in_the_static_output_and_insert_into_a_new_cell_from_the_chat(page, server):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    name = server.write_notebook("copy.ipynb", SETUP, "%%mmsp\nSummarize notebooks",
                                 CHAT + "chat = Chat()\nchat")
    open_lab(page, server, name, "copy")
    run_all_via_menu(page)
    wait_cell_done(page, 2, timeout=90_000)
    static = static_in(cells(page).nth(1))
    copy = static.locator(".mmsp-code .mmsp-copy-code").first
    copy.wait_for()
    code = static.locator(".mmsp-code pre").first.text_content()
    copy.click()
    page.wait_for_timeout(200)
    assert page.evaluate("navigator.clipboard.readText()") == code
    assert copy.text_content() == "Copied"
    # the chat: copy and insert appear on hover; Insert makes a new cell below the chat's, with the code
    chat = chat_in(page, 2)
    send_chat(chat, "Summarize notebooks")
    answer = last_assistant(chat)
    wait_status(answer, "complete")
    block = answer.locator(".mmsp-code").first
    insert = block.locator(".mmsp-insert-code")
    page.mouse.move(0, 0)
    assert insert.evaluate("(b) => getComputedStyle(b).opacity") == "0"
    assert chat.locator(".mmsp-msg-actions .mmsp-copy").first.evaluate("(b) => getComputedStyle(b).opacity") == "0"
    block.hover()
    page.wait_for_timeout(250)
    assert insert.evaluate("(b) => getComputedStyle(b).opacity") == "1"
    chat_code = block.locator("pre").text_content().rstrip("\n")
    before = cells(page).count()
    insert.click()
    page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell').length === {before + 1}",
                           timeout=10_000)
    new = cells(page).nth(3)
    page.wait_for_timeout(300)
    text = new.locator(".cm-content").evaluate("(c) => Array.from(c.querySelectorAll('.cm-line')).map((l) => l.textContent).join('\\n')")
    assert text == chat_code
    assert chat_in(page, 2).locator(".mmsp-msg-assistant").count() == 1  # the chat is still there
    assert not page.errors, page.errors


# --------------------------------------------------------------------------- 9 and 10. smaller things
SMALL_CELLS = (
    SETUP + "from mmsp_notebook import Chat\n",
    "%%mmsp\nhello",
    "print('value', _.status, type(_).__name__)",
    "%%mmsp -m demo+tps=30 --tools get_weather\nWhat's the weather in Paris and Rome?",
    "broken = Chat(model='demo+401')\nbroken",
    '''history = [
    {"role": "user", "content_items": [{"type": "text.done", "text": "think"}]},
    {"role": "assistant", "content_items": [
        {"type": "thinking.done", "thinking": "Plain reasoning.", "fidelity": {"item_id": "r", "reasoning_field": "reasoning_content"}},
        {"type": "thinking.done", "thinking": "_REDACTED_THINKING", "fidelity": {"item_id": "x", "signature": "opaque"}},
        {"type": "text.done", "text": "Done."}]}]
kept = Chat(history=history)
kept''',
    '''from IPython.display import HTML
from mmsp_notebook.views.html import render_html
from mmsp_notebook.views.model import present_view
huge = present_view({"status": "complete", "items": [{"i": 0, "kind": "text", "status": "done", "text": "word " * 2_000_000}]})
HTML(render_html(None, huge))''',
)


@pytest.mark.browser
def test_the_smaller_things(page, server):
    name = server.write_notebook("small.ipynb", *SMALL_CELLS)
    # what a finished call's card says while the model streams another call in the live view
    page.add_init_script("""(() => {
      window.__queued = [];
      const look = () => {
        for (const t of document.querySelectorAll('.mmsp-turn:not(.mmsp-static)')) {
          if (!t.querySelector('.mmsp-tool[data-status="streaming"]')) continue;
          for (const c of t.querySelectorAll('.mmsp-tool[data-status="done"] .mmsp-tool-state'))
            if (!window.__queued.includes(c.textContent)) window.__queued.push(c.textContent);
        }
      };
      const start = () => new MutationObserver(look).observe(document.documentElement,
        {subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['data-status']});
      if (document.documentElement) start(); else document.addEventListener('DOMContentLoaded', start);
    })();""")
    open_lab(page, server, name, "small")
    run_all_via_menu(page)
    wait_cell_done(page, 3, timeout=120_000)
    # a tool card is "queued", never "running…", while the model still streams the next call
    assert page.evaluate("window.__queued") == ["queued"]
    calls = static_in(cells(page).nth(3)).locator(".mmsp-tool .mmsp-tool-output").all_text_contents()
    assert calls[:2] == [weather_in("Paris"), weather_in("Rome")], calls
    wait_cell_done(page, 6, timeout=120_000)
    # %%mmsp without -o: no Out[n] under the cell, and `_` is the turn
    assert cells(page).nth(1).locator(".jp-OutputArea-executeResult").count() == 0
    assert cells(page).nth(2).locator(".jp-OutputArea-output").last.inner_text().strip() == "value complete Turn"
    # the chat's pickers: no blank thinking level, no embedding model
    broken = chat_in(page, 4)
    options = broken.locator(".mmsp-thinking-select option").all_text_contents()
    assert options[0] == "model default" and all(o.strip() for o in options), options
    assert "demo-embed" not in broken.locator(".mmsp-model-select option").all_text_contents()
    # a failed turn shows one banner; Retry (with a working model picked) leaves none
    send_chat(broken, "hello")
    wait_status(last_assistant(broken), "error")
    page.wait_for_timeout(300)
    assert visible_count(broken.locator(".mmsp-banner")) == 1
    broken.locator(".mmsp-model-select").select_option("demo")
    page.wait_for_timeout(300)
    broken.locator(".mmsp-retry").click()
    wait_status(last_assistant(broken), "complete")
    page.wait_for_timeout(300)
    assert visible_count(broken.locator(".mmsp-banner")) == 0
    assert broken.locator(".mmsp-msg-assistant").count() == 1
    # thinking from a reasoning field is not "signed"; redacted thinking says what it is
    kept = chat_in(page, 5)
    labels = kept.locator(".mmsp-thinking .mmsp-summary-label").all_text_contents()
    assert labels[1] == "redacted thinking (1 block, kept for the next turn)", labels
    badges = kept.locator(".mmsp-thinking").evaluate_all("(ts) => ts.map((t) => t.querySelector('.mmsp-badge')?.textContent || '')")
    assert badges == ["", "signed"], badges
    assert "_REDACTED_THINKING" not in kept.inner_text()
    # a 10 MB answer: the HTML output is capped and says where the rest is
    big = cells(page).nth(6).locator(".jp-OutputArea-output").last
    size = big.evaluate("(o) => o.innerHTML.length")
    assert size < 400_000, size
    assert re.search(r"9,800,000 characters not shown — turn\.text has all", big.inner_text())
    save_screenshot(page, "smaller_things.png")
    assert not page.errors, page.errors
