"""Static renderings: Markdown rendered and sanitized, hostile model output inert."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import pytest

import mmsp_notebook as m
from mmsp_notebook.engine.tools import ToolSet
from mmsp_notebook.views.html import render_html, render_markdown, render_text
from mmsp_notebook.views.model import present_view
from mmsp_notebook.views.static import turn_bundle

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "<svg onload=alert(1)><circle/></svg>",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=//evil></iframe>",
    "[x](JaVaScRiPt:alert(1))",
    "![i](javascript:alert(1))",
    '<div style="background:url(javascript:alert(1))">',
]


class Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def assert_inert(markup: str) -> None:
    from mmsp_notebook.views.html import COPY_SCRIPT

    markup = markup.replace(COPY_SCRIPT, "")  # the copy buttons' own script, the only one a view writes
    parser = Collector()
    parser.feed(markup)
    for tag, attrs in parser.tags:
        assert tag not in ("script", "svg", "iframe", "object", "embed", "math", "form"), tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            value = (value or "").strip().lower()
            if name in ("href", "src", "action", "formaction", "xlink:href"):
                assert not value.startswith(("javascript:", "vbscript:", "data:text")), (tag, name, value)
            if tag == "img" and name == "src":
                assert value.startswith(("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/webp;"))
            if tag == "audio" and name == "src":
                assert value.startswith("data:audio/")
        assert "style" not in attrs or "url(" not in attrs["style"]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_markdown_renderer_neutralises_payloads(payload):
    assert_inert(render_markdown(payload))


def test_markdown_images_are_their_alt_text_never_loaded():
    out = render_markdown("see ![a *chart* <b>](https://track.example/p.png?q=secret) and ![dot](data:image/png;base64,AAAA)")
    assert out == "<p>see a chart &lt;b&gt; and dot</p>\n"


def test_markdown_renders_tables_code_lists():
    out = render_markdown("# T\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```py\nprint(1 < 2)\n```\n")
    assert "<h1>" in out and "<li>a</li>" in out and "<table>" in out and "print(1 &lt; 2)" in out
    assert 'rel="noopener noreferrer nofollow"' in render_markdown("[a](https://example.com)")


class Tree(HTMLParser):
    """Each start tag with its attributes and the tags open around it."""

    def __init__(self):
        super().__init__()
        self.stack, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs), tuple(self.stack)))
        self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.stack:
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(tag):]


def _tree(markup):
    tree = Tree()
    tree.feed(markup)
    return tree.tags


def test_markdown_math_becomes_mathml():
    from mmsp_notebook.views.markdown import MATH_TAGS

    out = render_markdown("inline $x^2$ and \\(a+b\\)\n\n$$\n\\frac{1}{2}\n$$\n\n\\[ \\sqrt{y} \\]\n")
    tags = _tree(out)
    maths = [attrs for tag, attrs, _ in tags if tag == "math"]
    assert [a.get("display") for a in maths] == ["inline", "inline", "block", "block"]
    inside = {tag for tag, _, around in tags if "math" in around}
    assert {"msup", "mfrac", "msqrt"} <= inside <= MATH_TAGS
    assert "$" not in re.sub(r"<[^>]*>", "", out)


@pytest.mark.parametrize("text", ["it costs $5 and $10", "from $5-$10", "between $ 5 and $ 6", "a $x$5", "\\$x\\$",
                                  "`$x$`", "```\n$$y$$\n```"])
def test_markdown_prices_and_code_keep_their_dollars_beside_a_formula(text):
    out = render_markdown(f"$y^2$\n\n{text}")
    assert out.count("<math") == 1 and "$" in out.split("</math>", 1)[1]
    assert "<math" not in render_markdown(text)


def test_markdown_math_error_shows_the_source_escaped():
    out = render_markdown("bad $\\begin{x}<b>$ end")
    assert '<span class="mmsp-math-error">$\\begin{x}&lt;b&gt;$</span>' in out and "<math" not in out


def test_markdown_math_hostile_payloads_leave_nothing_scriptable():
    from mmsp_notebook.views.markdown import MATH_ATTRS, sanitize

    out = render_markdown("$\\href{javascript:alert(1)}{x}$ \\(\\url{javascript:alert(2)}\\)\n\n"
                          '<math><maction actiontype="statusline"><mi>x</mi></maction></math>')
    assert "<math" in out and not any(tag in ("maction", "annotation-xml") for tag, _, _ in _tree(out))
    assert all("href" not in attrs and "style" not in attrs for _, attrs, _ in _tree(out))
    assert '&lt;math&gt;&lt;maction actiontype="statusline"&gt;' in out
    # what the sanitizer does with MathML that Markdown never produces
    out = sanitize('<p><math display="block" style="color:red" href="javascript:alert(1)" onclick="alert(1)">'
                   '<annotation-xml encoding="text/html"><img src="x" onerror="alert(1)"></annotation-xml>'
                   '<maction actiontype="statusline"><mi xlink:href="javascript:alert(1)" class="c" id="i">y</mi></maction>'
                   '<semantics><mi>z</mi><annotation encoding="text/html">zz</annotation></semantics></math></p>')
    tags = _tree(out)
    assert {tag for tag, _, _ in tags} == {"p", "math", "mi"}
    assert all(set(attrs) <= MATH_ATTRS for tag, attrs, _ in tags)
    assert re.sub(r"<[^>]*>", "", out) == "yz"


def test_hostile_demo_stream_renders_inert_in_every_area(fresh_session):
    def lookup(query: str) -> str:
        """Look something up."""
        return "<script>alert('result')</script><img src=x onerror=alert(2)>"

    tools = ToolSet({"<img src=x onerror=alert(1)>": lookup, "lookup": lookup})
    turn = m.ask("please lookup Paris", model="demo+xss", tools=tools, stream=io.StringIO())
    assert turn.status == "complete", turn.error
    assert "<script>" in turn.thinking and "<script>" in turn.text  # the payloads really arrived
    assert any("<" in c["name"] or "<" in str(c["arguments"]) for c in turn.tool_calls)
    html = render_html(turn)
    assert_inert(html)
    assert "&lt;script&gt;" in html  # shown as text, not dropped silently
    text = render_text(turn)
    assert "<script>" in text  # plain text is not HTML


def test_images_and_audio_are_data_urls_of_allowed_types(fresh_session):
    turn = m.ask("draw a tree", stream=io.StringIO())
    html = render_html(turn)
    assert '<img class="mmsp-img" src="data:image/png;base64,' in html
    assert 'alt="generated image (image/png)"' in html
    assert_inert(html)
    turn = m.ask("say something", stream=io.StringIO())
    html = render_html(turn)
    assert '<audio class="mmsp-audio-player" controls src="data:audio/wav;base64,' in html
    assert_inert(html)


def test_media_of_other_types_or_urls_is_not_shown():
    vm = present_view({"status": "complete", "footer": None, "error": None, "status_text": "", "items": [
        {"i": 0, "kind": "image", "status": "done", "mime_type": "image/svg+xml",
         "src": "data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"},
        {"i": 1, "kind": "image", "status": "done", "mime_type": "image/png", "src": "javascript:alert(1)"},
        {"i": 2, "kind": "image", "status": "done", "mime_type": "image/png", "src": "https://evil.example/x.png"},
        {"i": 3, "kind": "audio", "status": "done", "mime_type": "audio/wav", "src": "data:text/html;base64,PHNjcmlwdD4="},
    ]})
    html = render_html(None, vm)
    assert_inert(html)
    assert "<img" not in html and "<audio" not in html and "javascript:" not in html and "evil.example" not in html
    assert html.count('<div class="mmsp-meta mmsp-rejected">') == 4


def test_statuses_show_in_static_view(fresh_session):
    turn = m.ask("hello", model="demo+cut-text", stream=io.StringIO())
    html = render_html(turn)
    assert ('<div class="mmsp-status mmsp-banner mmsp-warn" role="status" aria-live="polite"><span class="mmsp-banner-text">'
            "ended without a stop event — the answer may be cut off</span>"
            '<div class="mmsp-banner-detail">RemoteProtocolError: ') in html
    turn = m.ask("hello", model="demo+401", stream=io.StringIO())
    html = render_html(turn)
    assert ('class="mmsp-status mmsp-banner mmsp-error" role="status" aria-live="polite">'
            '<strong class="mmsp-banner-lead">UpstreamError: </strong>') in html
    assert 'data-status="error"' in html
    bundle = turn_bundle(turn)
    assert set(bundle) == {"text/plain", "text/html"}


def test_api_keys_never_appear_in_outputs_traces_or_transcripts(fresh_session, monkeypatch, tmp_path):
    secret = "sk-canary-1234567890abcdefghij"
    monkeypatch.setenv("CANARY_API_KEY", secret)
    srv = fresh_session.demo_server()
    outputs = []
    for model in ("demo", "demo+401", "demo+error"):
        turn = m.ask("hello", model=model, client_type="openai-chat", base_url=srv.base_url,
                     api_key_env="CANARY_API_KEY", stream=io.StringIO())
        assert turn.model == model
        outputs += [render_html(turn), render_text(turn), repr(turn), str(turn.error_message), str(turn.config)]
    assert all(secret not in out for out in outputs)
    assert fresh_session.turns[0].status == "complete"  # the key really was used
    for path in (tmp_path / "cache").rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    for transcript in srv.transcripts:
        assert secret not in repr(vars(transcript)) if hasattr(transcript, "__dict__") else secret not in repr(transcript)


# ---------------------------------------------------------------------------------------------- the widget's DOM
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
WAV = "data:audio/wav;base64,UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
MARKDOWN = ("# Title\n\nSome **bold** and `code`, a [link](https://example.com \"a <pre> title\").\n\n- a\n- b\n\n"
            "1. one\n2. two\n\n> quoted\n\n| x | y |\n|---|--:|\n| 1 | 2 |\n\n```python\nprint('hi' < \"x\")\n```\n\n"
            "```<pre>\"x\nno language\n```\n\n    indented code\n\n---\n\n~~gone~~ done.")
FOOTER = {"usage": {"cached_tokens": 0, "prompt_tokens": 1200, "thoughts_tokens": 30, "response_tokens": 80},
          "finish_reason": "stop", "ttft": 0.41, "total": 2.2, "tokens_per_second": 54.2, "cost": 0.0012,
          "cost_text": "$0.0012", "steps": 2}


def _vm(status, items, footer=None, error=None, status_text=""):
    """A view model from hand-written facts, as the model presents them."""
    return present_view({"id": "t1", "model": "demo", "status": status, "items": items, "footer": footer,
                         "error": error, "status_text": status_text})


VMS = {
    "every kind": _vm("complete", [
        {"i": 0, "kind": "thinking", "status": "done", "text": "Let me think.\n  <b>Step</b> 2.", "duration": 3.25,
         "fidelity": ["signature"]},
        {"i": 1, "kind": "text", "status": "done", "text": MARKDOWN, "fidelity": []},
        {"i": 2, "kind": "tool_call", "status": "done", "name": "get_weather", "tool_call_id": "c1",
         "text": '{"city": "Paris"}', "arguments": {"city": "Paris", "days": [1, 2], "opts": {}},
         "result": {"ok": True, "output": "18 °C", "error": None, "duration": 0.004, "running": False}},
        {"i": 3, "kind": "tool_call", "status": "done", "name": "<b>bad</b>", "tool_call_id": None, "text": "{}",
         "arguments": {}, "result": {"ok": False, "output": None, "error": "ValueError: no <city>", "duration": 12.5,
                                     "running": False}},
        {"i": 4, "kind": "tool_call", "status": "done", "name": "structured", "tool_call_id": "c3", "text": "{}",
         "arguments": {}, "result": {"ok": True, "output": {"a": [1, 2]}, "error": None, "duration": 75.2,
                                     "running": False}},
        {"i": 5, "kind": "image", "status": "done", "mime_type": "image/png", "src": PNG},
        {"i": 6, "kind": "image", "status": "done", "mime_type": "image/svg+xml", "src": "data:image/svg+xml;base64,PHN2Zz4="},
        {"i": 7, "kind": "image", "status": "done", "mime_type": "image/png", "src": None},
        {"i": 8, "kind": "audio", "status": "done", "mime_type": "audio/wav", "src": WAV, "seconds": 1.5},
        {"i": 9, "kind": "audio", "status": "done", "mime_type": "audio/wav", "src": "https://x.example/a.wav"},
        {"i": 10, "kind": "embedding", "status": "done", "dims": 64, "norm": 1.0,
         "preview": [0.1, -0.2, 0.3, None, 0.5, 0.6, 0.7, 0.8]},
        {"i": 11, "kind": "embedding", "status": "done", "dims": 3, "norm": None, "preview": [0.1, 0.2, 0.3]},
        {"i": 12, "kind": "inline_thinking", "status": "done", "mime_type": "application/octet-stream",
         "bytes": 120_000, "fidelity": ["signature"]},
        {"i": 13, "kind": "data", "status": "done", "mime_type": "application/pdf", "bytes": 5120},
    ], footer=FOOTER),
    "incomplete, thinking last": _vm("incomplete", [
        {"i": 0, "kind": "text", "status": "done", "text": "partial"},
        {"i": 1, "kind": "thinking", "status": "done", "text": "more", "duration": None, "fidelity": []},
    ], footer={**FOOTER, "finish_reason": "length", "tokens_per_second": None, "cost_text": "price unknown",
               "steps": 1},
        error={"type": "RemoteProtocolError", "message": "peer closed", "hint": "retry"},
        status_text="ended without a stop event — the answer may be cut off"),
    "error": _vm("error", [], footer={"usage": {}, "finish_reason": None, "ttft": None, "total": 0.1,
                                      "tokens_per_second": None, "cost": None, "cost_text": "price unknown", "steps": 1},
                 error={"type": "UpstreamError", "message": "401 <unauthorized>", "hint": "Set OPENAI_API_KEY"}),
    "cancelled mid-stream": _vm("cancelled", [
        {"i": 0, "kind": "thinking", "status": "streaming", "text": "hmm", "fidelity": []},
        {"i": 1, "kind": "tool_call", "status": "streaming", "name": "f", "tool_call_id": "c", "text": '{"a": ',
         "result": None},
        {"i": 2, "kind": "tool_call", "status": "done", "name": "g", "tool_call_id": "d", "text": "{}",
         "arguments": {}, "result": {"ok": None, "output": None, "error": None, "duration": None, "running": True}},
        {"i": 3, "kind": "data", "status": "streaming", "mime_type": "application/pdf", "bytes": 10},
    ], status_text="cancelled — partial output kept"),
    "complete with a note": _vm("complete", [{"i": 0, "kind": "text", "status": "done", "text": "hi"}],
                                footer={**FOOTER, "finish_reason": "tool_calls"}, status_text="2 tool calls skipped"),
    "streaming": _vm("streaming", [
        {"i": 0, "kind": "thinking", "status": "streaming", "text": "hmm", "fidelity": []},
        {"i": 1, "kind": "tool_call", "status": "done", "name": "g", "tool_call_id": "d", "text": "{}",
         "arguments": {}, "result": {"ok": None, "output": None, "error": None, "duration": None, "running": True}},
        {"i": 2, "kind": "embedding", "status": "streaming"},
    ]),
}


def _skeletons(cases: list[dict]) -> list[dict]:
    import json
    import shutil
    import subprocess
    from pathlib import Path

    from helpers import require
    node = shutil.which("node")
    require(node is not None, "node")
    here = Path(__file__).resolve().parent
    require((here.parent / "js" / "node_modules" / "jsdom").is_dir(), "js/node_modules (cd js && npm ci)")
    done = subprocess.run([node, str(here / "dom_skeleton.mjs")], input=json.dumps({"cases": cases}),
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def _assert_same(widget: list, static: list, what: str) -> None:
    if widget == static:
        return
    at = next((k for k, (a, b) in enumerate(zip(widget, static)) if a != b), min(len(widget), len(static)))
    raise AssertionError(f"{what}: the static DOM differs from the widget's at node {at}:\n"
                         f"  widget: {widget[max(0, at - 2):at + 3]}\n  static: {static[max(0, at - 2):at + 3]}")


def test_static_html_is_the_widgets_dom():
    """render_html draws what js/src/render.js draws for the same view model: elements, classes, text."""
    names = list(VMS)
    results = _skeletons([{"vm": VMS[name], "html": render_html(None, VMS[name])} for name in names])
    for name, result in zip(names, results):
        assert len(result["widget"]) > 5, result
        _assert_same(result["widget"], result["static"], name)


def test_static_html_is_the_live_views_last_frame(fresh_session):
    """A real turn, events table included: the live view fed with its ops ends as the static HTML starts."""
    from mmsp_notebook.views.model import OpsTracker, view_model

    cases, turns = [], []
    for prompt, kwargs in (("weather in Paris please", {"tools": ToolSet({"get_weather": lambda city: f"sunny in {city}"})}),
                           ("draw a tree", {}), ("say hi", {}), ("hello", {"model": "demo+cut-text"})):
        turn = m.ask(prompt, stream=io.StringIO(), **kwargs)
        turns.append(turn)
        cases.append({"ops": OpsTracker(events=True).ops(turn, final=True), "html": render_html(turn, view_model(turn), events=True)})
    assert {t.status for t in turns} == {"complete", "incomplete"}
    for turn, result in zip(turns, _skeletons(cases)):
        assert any(node[1] == "table" for node in result["widget"]), "no events table"
        _assert_same(result["widget"], result["static"], f"{turn.model}: {turn.text[:40]!r}")


def test_static_html_embeds_the_widget_css_and_nothing_interactive(fresh_session):
    from pathlib import Path

    from mmsp_notebook.views.html import CSS, TURN_CLASSES, css_for, turn_rules
    from mmsp_notebook.views.model import view_model

    tools = ToolSet({"get_weather": lambda city: f"sunny in {city}"})
    turn = m.ask("weather in Paris please", tools=tools, stream=io.StringIO())
    html = render_html(turn)
    widget_css = (Path(m.__file__).parent / "static" / "widget.css").read_text().strip()
    # the widget's own rules for a turn, one class more specific (.mmsp-root.mmsp-static) than the host page's
    turn_css = turn_rules(widget_css)
    assert re.sub(r"\.mmsp-root(?![\w-])", ".mmsp-root.mmsp-static", turn_css) in CSS
    # ... and only the chat's and the buttons' rules left out
    assert len(turn_css) > 0.5 * len(widget_css) and ".mmsp-tool-result-label" in turn_css and "@keyframes" in turn_css
    assert not {"mmsp-chat", "mmsp-composer", "mmsp-btn", "mmsp-copy-code"} & set(re.findall(r"\.(mmsp-[\w-]+)", CSS))
    assert turn_rules(".mmsp-root .mmsp-tool,.mmsp-root .mmsp-chat .x{a:b}@media (x){.mmsp-root .mmsp-btn{c:d}}") == \
        ".mmsp-root .mmsp-tool{a:b}"
    # every class the template writes is one the kept rules may style
    written = {c for name in VMS for attr in re.findall(r'class="([^"]*)"', render_html(None, VMS[name]) + html)
               for c in attr.split()}
    assert {c for c in written if c.startswith("mmsp-")} <= TURN_CLASSES, \
        {c for c in written if c.startswith("mmsp-")} - TURN_CLASSES
    # one stylesheet, with the rules of the classes this turn uses only: a tool turn's, not an image's
    style = re.search(r"<style>(.*?)</style>", html).group(1)
    assert html.count("<style>") == 1 and style == css_for(html)
    assert ".mmsp-tool-result-label" in style and ".mmsp-img" not in style and ".mmsp-events-table" not in style
    # scoped: nothing leaks into the page. One nested block under the static root (the scope written
    # once), the keyframes, and the padding JupyterLab puts around HTML outputs only, taken off
    # around this view so it keeps the live view's width
    from mmsp_notebook.views.html import _blocks, nest

    heads = [head for head, _ in _blocks(style)]
    assert heads[0] == ".mmsp-root.mmsp-static" and set(heads[1:]) <= {
        "@keyframes mmsp-pulse", ".jp-RenderedHTMLCommon:has(>.mmsp-root.mmsp-static)"}, heads
    assert '<div class="mmsp-root mmsp-turn mmsp-static" data-status="complete">' in html
    assert nest(".mmsp-root.mmsp-static .a,.mmsp-root.mmsp-static.b{x:y}[t] .mmsp-root.mmsp-static{z:w}.mmsp-root.mmsp-static table{v:u}"
                "@media (q){.mmsp-root.mmsp-static .c{d:e}}.other{f:g}") == \
        ".mmsp-root.mmsp-static{.a,&.b{x:y}[t] &{z:w}& table{v:u}@media (q){.c{d:e}}}.other{f:g}"
    assert len(style) < 0.6 * len(CSS)  # about half of the whole turn stylesheet every output used to carry
    for tag in ("<button", "<script", "<input", "<textarea", "<select", "<form", "onclick", "contenteditable"):
        assert tag not in html
    assert 'class="mmsp-tool-icon" aria-hidden="true">⚙</span> <span class="mmsp-tool-label">tool call</span> ' \
           '<code class="mmsp-tool-name" dir="auto" title="id ' in html
    assert '<span class="mmsp-tool-result-label">result</span>' in html and "sunny in Paris" in html
    assert '<span class="mmsp-badge" title="fidelity: signature">signed</span>' in html
    assert '<details class="mmsp-details"><summary class="mmsp-summary"><span class="mmsp-summary-label">Thought for' in html
    assert '<span class="mmsp-stat mmsp-tokens" title="token usage per bucket">tokens cached 0 · prompt ' in html
    assert '<span class="mmsp-sep"> · </span><span class="mmsp-stat mmsp-steps" title="model calls in this turn">2 steps</span>' in html
    # the events table on its own, and the one-line footer of the terminal view and text/plain
    from mmsp_notebook.views.html import footer_line, render_events

    events = render_events(turn, limit=3)
    assert '<div class="mmsp-root mmsp-static"><details class="mmsp-events" open>' in events and "<td>0</td>" in events
    assert events.count("<tr>") == 4 and "more events</div>" in events and "<button" not in events
    assert assert_inert(events) is None and "<td>stop</td>" in render_events(turn)
    line = footer_line(view_model(turn)["footer"])
    assert line.startswith("tokens cached 0 · prompt ") and " | 2 steps" in line and line in render_text(turn)


def test_code_frames_are_added_outside_attribute_values():
    """The widget's code frame goes around each <pre>, never inside a link title that reads "<pre>"."""
    html = render_html(None, VMS["every kind"])
    assert_inert(html)

    class Depth(HTMLParser):
        def __init__(self):
            super().__init__()
            self.stack, self.titles, self.langs = [], [], []
            self.in_lang = False

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag not in ("img", "br", "hr"):
                self.stack.append(tag)
            if tag == "a":
                self.titles.append(attrs.get("title"))
            self.in_lang = attrs.get("class") == "mmsp-code-lang"

        def handle_startendtag(self, tag, attrs):
            assert tag in ("img", "br", "hr"), tag

        def handle_endtag(self, tag):
            assert self.stack and self.stack.pop() == tag, (tag, self.stack)

        def handle_data(self, data):
            if self.in_lang:
                self.langs.append(data)

    parser = Depth()
    parser.feed(html)
    assert parser.stack == [] and parser.titles == ["a <pre> title"]
    assert html.count('<div class="mmsp-code">') == html.count("<pre>") == 3
    assert parser.langs == ["python", '<pre>"x']
    assert '<span class="mmsp-code-lang">&lt;pre&gt;&quot;x</span>' in html


