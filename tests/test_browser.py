"""Real-browser tests: JupyterLab 4 and Notebook 7 in headless Debian Chromium, driven by Playwright.

One ``jupyter lab`` server for all the browser test modules, reset for each as if new (it also
serves Notebook 7), with ``MMSP_NOTEBOOK_DEMO_INSTANT=1`` so the demo model is unpaced unless a
test asks for pacing with ``demo+tps=N``. Each test opens its own notebook in its own JupyterLab workspace, drives the UI
(menus, keyboard, the chat's textarea and buttons), asserts on the renderer's CSS classes
(``mmsp-thinking``, ``mmsp-text``, ``mmsp-tool``, ``mmsp-image``, ``mmsp-footer``…) and saves
screenshots to ``artifacts/``. Kernels are shut down after each test.

VS Code cannot run here. Its notebook renderer loads widgets through the standard anywidget ESM
contract, so that contract is what is checked instead (``test_bundles_*``): each bundle is a
self-contained ES module (no import of any kind left, so no bare specifier a VS Code webview could
not resolve), whose default export is ``{ render }`` (the chat's also has ``initialize``), which touches the model only through the
anywidget API (``get``/``set``/``on``/``off``/``send``/``save_changes``) and no Jupyter-specific
global (``require``/``define``, ``Jupyter``, ``IPython``, ``@jupyter-widgets``, ``@jupyterlab``).
The same bundles are also rendered in a bare page (no Jupyter at all) against a model object that
has only that API and records any other property read.
"""

from __future__ import annotations

import html.parser
import json
import re
import time
from pathlib import Path

import pytest
from browser_utils import (
    ARTIFACTS,
    LONGTASK_OBSERVER,
    SHARED,
    STREAM_RECORDER,
    XSS_TRAP,
    JupyterServer,
    long_task_budget,
    save_screenshot,
)
from helpers import chromium_path, require
from tools import WEATHER_SOURCE, weather_in

STATIC = Path(__file__).resolve().parent.parent / "mmsp_notebook" / "static"
SRC = Path(__file__).resolve().parent.parent / "js" / "src"

SETUP = "%load_ext mmsp_notebook\n" + WEATHER_SOURCE
TOOL_CELL = "%%mmsp -m demo+tps=60 --tools get_weather\nWhat's the weather in Paris?"
IMAGE_CELL = "%%mmsp -m demo+tps=60\ndraw a lighthouse"
WEATHER_CHAT = "from mmsp_notebook import Chat\n" + WEATHER_SOURCE + "chat = Chat(tools=[get_weather])\nchat"


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sync_playwright_mod():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    require(sync_playwright is not None, "playwright (pip install playwright)")
    for mod in ("jupyterlab", "notebook", "ipykernel", "anywidget"):
        try:
            __import__(mod)
            ok = True
        except ImportError:
            ok = False
        require(ok, mod)
    return sync_playwright


@pytest.fixture(scope="module")
def browser(sync_playwright_mod):
    """Chromium, shared by the browser test modules (browser_utils.SHARED; each test has its own context)."""
    return SHARED.browser(sync_playwright_mod, chromium_path())


@pytest.fixture(scope="module")
def server(tmp_path_factory, sync_playwright_mod):
    """``jupyter lab``, shared by the browser test modules and reset for each (browser_utils.SHARED)."""
    return SHARED.server(lambda: JupyterServer(tmp_path_factory.mktemp("jupyter"), env={"MMSP_NOTEBOOK_DEMO_INSTANT": "1"}))


class PageErrors(list):
    pass


