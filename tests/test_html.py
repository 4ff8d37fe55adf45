"""Static renderings: Markdown rendered and sanitized, hostile model output inert."""

from __future__ import annotations

import io
from html.parser import HTMLParser

import pytest
from helpers import fresh_session  # noqa: F401

import mmsp_notebook as m
from mmsp_notebook._html import render_html, render_markdown, render_text
from mmsp_notebook._tools import ToolSet

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


def test_markdown_renders_tables_code_lists():
    out = render_markdown("# T\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\n```py\nprint(1 < 2)\n```\n")
    assert "<h1>" in out and "<li>a</li>" in out and "<table>" in out and "print(1 &lt; 2)" in out
    assert 'rel="noopener noreferrer nofollow"' in render_markdown("[a](https://example.com)")


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
    assert '<img alt="image from the model" src="data:image/png;base64,' in html
    turn = m.ask("say something", stream=io.StringIO())
    html = render_html(turn)
    assert '<audio controls src="data:audio/wav;base64,' in html
    assert_inert(html)


def test_statuses_show_in_static_view(fresh_session):
    turn = m.ask("hello", model="demo+cut-text", stream=io.StringIO())
    html = render_html(turn)
    assert "ended without a stop event" in html and "RemoteProtocolError" in html
    turn = m.ask("hello", model="demo+401", stream=io.StringIO())
    assert "UpstreamError" in render_html(turn)
    bundle = turn._repr_mimebundle_()
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