# ---------------------------------------------------------------------------------------------- text views, bundles
def test_the_text_views_write_the_models_strings(fresh_session):
    """The terminal (TextLive) and text/plain lay out the view model's tags, results, banner and footer."""
    from mmsp_notebook.views.model import view_model
    from mmsp_notebook.views.text import banner_line, banner_lines

    out = io.StringIO()
    turn = m.ask("weather in Paris please", tools=ToolSet({"get_weather": lambda city: f"sunny in {city}"}), stream=out)
    vm = view_model(turn)
    footer = " | ".join(s[1] for s in vm["footer"]["stats"])
    [card] = [it for it in vm["items"] if it["kind"] == "tool_call"]
    thinking = vm["items"][0]
    for shown in (out.getvalue(), render_text(turn)):
        assert footer in shown and "tokens cached 0 · prompt " in footer and footer.endswith(" | 2 steps")
        assert "[tool call] get_weather " in shown and f"\n  {card['state_text']} sunny in Paris" in shown
    assert out.getvalue().startswith("[thinking] ")
    assert render_text(turn).startswith(f"[{thinking['label']}] ") and thinking["label"].startswith("Thought for ")
    assert f"[tool call] get_weather {card['args']}\n  returned sunny in Paris" in render_text(turn)

    out = io.StringIO()
    turn = m.ask("hello", model="demo+cut-text", stream=out)
    banner = view_model(turn)["banner"]
    for shown in (out.getvalue(), render_text(turn)):
        assert f"[incomplete] {banner['text']}\n{banner['detail']}\n{banner['hint']}\n" in shown + "\n"
    assert banner_line(banner) == f"{banner['text']} — {banner['detail']} — {banner['hint']}"
    out = io.StringIO()
    turn = m.ask("hi", model="demo+401", stream=out)
    first, hint = banner_lines(view_model(turn)["banner"])
    assert first.startswith("UpstreamError: ") and out.getvalue().startswith(f"[error] {first}\n{hint}\n")