@pytest.fixture
def page(browser, server, request):
    """A fresh browser context (its own cookies and storage) with the stream recorder installed."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    ctx.set_default_timeout(30_000)
    pg = ctx.new_page()
    pg.add_init_script(STREAM_RECORDER)
    errors, other = PageErrors(), PageErrors()

    def on_error(e):
        # errors of the widgets' code (anywidget loads the bundles from blob: URLs), not Jupyter's own
        text = f"{e.name}: {e.message}\n{e.stack or ''}"
        (errors if re.search(r"blob:|anywidget|mmsp", text, re.I) else other).append(text)

    pg.on("pageerror", on_error)
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" and "mmsp" in m.text.lower() else None)
    pg.errors = errors
    failed_before = request.session.testsfailed
    yield pg
    if request.session.testsfailed > failed_before:
        try:
            save_screenshot(pg, f"failed_{request.node.name}.png")
        except Exception:
            pass
    if other:
        print(f"\n{request.node.name}: errors of Jupyter's own code (not failures):",
              *(e.splitlines()[0] for e in other), sep="\n  ")
    ctx.close()
    server.shutdown_kernels()


# --------------------------------------------------------------------------- JupyterLab helpers
def open_lab(page, server, name: str, workspace: str) -> None:
    page.goto(server.page_url(f"/lab/workspaces/{workspace}/tree/{name}"))
    wait_lab_notebook(page)


def wait_lab_notebook(page) -> None:
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook .jp-Cell", timeout=60_000)
    # the kernel is up when the status bar says so
    page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=60_000)
    wait_kernel_idle(page)


def wait_kernel_idle(page) -> None:
    """The notebook's toolbar shows the python3 kernel, connected and idle (JupyterLab and Notebook 7).

    Before the session exists the indicator also says idle, next to "No Kernel"; a Run All then
    does nothing.
    """
    page.wait_for_function(
        """() => {
          const p = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)') || document;
          const e = p.querySelector('.jp-Notebook-ExecutionIndicator');
          const k = p.querySelector('.jp-Toolbar-kernelName');
          return !!e && e.getAttribute('data-status') === 'idle' && !!k && /Python 3/.test(k.textContent);
        }""",
        timeout=60_000,
    )


def cells(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def run_all_via_menu(page) -> None:
    """Run → Run All Cells; once more if nothing was even queued (the first prompt still ``[ ]``)."""
    for attempt in range(2):
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        first = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell, #main-panel .jp-Cell").first
        try:
            first.locator(".jp-InputPrompt", has_text=re.compile(r"\[(\*|\d+)\]")).first.wait_for(timeout=10_000)
            return
        except Exception:
            if attempt:
                raise


def run_cell(page, index: int) -> None:
    """Select cell ``index`` (command mode) and press Shift+Enter."""
    cell = cells(page).nth(index)
    cell.locator(".jp-InputPrompt").first.click()
    page.keyboard.press("Shift+Enter")


def wait_cell_done(page, index: int, timeout: float = 60_000) -> None:
    """Until the cell's prompt shows an execution count (``[n]:``, not ``[*]:``)."""
    cell = cells(page).nth(index)
    cell.locator(".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).first.wait_for(timeout=timeout)


def save_notebook(page, server, name: str) -> None:
    page.keyboard.press("Control+s")
    path = server.root / name
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if "application/vnd.jupyter.widget-view+json" in path.read_text():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("the notebook was not saved with its widget outputs")


def wait_status(locator, status: str, timeout: float = 60_000) -> None:
    """Until the turn's root says ``data-status=status`` (the locator is resolved again on each poll)."""
    from playwright.sync_api import expect

    expect(locator).to_have_attribute("data-status", status, timeout=timeout)


def wait_text(locator, text: str, timeout: float = 30_000) -> None:
    from playwright.sync_api import expect

    expect(locator).to_have_text(text, timeout=timeout)


def assert_full_turn(turn, *, tool: str | None = None, tool_result: str | None = None, image: bool = False,
                     text: bool = True) -> None:
    """The finished turn shows every part in its own area."""
    assert turn.get_attribute("data-status") == "complete"
    thinking = turn.locator(".mmsp-item.mmsp-thinking")
    assert thinking.count() >= 1
    assert thinking.first.locator(".mmsp-summary-label").inner_text().startswith("Thought")
    assert thinking.first.locator(".mmsp-thinking-body").text_content().strip()
    if text:
        assert turn.locator(".mmsp-item.mmsp-text").last.inner_text().strip()
    if tool:
        card = turn.locator(".mmsp-item.mmsp-tool").first
        assert card.locator(".mmsp-tool-name").text_content() == tool
        assert card.locator(".mmsp-tool-args").text_content().strip().startswith("{")
        assert card.locator(".mmsp-tool-result.mmsp-ok .mmsp-tool-output").text_content() == tool_result
    if image:
        img = turn.locator(".mmsp-item.mmsp-image img.mmsp-img")
        assert img.count() == 1
        assert img.get_attribute("src").startswith("data:image/png;base64,")
        assert img.evaluate("(i) => i.complete && i.naturalWidth > 0")
    footer = turn.locator(".mmsp-footer")
    assert footer.is_visible()
    assert re.search(r"tokens cached \d+ · prompt \d+ · thoughts \d+ · response \d+",
                     footer.locator(".mmsp-tokens").text_content())


def chat_in(page, index: int):
    return cells(page).nth(index).locator(".mmsp-chat").first


def send_chat(chat, text: str) -> None:
    box = chat.locator("textarea.mmsp-input")
    box.click()
    box.fill(text)
    box.press("Enter")


def last_assistant(chat):
    return chat.locator(".mmsp-msg-assistant").last.locator(".mmsp-turn").first


def static_in(cell):
    """The finished output of a %%mmsp cell: the static HTML rendering that replaces the live view."""
    return cell.locator(".jp-OutputArea-output .mmsp-static").first


def assert_static_turn(static, *, tool: str | None = None, tool_result: str | None = None,
                       image: bool = False) -> None:
    """The static HTML shows the turn as the live view did: same areas, classes and styles, nothing to click."""
    assert "mmsp-root" in static.get_attribute("class") and "mmsp-turn" in static.get_attribute("class")
    assert_full_turn(static, tool=tool, tool_result=tool_result, image=image)
    # finished: the thinking blocks are closed and say how long they took
    assert static.locator(".mmsp-item.mmsp-thinking details").first.get_attribute("open") is None
    assert static.locator(".mmsp-thinking .mmsp-summary-label").first.inner_text().startswith("Thought for")
    if tool:
        assert static.locator(".mmsp-tool .mmsp-tool-name").first.get_attribute("title").startswith("id ")
    # the widget's stylesheet applies (JupyterLab's sanitizer kept it): a styled tool header, a flex footer
    styles = static.evaluate("""(el) => {
      const cs = (sel) => { const e = el.querySelector(sel); return e ? getComputedStyle(e) : null; };
      return {root: getComputedStyle(el).display, footer: cs('.mmsp-footer').display,
              sep: cs('.mmsp-footer .mmsp-sep') && cs('.mmsp-footer .mmsp-sep').display,
              head: cs('.mmsp-tool-head') && cs('.mmsp-tool-head').display};
    }""")
    assert styles["root"] == "flex" and styles["footer"] == "flex" and styles["sep"] == "none", styles
    assert styles["head"] == ("flex" if tool else None), styles
    # nothing to type into; the only buttons are the code blocks' Copy, added by the output's own script
    assert static.locator("input, textarea, select").count() == 0
    assert static.locator("button").count() == static.locator("button.mmsp-copy-code").count()


# --------------------------------------------------------------------------- 1. %%mmsp in JupyterLab
@pytest.mark.browser
def test_lab_magic_streams_thinking_text_tool_and_image(page, server):
    """Run All from the Run menu; each turn streams into the live view, then becomes static HTML."""
    name = server.write_notebook("lab_magic.ipynb", SETUP, TOOL_CELL, IMAGE_CELL)
    open_lab(page, server, name, "magic")
    run_all_via_menu(page)
    # while the first turn streams: the live widget with its streaming indicator
    live = cells(page).nth(1).locator(".jp-OutputArea-output .mmsp-turn[data-status='streaming']")
    live.locator(".mmsp-tool .mmsp-tool-output").wait_for(timeout=60_000)
    save_screenshot(page, "lab_magic_streaming.png")
    static_in(cells(page).nth(2)).wait_for(timeout=60_000)
    wait_cell_done(page, 2)
    seen = page.evaluate("window.__seen")
    for what in ("indicator", "thinking", "text", "tool:get_weather", "tool_result"):
        assert what in seen, f"{what!r} never showed in a live view while it streamed: {sorted(seen)}"
    # the tool card shows its name before its result, after the thinking that led to it
    assert seen["thinking"] <= seen["tool:get_weather"] <= seen["tool_result"]
    # the image arrives with the end of its turn: it showed in the live view's image area
    assert "live:image" in seen and "live:footer" in seen, sorted(seen)
    # at the end: the static rendering, every part in its own area
    tool_turn, image_turn = static_in(cells(page).nth(1)), static_in(cells(page).nth(2))
    assert_static_turn(tool_turn, tool="get_weather", tool_result=weather_in("Paris"))
    assert weather_in("Paris") in tool_turn.locator(".mmsp-item.mmsp-text").last.inner_text()
    assert "2 steps" in tool_turn.locator(".mmsp-footer").inner_text()
    assert_static_turn(image_turn, image=True)
    # no live view left behind
    assert page.locator(".jp-OutputArea-output .mmsp-turn:not(.mmsp-static)").count() == 0
    # no Out[n] under a %%mmsp cell (it would repeat the footer): the value only with -o
    assert cells(page).nth(1).locator(".jp-OutputArea-executeResult").count() == 0
    assert not page.errors, page.errors
    save_screenshot(page, "lab_magic.png")


TURN_MATH_CELL = r"""import time
from IPython.display import display
from mmsp_notebook.views.widget import TurnView
view = TurnView()
display(view)
time.sleep(2)
view.push([["item", 0, {"kind": "text", "status": "streaming"}],
           ["append", 0, "so $x^2$ and \\(\\frac{a}{b}\\) and <b>$y<z$</b>"]])
time.sleep(25)"""


@pytest.mark.browser
def test_lab_live_turn_view_draws_math_while_the_cell_runs(page, server):
    """The magic's live view (turn.js) streams a formula while the kernel is busy: the math renderer
    comes with the ops (a busy kernel reads no request), and the view draws MathML before the cell ends."""
    name = server.write_notebook("turn_math.ipynb", TURN_MATH_CELL)
    open_lab(page, server, name, "turnmath")
    run_cell(page, 0)
    text = cells(page).nth(0).locator(".mmsp-turn .mmsp-text")
    text.locator("math").nth(1).wait_for(timeout=20_000)
    # still running: the kernel answered nothing, the code came unasked
    assert cells(page).nth(0).locator(".jp-InputPrompt", has_text="[*]").count() == 1
    found = text.evaluate("(el) => [...el.querySelectorAll('math')].map((m) => [m.namespaceURI, !!m.querySelector('msup'), !!m.querySelector('mfrac')])")
    ns = "http://www.w3.org/1998/Math/MathML"
    assert found[:2] == [[ns, True, False], [ns, False, True]], found
    assert text.locator("b, code.mmsp-math-pending").count() == 0
    assert "<b>" in text.text_content()
    assert not page.errors, page.errors


# --------------------------------------------------------------------------- 2. XSS
XSS_NAME = "<img src=x onerror=alert(1)>"
PAYLOADS = ("<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[click](javascript:alert(1))",
            "<svg onload=alert(1)>")


@pytest.mark.browser
def test_lab_xss_payloads_stay_text(page, server):
    """demo+xss puts script payloads in thinking, text, tool arguments (and a tool's markup name)."""
    page.add_init_script(XSS_TRAP)
    dialogs: list[str] = []

    def on_dialog(d):
        dialogs.append(f"{d.type}: {d.message}")
        d.dismiss()

    page.on("dialog", on_dialog)
    name = server.write_notebook(
        "lab_xss.ipynb",
        SETUP,
        "%%mmsp -m demo+xss+tps=80 --tools get_weather\nWhat's the weather in Paris?",
        "import mmsp_notebook\nfrom mmsp_notebook.engine.tools import ToolSet\n"
        f"t = mmsp_notebook.ask(\"What's the weather in Paris?\", model='demo+xss+tps=80', "
        f"tools=ToolSet({{{XSS_NAME!r}: get_weather}}))",
    )
    open_lab(page, server, name, "xss")
    run_all_via_menu(page)
    first, second = static_in(cells(page).nth(1)), static_in(cells(page).nth(2))
    second.wait_for(timeout=60_000)
    wait_cell_done(page, 2)
    page.wait_for_timeout(300)  # an onerror/onload would have fired by now
    assert dialogs == [], dialogs
    assert page.evaluate("window.__xss") == []
    assert page.evaluate("window.__xssNodes") == []  # nothing dangerous was ever added, live or static
    report = page.evaluate(
        r"""() => {
          const outs = Array.from(document.querySelectorAll('.jp-OutputArea-output'));
          const all = outs.flatMap((o) => [o, ...o.querySelectorAll('*')]);
          return {
            outputs: outs.length,
            scripts: all.filter((e) => e.tagName === 'SCRIPT' && e.textContent !== window.__copyScript).length,
            svgs: all.filter((e) => e.tagName.toLowerCase() === 'svg').length,
            imgs: all.filter((e) => e.tagName === 'IMG').map((e) => e.getAttribute('src')),
            onAttrs: all.flatMap((e) => Array.from(e.attributes).filter((a) => /^on/i.test(a.name))
                                      .map((a) => e.tagName + ' ' + a.name)),
            jsLinks: Array.from(document.querySelectorAll('[href], [src], [action], [formaction]'))
                      .filter((e) => ['href', 'src', 'action', 'formaction'].some(
                        (n) => /^\s*javascript:/i.test(e.getAttribute(n) || ''))).length,
          };
        }"""
    )
    assert report == {"outputs": report["outputs"], "scripts": 0, "svgs": 0, "imgs": [], "onAttrs": [], "jsLinks": 0}, report
    # the payloads are visible, as text, in the live view while it streamed ...
    live = page.evaluate("window.__live")
    assert "get_weather" in live["names"] and XSS_NAME in live["names"], live["names"]
    for area in ("thinking", "text", "args", "output"):
        for payload in PAYLOADS:
            assert payload in live[area], (area, payload, live[area][-300:])
    # ... and in the static rendering that replaced it
    for static, tool_name in ((first, "get_weather"), (second, XSS_NAME)):
        assert static.locator(".mmsp-tool .mmsp-tool-name").first.text_content() == tool_name
        shown = {
            "thinking": static.locator(".mmsp-item.mmsp-thinking .mmsp-thinking-body").first.text_content(),
            "text": static.locator(".mmsp-item.mmsp-text").last.text_content(),
            "args": static.locator(".mmsp-tool .mmsp-tool-args").first.text_content(),
            "output": static.locator(".mmsp-tool .mmsp-tool-output").last.text_content(),
        }
        for area, text in shown.items():
            for payload in PAYLOADS:
                assert payload in text, (tool_name, area, payload, text)
    # a tool named with markup: quoted in bold by the model, the name is bold text, not an element
    assert XSS_NAME in second.locator(".mmsp-item.mmsp-text strong").first.text_content()
    assert not page.errors, page.errors
    save_screenshot(page, "lab_xss.png")


# --------------------------------------------------------------------------- 3. Chat in JupyterLab
@pytest.mark.browser
def test_lab_chat_answers_stops_and_survives_a_reload(page, server):
    name = server.write_notebook(
        "lab_chat.ipynb", WEATHER_CHAT, "slow = Chat(model='demo+tps=15')\nslow",
    )
    open_lab(page, server, name, "chat")
    run_all_via_menu(page)
    wait_cell_done(page, 1)
    chat, slow = chat_in(page, 0), chat_in(page, 1)
    chat.locator("textarea.mmsp-input").wait_for()
    assert chat.locator(".mmsp-model-select").input_value() == "demo"

    send_chat(chat, "What's the weather in Rome?")
    chat.locator(".mmsp-msg-user .mmsp-user-text", has_text="What's the weather in Rome?").wait_for()
    answer = last_assistant(chat)
    wait_status(answer, "complete")
    assert_full_turn(answer, tool="get_weather", tool_result=weather_in("Rome"))
    assert weather_in("Rome") in answer.locator(".mmsp-item.mmsp-text").last.inner_text()
    assert chat.locator("button.mmsp-send").text_content() == "Send"
    assert chat.locator("textarea.mmsp-input").input_value() == ""
    save_screenshot(page, "lab_chat.png")

    # a paced chat: Send becomes Stop while busy; Stop keeps the partial turn, marked cancelled
    send_chat(slow, "Tell me about lighthouses")
    button = slow.locator("button.mmsp-send")
    wait_text(button, "Stop")
    live = last_assistant(slow)
    live.locator(".mmsp-status .mmsp-streaming").wait_for()
    page.wait_for_function(
        "(t) => { const x = t.querySelector('.mmsp-text'); return x && x.textContent.split(' ').length > 5; }",
        arg=live.element_handle(), timeout=30_000)
    button.click()
    stopped = last_assistant(slow)
    wait_status(stopped, "cancelled", timeout=15_000)
    wait_text(button, "Send")
    partial = stopped.locator(".mmsp-item.mmsp-text").last.inner_text()
    assert partial.strip()
    assert stopped.locator(".mmsp-status").inner_text().strip() == "cancelled — partial output kept"
    assert slow.locator(".mmsp-retry:visible").count() == 1
    save_screenshot(page, "lab_chat_stopped.png")

    # reload: the kernel keeps running, the widgets come back from it with their conversations
    save_notebook(page, server, name)
    page.reload()
    wait_lab_notebook(page)
    chat, slow = chat_in(page, 0), chat_in(page, 1)
    chat.locator(".mmsp-msg-user .mmsp-user-text", has_text="What's the weather in Rome?").wait_for(timeout=30_000)
    restored = last_assistant(chat)
    wait_status(restored, "complete")
    assert_full_turn(restored, tool="get_weather", tool_result=weather_in("Rome"))
    slow.locator(".mmsp-msg-user .mmsp-user-text", has_text="Tell me about lighthouses").wait_for()
    restored_slow = last_assistant(slow)
    wait_status(restored_slow, "cancelled")
    assert restored_slow.locator(".mmsp-item.mmsp-text").last.inner_text() == partial
    assert not page.errors, page.errors
    save_screenshot(page, "lab_chat_reloaded.png")


# --------------------------------------------------------------------------- 4. responsiveness
class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def markdown_text_content(source: str) -> str:
    """The DOM ``textContent`` of markdown-it's full render of ``source`` (html off, tables on)."""
    from markdown_it import MarkdownIt

    parser = _Text()
    parser.feed(MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"]).render(source))
    parser.close()
    return "".join(parser.parts)


@pytest.mark.browser
def test_lab_chat_streams_20000_tokens_without_blocking_the_page(page, server):
    name = server.write_notebook(
        "lab_long.ipynb",
        "from mmsp_notebook import Chat\nchat = Chat(model='demo+tokens=20000')\nchat",
        "import pathlib\nmsg = chat.history[-1]\n"
        "pathlib.Path('answer.md').write_text(''.join(i.get('text', '') for i in msg['content_items'] "
        "if i['type'] == 'text.done'))\nprint('messages', chat.message_count, chat.message_bytes)",
        "%load_ext mmsp_notebook",
        "%%mmsp -m demo+tokens=20000\nWrite a long report",
    )
    # bytes the kernel's websocket brings the page (every frame received), counted from a mark
    received = {"bytes": 0, "frames": 0}

    def on_ws(ws):
        def frame(payload):
            received["bytes"] += len(payload)
            received["frames"] += 1
            if len(payload) > 100_000:  # the big ones, by message type (a widget's code crosses in its comm_open)
                raw = payload if isinstance(payload, bytes) else payload.encode()
                kind = re.search(rb'"msg_type":\s*"(\w+)"', raw)
                received.setdefault("big", []).append([kind.group(1).decode() if kind else "?", len(payload)])
        ws.on("framereceived", frame)

    page.on("websocket", on_ws)
    open_lab(page, server, name, "long")
    run_cell(page, 0)
    chat = chat_in(page, 0)
    chat.locator("textarea.mmsp-input").wait_for()
    page.wait_for_timeout(500)  # let Lab settle after the cell ran
    received.update(bytes=0, frames=0, big=[])
    page.evaluate("window.__recorderOff = true")  # measure the page, not the test's own observer
    # observe long tasks from just before the message is sent (Lab's own startup is not measured)
    assert page.evaluate(LONGTASK_OBSERVER), "this Chromium reports no longtask entries"
    started = time.monotonic()
    send_chat(chat, "Write a long report")
    answer = last_assistant(chat)
    wait_status(answer, "complete", timeout=120_000)
    wait_text(chat.locator("button.mmsp-send"), "Send")
    streamed = time.monotonic() - started
    page.wait_for_timeout(500)  # the final render, and the observer's last batch
    chat_ws = dict(received)
    take = ("window.__longtaskObserver.takeRecords().forEach((e) => window.__longtasks.push("
            "{name: e.name, start: Math.round(e.startTime), duration: Math.round(e.duration)})); window.__longtasks")
    tasks = page.evaluate(take)
    worst = max(tasks, key=lambda t: t["duration"], default=None)
    save_screenshot(page, "lab_long.png", full_page=False)

    # the model's text, from the kernel (the conversation history mmsp kept), written by a cell
    run_cell(page, 1)
    wait_cell_done(page, 1)
    printed = cells(page).nth(1).locator(".jp-OutputArea-output").last.inner_text()
    count, size = (int(x) for x in re.search(r"messages (\d+) (\d+)", printed).groups())
    print(f"\n20,000-token chat answer streamed in {streamed:.1f} s as {count} widget messages ({size:,} bytes); "
          f"{len(tasks)} long tasks; worst: {worst}")
    shown_chars = len(answer.locator(".mmsp-item.mmsp-text").last.text_content())
    report = {"threshold_ms": 100,
              "chat": {"streamed_seconds": round(streamed, 2), "widget_messages": count, "widget_message_bytes": size,
                       "ws_bytes": chat_ws["bytes"], "ws_frames": chat_ws["frames"], "ws_big": chat_ws.get("big"),
                       "shown_chars": shown_chars,
                       "ws_bytes_per_char": round(chat_ws["bytes"] / max(shown_chars, 1), 3),
                       "count": len(tasks), "worst": worst, "tasks": tasks}}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "longtasks.json").write_text(json.dumps(report, indent=1))
    assert count > 5  # it did stream: coalesced ops batches, not one snapshot at the end
    source = (server.root / "answer.md").read_text()
    assert len(source.split()) > 15_000
    # What is compared: the answer's rendered text in the page (textContent of the .mmsp-text
    # element, without the code blocks' "copy" bars, which are UI, not answer) and the textContent
    # of markdown-it's full render of the model's Markdown, computed here with markdown-it-py (the
    # same CommonMark parser, html off, tables and strikethrough on). So every character the model
    # sent is in the page, once, in order, and the incremental rendering of the stream ended as the
    # full render would have (whitespace included).
    shown = answer.locator(".mmsp-item.mmsp-text").last.evaluate(
        "(el) => { const c = el.cloneNode(true); c.querySelectorAll('.mmsp-code-bar').forEach((b) => b.remove());"
        " return c.textContent; }")
    expected = markdown_text_content(source)
    if shown != expected:  # a readable diff instead of two 100 KB strings
        at = next((i for i, (a, b) in enumerate(zip(shown, expected)) if a != b), min(len(shown), len(expected)))
        raise AssertionError(f"DOM text differs at {at} (len {len(shown)} vs {len(expected)}): "
                             f"{shown[at - 80:at + 80]!r} vs {expected[at - 80:at + 80]!r}")

    # the same answer through %%mmsp: the live view, then the static HTML of 110 KB that replaces it
    run_cell(page, 2)
    wait_cell_done(page, 2)
    page.evaluate("window.__longtaskObserver.takeRecords(); window.__longtasks = []")
    received.update(bytes=0, frames=0, big=[])
    page.evaluate("""() => { window.__marks = {}; new MutationObserver(() => {
      const cell = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')[3];
      if (!cell) return;
      const m = window.__marks, now = Math.round(performance.now());
      if (!m.live && cell.querySelector('.mmsp-turn:not(.mmsp-static) .mmsp-text')) m.live = now;
      if (!m.footer && cell.querySelector('.mmsp-turn:not(.mmsp-static) .mmsp-footer .mmsp-stat')) m.footer = now;
      if (!m.static && cell.querySelector('.mmsp-static')) m.static = now;
    }).observe(document.body, {subtree: true, childList: true}); }""")
    started = time.monotonic()
    run_cell(page, 3)
    static_in(cells(page).nth(3)).wait_for(timeout=120_000)
    wait_cell_done(page, 3)
    magic_seconds = time.monotonic() - started
    page.wait_for_timeout(500)
    magic_tasks = page.evaluate(take)
    magic_worst = max(magic_tasks, key=lambda t: t["duration"], default=None)
    print(f"20,000-token %%mmsp answer streamed in {magic_seconds:.1f} s; {len(magic_tasks)} long tasks; "
          f"worst: {magic_worst}")
    magic_ws = dict(received)
    magic_chars = len(static_in(cells(page).nth(3)).locator(".mmsp-item.mmsp-text").last.text_content())
    report["magic"] = {"streamed_seconds": round(magic_seconds, 2), "count": len(magic_tasks), "worst": magic_worst,
                       "ws_bytes": magic_ws["bytes"], "ws_frames": magic_ws["frames"], "ws_big": magic_ws.get("big"),
                       "shown_chars": magic_chars,
                       "ws_bytes_per_char": round(magic_ws["bytes"] / max(magic_chars, 1), 3),
                       "tasks": magic_tasks, "marks": page.evaluate("window.__marks")}
    (ARTIFACTS / "longtasks.json").write_text(json.dumps(report, indent=1))
    assert not page.errors, page.errors
    budget = long_task_budget(page)
    assert worst is None or worst["duration"] <= budget, f"chat: the main thread was blocked for {worst['duration']} ms: {worst}"
    assert magic_worst is None or magic_worst["duration"] <= budget, (
        f"%%mmsp: the main thread was blocked for {magic_worst['duration']} ms: {magic_worst}")


# --------------------------------------------------------------------------- 5. Notebook 7
@pytest.mark.browser
def test_notebook7_renders_the_magic_and_a_chat(page, server):
    name = server.write_notebook(
        "nb7.ipynb", SETUP + "from mmsp_notebook import Chat\n", TOOL_CELL, "chat = Chat(tools=[get_weather])\nchat",
    )
    page.goto(server.page_url("/tree"))
    page.locator(".jp-DirListing-item", has_text=name).wait_for(timeout=60_000)
    page.goto(server.page_url(f"/notebooks/{name}"))
    nb_cells = page.locator(".jp-Notebook .jp-Cell")
    nb_cells.first.wait_for(timeout=60_000)
    wait_kernel_idle(page)
    run_all_via_menu(page)
    static = static_in(nb_cells.nth(1))
    static.wait_for(timeout=60_000)
    seen = page.evaluate("window.__seen")
    for what in ("indicator", "thinking", "text", "tool:get_weather", "tool_result"):
        assert what in seen, f"{what!r} never showed in the live view while it streamed: {sorted(seen)}"
    assert_static_turn(static, tool="get_weather", tool_result=weather_in("Paris"))
    chat = nb_cells.nth(2).locator(".mmsp-chat").first
    chat.locator("textarea.mmsp-input").wait_for()
    send_chat(chat, "What's the weather in Oslo?")
    answer = last_assistant(chat)
    wait_status(answer, "complete")
    assert_full_turn(answer, tool="get_weather", tool_result=weather_in("Oslo"))
    assert not page.errors, page.errors
    save_screenshot(page, "notebook7.png")


# --------------------------------------------------------------------------- 6. the anywidget contract
MODEL_API = {"get", "set", "on", "off", "send", "save_changes"}
JUPYTER_GLOBALS = re.compile(
    r"\brequire\s*\(|\bdefine\s*\(|\bJupyter\b|\bIPython\b|@jupyter-widgets|@jupyterlab|\bjupyterapp\b|"
    r"acquireVsCodeApi|google\.colab")
# a dynamic import of a name (not a literal) is allowed: the math renderer, imported from the Blob URL
# of the code the kernel sends (js/src/math.js), as anywidget imports the bundle itself
ANY_IMPORT = re.compile(r"(^|[;}\s])import\s*(?:[\w*{}\s,$]+from\s*)?[\"']|\bimport\s*\((?![\w$]+\))|"
                        r"\bexport\s*[^;]*?\bfrom\s*[\"']", re.M)


@pytest.mark.parametrize("bundle", ["turn.js", "chat.js"])
def test_bundles_are_self_contained_anywidget_modules(bundle):
    code = (STATIC / bundle).read_text()
    m = ANY_IMPORT.search(code)
    assert m is None, f"{bundle}: an import is left in the bundle: {code[m.start():m.start() + 80]!r}"
    assert re.search(r"export\s*\{[^}]*\bas default\b", code), f"{bundle}: no default export"
    m = JUPYTER_GLOBALS.search(code)
    assert m is None, f"{bundle}: Jupyter-specific code: {code[max(0, m.start() - 40):m.start() + 40]!r}"


def test_bundle_sources_use_only_the_anywidget_model_api():
    used: dict[str, set[str]] = {}
    for path in sorted(SRC.glob("*.js")):
        text = path.read_text()
        for method in re.findall(r"\bmodel\.(\w+)\s*\(", text):  # calls, not a "model.py" in a comment
            used.setdefault(method, set()).add(path.name)
        assert not JUPYTER_GLOBALS.search(text), f"{path.name}: Jupyter-specific code"
    assert used, "no model.* call found: the check is looking at the wrong files"
    assert set(used) <= MODEL_API, {k: sorted(v) for k, v in used.items() if k not in MODEL_API}
    for entry in ("turn.js", "chat.js"):
        # (the chat's initialize keeps its transcript in the model, once per model: js/src/chat.js)
        assert re.search(r"export default \{ (initialize: \w+, )?render: \w+ \};", (SRC / entry).read_text())


PLAIN_PAGE_RENDER = r"""
async ([code, traits, send]) => {
  const url = URL.createObjectURL(new Blob([code], {type: 'text/javascript'}));
  const mod = await import(url);
  const api = new Set(['get', 'set', 'on', 'off', 'send', 'save_changes']);
  const state = {...traits}, handlers = {}, sent = [], other = [];
  const impl = {
    get: (k) => state[k],
    set: (k, v) => { state[k] = v; },
    on: (name, fn) => { (handlers[name] = handlers[name] || []).push(fn); },
    off: (name, fn) => { handlers[name] = (handlers[name] || []).filter((f) => f !== fn); },
    send: (msg) => { sent.push(msg); },
    save_changes: () => {},
  };
  const model = new Proxy(impl, {get: (t, k) => {
    if (typeof k === 'string' && !api.has(k)) other.push(k);
    return t[k];
  }});
  const el = document.createElement('div');
  document.body.appendChild(el);
  if (typeof mod.default !== 'object' || typeof mod.default.render !== 'function') return {error: 'no default {render}'};
  // as anywidget: initialize once per model (if the module has one), then render each view
  const forget = typeof mod.default.initialize === 'function' ? await mod.default.initialize({model}) : null;
  const cleanup = await mod.default.render({model, el});
  const fire = (name, arg) => (handlers[name] || []).forEach((f) => f(arg));
  fire('msg:custom', {type: 'ops', turn: 0, ops: [
    ['item', 0, {kind: 'text', status: 'streaming'}], ['append', 0, '**plain page**'],
    ['turn', {status: 'complete', footer: {usage: {prompt_tokens: 1}}}]]});
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const input = el.querySelector('textarea');
  if (send && input) {
    input.value = 'hi';
    input.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true, cancelable: true}));
  }
  const html = el.innerHTML;
  const strong = el.querySelector('.mmsp-text strong');
  if (typeof cleanup === 'function') cleanup();
  if (typeof forget === 'function') forget();
  return {sent, other: [...new Set(other)], strong: strong && strong.textContent, emptyAfter: el.children.length,
          length: html.length};
}
"""


@pytest.mark.browser
@pytest.mark.parametrize("bundle, traits, sends", [
    ("turn.js", {"turn": None}, False),
    ("chat.js", {"transcript": [], "busy": False, "models": ["demo"], "model": "demo", "thinking": "",
                 "thinking_levels": [""], "error": ""}, True),
])
def test_bundles_render_in_a_plain_page_with_only_the_anywidget_api(browser, bundle, traits, sends):
    ctx = browser.new_context()
    try:
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.set_content("<!doctype html><html><body></body></html>")
        out = pg.evaluate(PLAIN_PAGE_RENDER, [(STATIC / bundle).read_text(), traits, sends])
    finally:
        ctx.close()
    assert "error" not in out, out
    assert out["other"] == [], f"{bundle} used model properties beyond the anywidget API: {out['other']}"
    assert out["strong"] == "plain page"
    assert out["sent"][0] == {"type": "hello"}
    if sends:
        posted = [m for m in out["sent"] if m.get("type") == "send"]
        assert [{k: v for k, v in m.items() if k != "id"} for m in posted] == [{"type": "send", "text": "hi", "images": []}]
        assert isinstance(posted[0].get("id"), str) and posted[0]["id"]  # (the kernel names it in a refusal)
    assert out["emptyAfter"] == 0  # the cleanup function removes what render added
    assert not errors, errors


# --------------------------------------------------------------------------- 6. static HTML = live view
SIDE_BY_SIDE = '''import io
import mmsp_notebook
from IPython.display import HTML, display
from mmsp_notebook.views.html import render_html
from mmsp_notebook.engine.tools import ToolSet
from mmsp_notebook.views.model import view_model
from mmsp_notebook.views.widget import TurnView
turn = mmsp_notebook.ask({prompt!r}, model="demo", tools=ToolSet({{"get_weather": get_weather}}), stream=io.StringIO())
vm = view_model(turn)
display(TurnView(source=turn, turn=vm))
display(HTML(render_html(turn, vm)))
'''

# Every element of the live view and of the static HTML, walked in step (what only one side has by
# design left out: copy buttons, hidden parts, <style>, the footer's separators), with its computed
# style and size.
COMPARE_STYLES = r"""(cell) => {
  const PROPS = ['display', 'color', 'background-color', 'font-family', 'font-size', 'font-weight',
    'font-style', 'line-height', 'text-align', 'text-decoration-line', 'white-space', 'vertical-align',
    'margin-top', 'margin-right', 'margin-bottom', 'margin-left', 'padding-top', 'padding-right',
    'padding-bottom', 'padding-left', 'border-top-width', 'border-bottom-width', 'border-left-width',
    'border-right-width', 'border-top-color', 'border-radius', 'list-style-type', 'opacity', 'gap'];
  const live = cell.querySelector('.mmsp-turn:not(.mmsp-static)');
  const stat = cell.querySelector('.mmsp-turn.mmsp-static');
  const walk = (el, out) => {
    out.push(el);
    for (const c of el.children) {
      if (c.tagName === 'STYLE' || c.tagName === 'SCRIPT' || c.tagName === 'BUTTON' || c.hidden || c.classList.contains('mmsp-sep')) continue;
      // JupyterLab's own additions to headings of HTML outputs (table of contents)
      if (c.classList.contains('numbering-entry') || c.classList.contains('jp-InternalAnchorLink')) continue;
      walk(c, out);
    }
    return out;
  };
  const a = walk(live, []), b = walk(stat, []);
  const diffs = [];
  if (a.length !== b.length) diffs.push(`element count ${a.length} vs ${b.length}`);
  const name = (e) => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).trim().split(/\s+/).join('.') : '');
  for (let k = 0; k < Math.min(a.length, b.length); k++) {
    const [x, y] = [a[k], b[k]];
    if (x.tagName !== y.tagName) { diffs.push(`${k}: ${name(x)} vs ${name(y)}`); break; }
    const [sx, sy] = [getComputedStyle(x), getComputedStyle(y)];
    for (const p of PROPS) {
      if (sx.getPropertyValue(p) !== sy.getPropertyValue(p)) {
        diffs.push(`${name(x)} ${p}: ${sx.getPropertyValue(p)} vs ${sy.getPropertyValue(p)}`);
      }
    }
    const [rx, ry] = [x.getBoundingClientRect(), y.getBoundingClientRect()];
    if (Math.abs(rx.width - ry.width) > 0.5 || Math.abs(rx.height - ry.height) > 0.5) {
      diffs.push(`${name(x)} size: ${rx.width.toFixed(1)}x${rx.height.toFixed(1)} vs ${ry.width.toFixed(1)}x${ry.height.toFixed(1)}`);
    }
  }
  return {count: a.length, diffs};
}"""


@pytest.mark.browser
def test_lab_static_html_looks_like_the_live_view(page, server):
    """The same finished turn as the live widget and as the static HTML: same elements, same styles, same sizes."""
    name = server.write_notebook(
        "lab_side_by_side.ipynb",
        SETUP,
        SIDE_BY_SIDE.format(prompt="Explain in a few lines what a streaming model API sends."),
        SIDE_BY_SIDE.format(prompt="What's the weather in Paris?"),
    )
    open_lab(page, server, name, "side")
    run_all_via_menu(page)
    for index in (1, 2):
        cell = cells(page).nth(index)
        cell.locator(".jp-OutputArea-output .mmsp-turn.mmsp-static").wait_for(timeout=60_000)
        cell.locator(".jp-OutputArea-output .mmsp-turn:not(.mmsp-static) .mmsp-footer .mmsp-tokens").wait_for()
        wait_cell_done(page, index)
    page.wait_for_timeout(300)  # images decoded, fonts settled
    for index, kind in ((1, ".mmsp-md table"), (2, ".mmsp-tool")):
        cell = cells(page).nth(index)
        assert cell.locator(f".mmsp-static {kind}").count() >= 1
        result = cell.evaluate(COMPARE_STYLES)
        assert result["count"] > 20 and not result["diffs"], "\n".join(result["diffs"][:60])
    assert not page.errors, page.errors
    save_screenshot(page, "lab_side_by_side.png")