def test_a_long_area_is_cut_alike_in_text_and_html_each_note_naming_where_the_turn_keeps_it_whole(fresh_session):
    """text/plain shows less of an area than the HTML, which is cut too: each cut one says how many
    characters are not shown and where the whole is (the turn, never the other output)."""
    from mmsp_notebook.views.html import turn_markup
    from mmsp_notebook.views.model import view_model
    from mmsp_notebook.views.text import HTML_TEXT_LIMIT, PLAIN_TEXT_LIMIT, WHOLE_IN

    assert PLAIN_TEXT_LIMIT <= HTML_TEXT_LIMIT
    turn = m.ask("weather in Paris please", tools=ToolSet({"get_weather": lambda city: f"sunny in {city}"}),
                 stream=io.StringIO())
    vm = view_model(turn)
    size = HTML_TEXT_LIMIT + 1234  # each area longer than both caps
    for item in vm["items"]:
        if item["kind"] in ("text", "thinking"):
            item["text"] = "a" * size
        elif item["kind"] == "tool_call":
            item["args"] = '"' + "b" * (size - 2) + '"'
    assert {item["kind"] for item in vm["items"]} >= set(WHOLE_IN)
    plain, html = render_text(turn, vm, limit=PLAIN_TEXT_LIMIT), turn_markup(vm)
    for kind, where in WHOLE_IN.items():
        count = sum(1 for item in vm["items"] if item["kind"] == kind)
        assert plain.count(f"… [{size - PLAIN_TEXT_LIMIT:,} characters not shown — {where} has all]") == count, kind
        assert html.count(f"… {size - HTML_TEXT_LIMIT:,} characters not shown — <code>{where}</code> has all") == count
    assert "HTML" not in plain and "a" * (PLAIN_TEXT_LIMIT + 1) not in plain and "b" * PLAIN_TEXT_LIMIT not in plain
    # a real answer between the caps: text/plain cut (as the finished output, a turn shown as a value),
    # the HTML whole
    turn = m.ask("write", model="demo+tokens=2000", stream=io.StringIO())
    assert PLAIN_TEXT_LIMIT < len(turn.text) < HTML_TEXT_LIMIT
    bundle = turn_bundle(turn)
    assert bundle["text/plain"] == render_text(turn, limit=PLAIN_TEXT_LIMIT)
    assert f"… [{len(turn.text) - PLAIN_TEXT_LIMIT:,} characters not shown — turn.text has all]" in bundle["text/plain"]
    assert "characters not shown" not in bundle["text/html"]


def test_the_committed_bundles_are_what_js_src_builds(tmp_path):
    """mmsp_notebook/static is js/src built: a build into a temporary directory gives the same bytes."""
    import shutil
    import subprocess
    from pathlib import Path

    from helpers import require

    node = shutil.which("node")
    require(node is not None, "node")
    js = Path(__file__).resolve().parent.parent / "js"
    require((js / "node_modules" / "esbuild").is_dir(), "js/node_modules (cd js && npm ci)")
    subprocess.run([node, str(js / "build.mjs"), "--outdir", str(tmp_path)], check=True, capture_output=True,
                   timeout=120)
    static = Path(m.__file__).parent / "static"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in static.iterdir())
    for built in tmp_path.iterdir():
        assert built.read_bytes() == (static / built.name).read_bytes(), \
            f"mmsp_notebook/static/{built.name} is not what js/src builds: run `cd js && npm run build` and commit it"


# ---------------------------------------------------------------------------------------------- bidi
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: the text after it is drawn reversed, up to the end of its isolate


def test_isolate_wraps_only_text_with_bidi_controls_and_keeps_its_overrides_inside():
    from mmsp_notebook.views.format import isolate

    assert isolate("get_weather") == "get_weather" and isolate(None) == ""
    assert isolate(f"evil{RLO}txt.exe") == f"\u2068evil{RLO}txt.exe\u2069"
    # a PDI of its own would close the wrapper early: dropped; the isolates it opens are closed
    assert isolate("a\u2069\u202eb") == "\u2068a\u202eb\u2069"
    assert isolate("a\u2067b") == "\u2068a\u2067b\u2069\u2069"


def test_names_a_model_gives_are_isolated_in_the_static_html(fresh_session):
    from mmsp_notebook.views.columns import render_comparison_html
    from mmsp_notebook.views.conversation import build_conversation

    name = f"get{RLO}weather"
    turn = m.ask(f"please {name} Paris", tools=ToolSet({name: lambda city: f"sunny in {city}"}),
                 stream=io.StringIO())
    assert turn.tool_calls and turn.tool_calls[0]["name"] == name
    html = render_html(turn)
    assert re.search(rf'<code class="mmsp-tool-name" dir="auto"[^>]*>{name}</code>', html), html
    assert '[dir=auto]{unicode-bidi:isolate}' in html  # the stylesheet says so too, where one applies
    compared = render_comparison_html([f"demo{RLO}x", "demo"], [turn, turn])
    assert f'<div class="mmsp-column-head" dir="auto">demo{RLO}x</div>' in compared
    assert f'<th dir="auto">demo{RLO}x</th>' in compared
    conv = build_conversation([{"role": "user", "content_items": [{"type": "text.done", "text": "hi"}]},
                               {"role": "assistant", "content_items": [{"type": "text.done", "text": "yo"}]}],
                              {"model": f"m{RLO}odel"}, [], trace_id="t")
    label = next(e["label"] for e in conv["entries"] if e["kind"] == "assistant")
    assert label.endswith(f" · \u2068m{RLO}odel\u2069 · no timing"), label


def test_names_a_model_gives_are_isolated_where_the_text_views_join_them_into_a_line(fresh_session, tmp_path):
    """A tool's name, a finish reason, an error's type, a compared model's label: each wrapped in FSI … PDI
    in the text views' lines (terminal, text/plain), as in the HTML, so an override in it ends with it."""
    import json
    from types import SimpleNamespace

    from mmsp_notebook.demo import DemoServer
    from mmsp_notebook.views.columns import ColumnsText, render_comparison_text
    from mmsp_notebook.views.model import present_turn, view_model
    from mmsp_notebook.views.text import banner_line, banner_lines, footer_line

    fsi, pdi = "\u2068", "\u2069"
    name = f"get{RLO}weather"
    out = io.StringIO()
    turn = m.ask(f"please {name} Paris", tools=ToolSet({name: lambda city: f"sunny in {city}"}), stream=out)
    [card] = [item for item in view_model(turn)["items"] if item["kind"] == "tool_call"]
    assert f"[tool call] {fsi}{name}{pdi} {card['args']}\n  returned sunny in Paris" in render_text(turn)
    for shown in (out.getvalue(), render_text(turn), turn_bundle(turn)["text/plain"]):
        assert f"\n[tool call] {fsi}{name}{pdi} {{" in shown and f"[tool call] {name}" not in shown
    # a finish reason (not a normal one: a warning): the footer's line goes on after it
    path = tmp_path / "finish.sse"
    path.write_text("".join("data: " + json.dumps({"role": "assistant", "event_type": kind, "content_items": items,
                                                   "usage_metadata": usage, "finish_reason": reason}) + "\n\n"
                            for kind, items, usage, reason in (
                                ("delta", [{"type": "text.delta", "text": "hi"}], None, None),
                                ("delta", [{"type": "text.done", "text": "hi"}], None, None),
                                ("stop", [], {"prompt_tokens": 1, "response_tokens": 1}, f"sto{RLO}p")))
                    + "data: [DONE]\n\n", encoding="utf-8")
    with DemoServer(replay=path, replay_protocol="mmsp", instant=True) as server:
        out = io.StringIO()
        turn = m.ask("hi", model="captured", client_type="mmsp", base_url=server.base_url, stream=out, trace=False)
    line = footer_line(view_model(turn)["footer"])
    assert f" | ⚠ finish: {fsi}sto{RLO}p{pdi} | TTFT " in line and line in out.getvalue() and line in render_text(turn)
    # an error's type before its message, and the banner joined into one line (a chat's error line)
    banner = present_turn({"status": "error", "error": {"type": f"Bad{RLO}Error", "message": f"no{RLO}pe",
                                                        "hint": "Try again."}})["banner"]
    assert banner_lines(banner) == [f"{fsi}Bad{RLO}Error{pdi}: no{RLO}pe", "Try again."]
    assert banner_line(banner) == f"{fsi}{fsi}Bad{RLO}Error{pdi}: no{RLO}pe{pdi} — Try again."
    # a compared model's label, in the comparison's text and the terminal's lines
    labels = [f"demo{RLO}x", "demo"]
    text = render_comparison_text(labels, [turn, turn])
    assert text.startswith(f"── {fsi}demo{RLO}x{pdi} ─") and f"  {fsi}demo{RLO}x{pdi}  " in text
    out = io.StringIO()
    ColumnsText(out).update(SimpleNamespace(labels=labels, turns=[turn, turn]))
    assert out.getvalue().startswith(f"[{fsi}demo{RLO}x{pdi}] complete\n")


def test_a_long_user_message_shows_its_start_and_the_rest_behind_show_more():
    from mmsp_notebook.views.html import render_transcript_html

    long = "\n".join(f"line {k}" for k in range(500))
    html = render_transcript_html([{"role": "user", "text": "short", "images": []},
                                   {"role": "user", "text": long, "images": []}])
    assert '<div class="mmsp-user-text">short</div></div>' in html  # a short one as it was
    head = "\n".join(f"line {k}" for k in range(12))
    rest = "\n".join(f"line {k}" for k in range(12, 500))
    assert (f'<div class="mmsp-user-text">{head}</div><details class="mmsp-more"><summary>Show more (488 more lines)'
            f'</summary><div class="mmsp-user-text">{rest}</div></details>') in html
    one_line = render_transcript_html([{"role": "user", "text": "word " * 1000, "images": []}])
    assert '<details class="mmsp-more"><summary>Show more (1 more line)</summary>' in one_line
    assert ".mmsp-more>summary{" in one_line or "details.mmsp-more>summary{" in one_line
    assert_inert(html)


def test_a_transcript_renders_again_only_the_entries_it_has_not_seen(monkeypatch):
    from mmsp_notebook.views import html as views_html

    def answer(k):
        return {"role": "assistant", "turn": {"status": "complete",
                                              "items": [{"i": 0, "type": "text", "text": f"**answer {k}**", "done": True}]}}

    transcript = [{"role": "user", "text": "q0", "images": []}, answer(0)]
    drawn = []
    real = views_html.turn_markup
    monkeypatch.setattr(views_html, "turn_markup", lambda vm, *a: drawn.append(vm) or real(vm, *a))
    memo: dict = {}
    first = views_html.render_transcript_html(transcript, memo)
    assert len(drawn) == 1 and first == views_html.render_transcript_html(transcript)
    longer = [*transcript, {"role": "user", "text": "q1", "images": []}, answer(1)]
    drawn.clear()
    again = views_html.render_transcript_html(longer, memo)
    assert drawn == [longer[3]["turn"]]  # only the new answer
    assert again == views_html.render_transcript_html(longer)
    # an entry replaced by an equal but other object (a history set anew) is drawn again; the memo
    # holds the entries of the last transcript only
    drawn.clear()
    views_html.render_transcript_html([longer[0], answer(0)], memo)
    assert len(drawn) == 1 and len(memo) == 2
